"""Known crashes must not mask the rest of the space.

A program whose compile dies on a recorded crash tells nothing else: every
other oracle sees a crash too. When the crash's known issue names what
triggers it (``KnownIssue.triggers``: the deduplication pass, the
``nested_compile_region`` decorator, a tensor subclass argument), the program is judged again with that
trigger taken away, once per trigger, so a known crash of programs with a
feature does not hide every other failure of those programs.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Iterable

from generators.ir import Program
from generators.regions import marked, without_regions
from generators.variation import equalize

SUBCLASS = "type:tensor_subclass"  # generators.forms: the primary passed as a torch.Tensor subclass instance
from harness.outcome import RunConfig

from .known_issues import KnownIssue

# trigger -> (does this run have it?, the run without it)
TRIGGERS: dict[str, tuple[Callable[[Program, RunConfig], bool], Callable[[Program, RunConfig], tuple[Program, RunConfig]]]] = {
    "dedup": (lambda p, c: c.dedup, lambda p, c: (p, replace(c, dedup=False))),
    "compile_region": (lambda p, c: bool(marked(p)), lambda p, c: (without_regions(p), c)),
    "tensor_subclass": (lambda p, c: any(call.how == SUBCLASS for _, call in p.repeats()),
                        lambda p, c: (equalize(p, [f"how:{SUBCLASS}"]) or p, c)),
}


def unmasked_runs(program: Program, config: RunConfig,
                  crashes: Iterable[KnownIssue]) -> list[tuple[str, Program, RunConfig]]:
    """(trigger, program, config) for each trigger of the known crashes this
    run has: the same program judged without it."""
    triggers = dict.fromkeys(t for issue in crashes for t in issue.triggers)
    out = []
    for trigger in triggers:
        present, remove = TRIGGERS[trigger]
        if present(program, config):
            out.append((trigger, *remove(program, config)))
    return out
