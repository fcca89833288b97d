"""KI-017: compiled code enabling grad inside, called under inference_mode, fails to save inference tensors (raises while the bug lives)"""
import torch
import torch.nn.functional as F


def f(x):
    with torch.enable_grad():
        return F.hardswish(F.hardswish(x))


x = torch.randn(4, requires_grad=True)
with torch.inference_mode():
    f(x)  # eager runs
    torch.compile(f, backend="aot_eager")(x)
print("not reproduced: the compiled call under inference_mode ran")
