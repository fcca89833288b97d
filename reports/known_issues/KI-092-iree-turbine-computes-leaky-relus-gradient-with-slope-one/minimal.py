"""KI-092: iree-turbine's backward of leaky_relu(x, 0.01) is wrong for x < 0 (0.98, not 0.01) (exits 1 while the bug lives)"""
import torch
import torch.nn.functional as F

x = torch.tensor([[-2.0, 3.0]], requires_grad=True)
F.leaky_relu(x, negative_slope=0.01).sum().backward()
expected, x.grad = x.grad, None  # eager: [[0.01, 1.0]]
torch.compile(lambda t: F.leaky_relu(t, negative_slope=0.01), backend="turbine_cpu")(x).sum().backward()
torch.testing.assert_close(x.grad, expected)  # turbine_cpu: [[0.98, 1.0]]
print("not reproduced: the compiled gradient matches eager")
