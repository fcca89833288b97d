"""KI-081: IREE (turbine_cpu) fails to compile a backward graph that returns a None gradient: RuntimeError at backward (raises while the bug lives)"""
import torch
import torch.nn.functional as F

x, w = torch.randn(2, 2, 3), torch.randn(2, 2, 3, requires_grad=True)  # x without grad: its gradient is None
# the F.conv1d(x, w, padding=1) fails the same way; with x.requires_grad_() both run
out = torch.compile(lambda x, w: x * w, backend="turbine_cpu")(x, w)  # the forward runs
# raises RuntimeError: JIT compilation failed. See diagnostics. (stderr: unhandled torch type: '!torch.none')
out.sum().backward()
print("not reproduced: the compiled backward ran")
