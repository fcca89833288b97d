"""KI-070: inductor's CPU kernel for signbit of a bfloat16 tensor crashes GCC 12.2: 'unrecognizable insn' (raises while the bug lives)"""
import os
import tempfile

import torch


def f(x):
    return torch.signbit(x)


x = torch.randn(4, dtype=torch.bfloat16)  # shape (3,) or (8,), or float16 / float32, compile
with tempfile.TemporaryDirectory() as cache:  # keep inductor's cache out of /tmp
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
    torch.compile(f, backend="inductor")(x)  # raises InductorError: CppCompileError: C++ compile error: error: unrecognizable insn:
print("not reproduced: the compiled call ran")
