"""Third-party backends (the ``backends`` extra, ``-m backends``): each one the
suites can run on with ``--backend NAME``. Skips, saying how to install it,
where the backend's package is absent."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.backends


def test_openvino_resolves_as_a_backend_under_test():
    """``--backend openvino`` is accepted: torch finds OpenVINO's compiler
    through its own entry point (torch_dynamo_backends)."""
    pytest.importorskip("openvino", reason="openvino is not installed: pip install -e '.[backends]' (make test does)")
    from suites.pytest_plugin import checked

    backend = checked("openvino")
    assert backend.name == "openvino" and callable(backend.compiler_fn())


INSTALL = "pip install -e '.[backends]' (make test does)"


def test_openvino_is_found_inference_only_and_computing_in_bfloat16():
    """What the capability probe learns from OpenVINO itself: its outputs carry
    no autograd graph, and its CPU plugin computes float32 in bfloat16."""
    pytest.importorskip("openvino", reason=f"openvino is not installed: {INSTALL}")
    from harness.backend_capabilities import probe
    from oracles.registry import run_config

    caps = probe("openvino")
    assert not caps.training and caps.how_precision == "detected"
    assert caps.precision.get("float32") in ("bfloat16", "float16", None)  # the plugin's hint follows the CPU
    config = run_config("openvino")
    assert config.mode == "no_grad" and not config.backward


# Nightly since issue 42's cut to six minutes (15 s: iree-turbine compiles through MLIR): OpenVINO's probe and run stay in the gate,
# and iree-turbine's known issues' standalone repros by their share (test_known_issues)
@pytest.mark.nightly
def test_iree_turbine_trains_rejects_unknown_ops_and_runs_no_float64():
    pytest.importorskip("iree.turbine", reason=f"iree-turbine is not installed: {INSTALL}")
    from harness.backend_capabilities import probe

    caps = probe("turbine_cpu")
    assert caps.training and caps.rejects and "float64" not in caps.dtypes and "float32" in caps.dtypes
    assert not caps.seeded_random  # its random ops ignore torch.manual_seed: programs that draw are not given to it
