"""The pipeline isolates programs from each other."""

from __future__ import annotations

import pytest
import torch

from harness.pipeline import isolated_global_state

pytestmark = pytest.mark.unit


def test_global_state_is_restored_after_a_crash_inside_a_program():
    with pytest.raises(RuntimeError), isolated_global_state():
        torch.set_default_dtype(torch.float64)
        torch.set_grad_enabled(False)
        torch.set_autocast_enabled("cpu", True)
        raise RuntimeError("the compiler under test crashed mid-program")
    assert torch.get_default_dtype() is torch.float32
    assert torch.is_grad_enabled() and not torch.is_autocast_enabled("cpu")
