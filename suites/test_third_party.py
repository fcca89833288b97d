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
