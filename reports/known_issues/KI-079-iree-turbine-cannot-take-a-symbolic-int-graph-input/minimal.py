"""KI-079: iree-turbine's turbine_cpu cannot take a SymInt graph input (a dynamic size): AttributeError (raises while the bug lives)"""
import torch

x = torch.randn(5, 4, requires_grad=True)
torch._dynamo.mark_dynamic(x, 1)  # x.size(-1) reaches the graph as an int input
# raises AttributeError: 'int' object has no attribute 'data'
out = torch.compile(lambda x: x * x.size(-1), backend="turbine_cpu")(x)
out.sum().backward()
print("not reproduced: the compiled call ran")
