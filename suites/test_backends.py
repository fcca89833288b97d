"""Backend resolution: bad specs are one clear line before anything runs."""

from __future__ import annotations

import pytest

from harness.backends import BUILTIN, BackendError, resolve

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_builtin_backends_resolve_to_a_compiler(name):
    assert callable(resolve(name).compiler_fn())


def test_user_backend_by_module_path():
    backend = resolve("suites.planted:perturb_one_element")
    assert callable(backend.compiler_fn())


@pytest.mark.parametrize(
    "spec, message",
    [
        ("no_such_backend", "unknown backend 'no_such_backend'"),
        ("no.such.module:fn", "cannot import 'no.such.module'"),
        ("suites.planted:missing", "has no attribute 'missing'"),
        ("suites.planted:not_a_backend", "is a int, not a callable"),
    ],
)
def test_bad_backend_specs_are_one_line_errors(spec, message):
    with pytest.raises(BackendError, match=message) as info:
        resolve(spec)
    assert "\n" not in str(info.value)
