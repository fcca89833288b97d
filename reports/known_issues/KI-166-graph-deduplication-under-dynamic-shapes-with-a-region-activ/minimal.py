# region_activation_memory_budget + graph deduplication + dynamic shapes: the
# invoke_subgraph body the dedup pass builds takes only the tensor, not the SymInts
# (s77, s27) the region uses; AOTAutograd retraces the body's joint graph and
# insert_deferred_runtime_asserts binds s77 to a new sym_size.int(primals_0, 0) that
# copies the (empty) annotation of the placeholder, replacing the annotated one, so the
# body's partition fails: "... Unannotated ops: ['sym_size_int_4']".
# Exits 1 while the bug reproduces, 0 otherwise. Passes with use_graph_deduplication=False.
import sys
import torch

torch._dynamo.config.use_graph_deduplication = True


def block(x):
    return x.sin() * x.shape[0]


def f(x):
    with torch.autograd.graph.region_activation_memory_budget(0.4):
        return block(block(x))


x = torch.randn(3, 4, requires_grad=True)
try:
    out = torch.compile(f, backend="aot_eager", dynamic=True)(x)
except Exception as e:  # BackendCompilerFailed: ... must cover the entire forward ...
    print(f"{type(e).__name__}: {e}")
    sys.exit(1)
torch.testing.assert_close(out, block(block(x)))
print("not reproduced: compiled and matches eager")
sys.exit(0)
