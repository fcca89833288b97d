"""KI-144: nested_compile_region's subgraph reuse drops repeated outputs. A body that returns the same tensor
twice, (a, a, b), is traced on its first call; every later call is stamped out from the reuse cache, which
counts each distinct tensor once, so the call returns (a, b): out[1] is cos(x) where eager gives sin(x), with
fullgraph=False too (a silent wrong result); a body returning (a, a) gives a 1-tuple, and indexing it raises
an IndexError that Dynamo reports as "Unsupported: Observed exception" (raises while the bug lives)"""
import torch


@torch.compiler.nested_compile_region
def block(x):
    a = x.sin()
    return a, a, x.cos()  # the same tensor twice


def f(x):
    block(x)  # traced, saved in the reuse cache
    return block(x)  # stamped out from the cache


x = torch.randn(3)
expected = f(x)
got = torch.compile(f, backend="eager")(x)
print("eager:", len(expected), "outputs; compiled:", len(got))
assert len(got) == len(expected), f"the compiled call returns {len(got)} outputs, eager {len(expected)}"
torch.testing.assert_close(got, expected)
print("not reproduced: the compiled call returns every output")
