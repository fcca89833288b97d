"""KI-169: under torch.inference_mode() with grad switched back on, a compiled frame reads torch.is_grad_enabled()
as False (eager: True): Dynamo compiles under no_grad. Exit 1 while it reproduces."""
import sys
import torch

def f(x):
    return x * 2 if torch.is_grad_enabled() else x - 1

cf = torch.compile(f, backend="eager")  # Dynamo alone
x = torch.ones(1)
with torch.inference_mode(), torch.enable_grad():
    expected, got = f(x), cf(x)
print("eager", expected.tolist(), "compiled", got.tolist())
sys.exit(0 if torch.equal(expected, got) else 1)
