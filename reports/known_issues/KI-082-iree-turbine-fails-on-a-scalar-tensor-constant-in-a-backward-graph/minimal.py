"""KI-082: iree-turbine's backward compile meets masked_fill's real 0-d constant in fake mode: AssertionError (raises while the bug lives)"""
import torch

x = torch.randn(4, requires_grad=True)
out = torch.compile(lambda x: x.masked_fill(x > 0, 0.0), backend="turbine_cpu")(x)
# raises AssertionError: Please convert all Tensors to FakeTensors first ... Found in aten.where.self(..., tensor(0.), ...)
out.sum().backward()
print("not reproduced: the compiled backward ran")
