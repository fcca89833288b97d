"""KI-084: turbine_cpu's runtime (arg.data, aten.detach) fails on a plain Tensor-subclass input: TypeError (raises while the bug lives)"""
import torch

class TensorSub(torch.Tensor):
    pass

x = torch.randn(1, 3, 2).as_subclass(TensorSub)
# raises TypeError: Multiple dispatch failed for 'torch.ops.aten.detach'; all __torch_dispatch__ handlers
# returned NotImplemented (AOTAutograd's _AnalyzeCustomOpInputOutputMode and TensorSub)
torch.compile(lambda x: x + 1, backend="turbine_cpu")(x)
print("not reproduced: the compiled call ran")
