"""KI-140: a tensor made inside a nested_compile_region body and stored in a Python list (a side effect: a module
forward hook recording its output) when that body is called inside another nested_compile_region body: the top-level
graph's output names a node of the outer body's subgraph, and Dynamo fails (with graph deduplication: KeyError:
'getitem_1' in the pass; without: "Argument 'getitem_2' of Node 'output' does not belong to this Graph" or the
dce_extra_outputs assertion). Raises while the bug lives; one level of regions runs."""
import torch

TRACE = []


@torch.compiler.nested_compile_region
def inner(x):
    y = x.cos()
    TRACE.append(y.detach().clone())
    return y


@torch.compiler.nested_compile_region
def outer(x):
    inner(x)
    return x.abs()


x = torch.randn(5)
expected = outer(x)
TRACE.clear()
got = torch.compile(outer, backend="eager")(x)
assert torch.equal(expected, got) and len(TRACE) == 1
print("not reproduced: the nested regions with a side effect compiled and match eager")
