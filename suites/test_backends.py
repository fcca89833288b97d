"""Backend resolution: bad specs are one clear line before anything runs."""

from __future__ import annotations

import pytest

from harness.backends import BUILTIN, BackendError, resolve
from suites.tiers import examples

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


def test_entry_point_plugins_and_torch_registered_backends_resolve():
    from harness.backends import names

    example = resolve("example")  # pyproject.toml's dedup_harness.backends entry point
    assert "example" in names() and example.repro_spec == "harness.example_backend:backend"
    assert resolve("aot_eager_default_partitioner").backend == "aot_eager_default_partitioner"  # torch's registry
    import torch._inductor

    # mode="reduce-overhead" as the config patch torch itself makes of it
    patch = torch._inductor.list_mode_options("reduce-overhead")
    assert patch.items() <= resolve("reduce-overhead").inductor_config.items(), patch


def test_the_example_plugin_compiles_generated_programs_like_aot_eager():
    """Its graph pass is right, so it is judged as the AOTAutograd it wraps."""
    from itertools import islice

    from harness.pipeline import run_program
    from oracles.registry import ORACLES, run_config
    from campaigns.campaign import draw

    for _, program in islice(draw(2, (0, 1), set()), examples(2, 3)):  # 3 in the gate until issue 42's cut
        verdicts = [ORACLES["differential"](run_program(program, run_config(b, ("differential",))))
                    for b in ("example", "aot_eager")]
        assert [(v.status, v.kind) for v in verdicts[:1]] == [(v.status, v.kind) for v in verdicts[1:]], verdicts
