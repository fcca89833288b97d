"""The repro templates (``reports/templates/repro/``): none is left unused, and
every driver renders a script Python can compile. That each known issue's
script renders and compiles is ``suites/test_known_issues.py``'s.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from jinja2 import meta

from generators.doors import with_door
from generators.replays import ReplayPlan, Resize, resizes
from generators.variants import variants
from harness.outcome import RunConfig
from reports.known_issues import load
from reports.repro import DRIVERS, MODEL, TEMPLATES, render_model_repro, render_repro

pytestmark = pytest.mark.unit

FOLDER = Path(TEMPLATES.loader.searchpath[0])
# A known issue's program with a nested_compile_region, so the twin differs.
ISSUE = next(i for i in load() if any(b.compile_region for b in i.program().blocks()))


def _used(name: str) -> set[str]:
    """``name`` and every template it includes, however deep."""
    source = TEMPLATES.loader.get_source(TEMPLATES, name)[0]
    found = {name}
    for child in meta.find_referenced_templates(TEMPLATES.parse(source)):
        assert child is not None, f"{name} includes a template chosen at render time"
        found |= _used(child)
    return found


def test_every_template_is_used_by_a_driver():
    used = set().union(*map(_used, [*DRIVERS.values(), MODEL]))
    files = {p.name for p in FOLDER.iterdir() if p.is_file()}
    assert files == used, f"unused: {sorted(files - used)}; missing: {sorted(used - files)}"


def _rendered(check: str) -> str:
    program = ISSUE.program()
    config = RunConfig(backend="aot_eager")
    if check == "process":
        return render_repro(program, config, "lost", check, lost={"kind": "hang", "timeout": 30, "memory_mb": 2048})
    if check == "replay":
        resize = [Resize(2, name, shape) for name, shape in resizes(program)[:1]]
        plan = ReplayPlan(calls=4, resize=resize[0] if resize else None)
        return render_repro(program, config, "replay", check, replay={"plan": plan.to_dict(), "device": "cpu"})
    if check in ("guard", "recompile"):
        return render_repro(program, config, "guard", check, variants(program)[0].to_dict(), expect_crash="")
    if check == "region_toggle":
        return render_repro(program, config, "twin", check, {"regions": [], "dedup": False})
    if check == "door":
        return render_repro(with_door(program, "dynamic:mark"), config, "door", check, {"operator": False},
                            expect_crash="")
    return render_repro(program, config, check, check, expect_crash="RuntimeError: *")


@pytest.mark.parametrize("check", sorted(DRIVERS))
def test_each_driver_renders_a_script_that_compiles(check):
    text = _rendered(check)
    compile(text, "repro.py", "exec")
    assert text.startswith('"""Repro: ') and text.endswith("    sys.exit(status)\n")
    assert "{{" not in text.split("# ---- how this repro compiles")[1]  # no template syntax left over


def test_the_model_repro_compiles():
    text = render_model_repro(signature="differential:mismatch:dedup:output", spec="pkg.mod:factory",
                              backend="aot_eager", dedup=True, changes=["input:dtype"], oracle="differential",
                              root="/a/checkout")
    compile(text, "repro.py", "exec")
    assert "SPEC, BACKEND, DEDUP, CHANGES, ORACLE = 'pkg.mod:factory', 'aot_eager', True, ['input:dtype'], " \
        "'differential'" in text


def test_values_are_written_as_given_never_rendered_again():
    title = "a {{ title }} {% if x %} {# note #} title"
    text = render_repro(ISSUE.program(), RunConfig(backend="aot_eager"), title, "differential",
                        expect_crash="KeyError: '{{x}}'")
    assert text.startswith(f'"""Repro: {title}\n')
    assert "EXPECT_CRASH = \"KeyError: '{{x}}'\"\n" in text
