"""KI-061: torch.export drops a torch.inference_mode block: its output requires grad in the exported module (exits 1 while the bug lives)"""
import torch
import torch.nn.functional as F


class M(torch.nn.Module):
    def forward(self, t):
        with torch.inference_mode(True):
            return F.group_norm(t, 1)


t = torch.randn(1, 2, 1, 1, requires_grad=True)
expected = M()(t)  # requires_grad=False
actual = torch.export.export(M(), (t,), strict=True).module()(t)  # requires_grad=True
assert actual.requires_grad == expected.requires_grad, f"exported output requires_grad={actual.requires_grad}, eager {expected.requires_grad}"
print("not reproduced: the exported module keeps inference_mode")
