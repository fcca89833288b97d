"""KI-058: graph deduplication crashes compiling torch.func.grad: tracker pickles a TensorWrapper (raises while the bug lives)"""
import torch

torch._dynamo.config.use_graph_deduplication = True
f = torch.compile(torch.func.grad(lambda x: torch.log_softmax(x, dim=-1).sum()), backend="aot_eager")
f(torch.randn(3))  # InternalTorchDynamoError: NotImplementedError: Cannot access storage of TensorWrapper
print("not reproduced: torch.compile(torch.func.grad(f)) with deduplication compiles")
