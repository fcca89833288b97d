"""Process state a compiled program must leave as it found it.

A compile that fails half-way can leave a dispatch mode pushed or a dispatch
key forced on; every later program in the process then computes nonsense (we
saw an input mutated by a pure function, and "PythonDispatcherTLS was not set"
asserts on plain eager code). The pipeline records such leaks as part of the
outcome and then undoes them, so one bad compile is one finding, not a
poisoned run.
"""

from __future__ import annotations

import torch
from torch.utils import _python_dispatch

# Dispatch keys that only a tracing or dispatch mode should switch on.
_KEYS = ("PythonDispatcher", "Python", "PreDispatch", "PythonTLSSnapshot")


def _keys() -> list:
    return [getattr(torch._C.DispatchKey, k) for k in _KEYS if hasattr(torch._C.DispatchKey, k)]


def leaked_state() -> list[str]:
    leaks = []
    modes = _python_dispatch._get_current_dispatch_mode_stack()
    if modes:
        leaks.append(f"dispatch modes still active: {[type(m).__name__ for m in modes]}")
    fn_modes = torch.overrides._get_current_function_mode_stack()
    if fn_modes:
        leaks.append(f"torch function modes still active: {[type(m).__name__ for m in fn_modes]}")
    for key in _keys():
        if torch._C._dispatch_tls_is_dispatch_key_included(key):
            leaks.append(f"dispatch key {key.name} left included")
        if torch._C._dispatch_tls_is_dispatch_key_excluded(key):
            leaks.append(f"dispatch key {key.name} left excluded")
    return leaks


def clean_up() -> None:
    while _python_dispatch._get_current_dispatch_mode_stack():
        _python_dispatch._pop_mode()
    while torch.overrides._get_current_function_mode_stack():
        torch._C._pop_torch_function_stack()
    for key in _keys():
        torch._C._dispatch_tls_set_dispatch_key_included(key, False)
        torch._C._dispatch_tls_set_dispatch_key_excluded(key, False)
