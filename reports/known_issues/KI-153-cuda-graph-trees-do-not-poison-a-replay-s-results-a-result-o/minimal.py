"""KI-153: CUDA graph trees: a gradient autograd took from a replayed backward graph's output is overwritten by the next replay, with no "overwritten by a subsequent run" error."""
import sys
import torch


def f(x):
    return torch.tanh(torch.sin(x))


cf = torch.compile(f, mode="reduce-overhead")
held = None
for k in range(5):
    x = torch.randn(3, 4, device="cuda", requires_grad=True)
    cf(x).sum().backward()
    if held is not None:
        grad, before = held
        try:
            changed = (grad - before).abs().max().item()
        except RuntimeError as e:  # PyTorch's documented answer: "accessing tensor output of CUDAGraphs that ..."
            print(f"call {k - 1}'s x.grad after call {k}: raised {str(e)[:70]!r}")
        else:
            print(f"call {k - 1}'s x.grad after call {k}: changed by {changed:.3g}, no error")
            if changed > 0:
                sys.exit(1)
    held = (x.grad, x.grad.clone())
print("not reproduced")
