"""How a compiled program is called when CUDA graphs replay it: a plain value.

CUDA graphs replay recorded kernels on static buffers: the first call warms
up, the second records, later ones replay with fresh input values copied into
place. A plan says how many calls, whether each runs backward, which inputs
are static (``torch._dynamo.mark_static_address``: the graphed run reuses the
same tensors and writes each call's values into them), whether one call runs
at another size (a re-record, then the first recording must replay again) and
whether ``torch.compiler.cudagraph_mark_step_begin()`` starts each call.
Like a program, a plan is drawn valid by construction and round-trips JSON.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, fields, replace
from typing import Optional

from hypothesis import assume, strategies as st

from .check import draws_random, mutates
from .ir import Program
from .ops import OPS
from .strategies import programs
from .variants import grown, valid

MIN_CALLS = 3  # warm-up, record, replay


@dataclass(frozen=True)
class Resize:
    """Call ``at`` runs with input ``input`` of ``shape`` (the others as drawn)."""

    at: int
    input: str
    shape: tuple[int, ...]


@dataclass(frozen=True)
class ReplayPlan:
    calls: int = 4
    backward: bool = True
    static_inputs: tuple[str, ...] = ()
    resize: Optional[Resize] = None
    mark_step: bool = False
    # With mark_step and no backward: a second forward in each step, the
    # first's results held across it, which must stay live until the next
    # step (torch's documented ``mark_step_begin(); f(x) + f(x)`` pattern).
    twice: bool = False

    def phase(self, k: int) -> str:
        """What CUDA graph trees do at call ``k`` (a name for signatures)."""
        if self.resize is not None and k >= self.resize.at:
            return "resize" if k == self.resize.at else "replay-after-resize"
        return ("warmup", "record")[k] if k < 2 else "replay"

    def to_dict(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_dict(d: dict) -> "ReplayPlan":
        unknown = set(d) - {f.name for f in fields(ReplayPlan)}
        if unknown:
            raise ValueError(f"unknown replay plan fields: {', '.join(sorted(unknown))}")
        r = d.get("resize")
        return ReplayPlan(
            calls=int(d.get("calls", 4)),
            backward=bool(d.get("backward", True)),
            static_inputs=tuple(d.get("static_inputs", ())),
            resize=Resize(int(r["at"]), r["input"], tuple(r["shape"])) if r else None,
            mark_step=bool(d.get("mark_step", False)),
            twice=bool(d.get("twice", False)),
        )


def resized(program: Program, resize: Resize) -> Program:
    """The program whose ``make_inputs`` builds call ``resize.at``'s inputs."""
    return replace(program, inputs=tuple(
        (n, replace(s, shape=resize.shape) if n == resize.input else s) for n, s in program.inputs))


def resizes(program: Program) -> list[tuple[str, tuple[int, ...]]]:
    """Per input, the first grown shape the same model still accepts."""
    out = []
    for name, spec in program.inputs:
        for shape in grown(spec.shape):
            if valid(resized(program, Resize(0, name, shape))):
                out.append((name, shape))
                break
    return out


def static_candidates(program: Program) -> list[str]:
    """Inputs whose values can be written in place between calls: not
    expanded (stride 0 has no room for them) and not marked dynamic."""
    dynamic = {n for n, _, _ in program.options.mark_dynamic}
    return [n for n, s in program.inputs if s.layout != "expanded" and n not in dynamic]


def check_plan(program: Program, plan: ReplayPlan) -> ReplayPlan:
    """``plan`` if it fits ``program``; else ValueError saying why."""
    names = {n for n, _ in program.inputs}
    if plan.calls < MIN_CALLS:
        raise ValueError(f"a replay plan needs at least {MIN_CALLS} calls (warm-up, record, replay), got {plan.calls}")
    bad = [n for n in plan.static_inputs if n not in static_candidates(program)]
    if bad:
        raise ValueError(f"inputs {bad} cannot be static (unknown, expanded or marked dynamic)")
    r = plan.resize
    if r is not None:
        if r.input not in names or r.input in plan.static_inputs or not 2 <= r.at < plan.calls:
            raise ValueError(f"bad resize {r}: needs a non-static input and 2 <= at < calls")
        if not valid(resized(program, r)):
            raise ValueError(f"the model does not accept {r.input} of shape {r.shape}")
    if plan.twice and not (plan.mark_step and not plan.backward and twice_ok(program)):
        raise ValueError("twice needs mark_step, no backward, and a program that writes nothing in place")
    return plan


def twice_ok(program: Program) -> bool:
    """A second call changes nothing the next call sees: no in-place writes
    (inputs, buffers), so eager needs no second call to stay in step."""
    return not mutates(program.block) and not program.block.buffers


def _grad_anywhere(program: Program) -> bool:
    return any(s.requires_grad for _, s in program.inputs) or program.block.kind == "module"


@st.composite
def replay_plans(draw, program: Program) -> ReplayPlan:
    calls = draw(st.integers(MIN_CALLS, 5))
    static = tuple(n for n in static_candidates(program) if draw(st.integers(0, 3)) == 0)
    options = [(n, s) for n, s in resizes(program) if n not in static]
    resize = None
    if options and draw(st.integers(0, 2)) == 0:
        name, shape = draw(st.sampled_from(options))
        calls = max(calls, 4)  # a call after the resized one replays the first recording
        resize = Resize(draw(st.integers(2, calls - 2)), name, shape)
    backward = _grad_anywhere(program) and draw(st.integers(0, 4)) > 0
    mark_step = draw(st.integers(0, 3)) == 0
    twice = mark_step and not backward and twice_ok(program)
    return check_plan(program, ReplayPlan(calls, backward, static, resize, mark_step, twice))


def default_plan(program: Program) -> ReplayPlan:
    """A plan chosen by the program's seed, for runs that draw no plan."""
    rng = random.Random(program.seed)
    static = tuple(n for n in static_candidates(program) if rng.random() < 0.25)
    options = [(n, s) for n, s in resizes(program) if n not in static]
    resize = Resize(2, *rng.choice(options)) if options and rng.random() < 0.3 else None
    backward, mark_step = _grad_anywhere(program), rng.random() < 0.25
    twice = mark_step and not backward and twice_ok(program)
    return check_plan(program, ReplayPlan(4, backward, static, resize, mark_step, twice))


# Random ops draw from the graph-safe generator under CUDA graphs, not in
# eager's order: comparing their values needs an RNG-aware oracle (not built).
REPLAY_OPS = tuple(n for n, op in OPS.items() if not op.random and op.category not in ("merge", "unbacked", "opinfo"))


# Half the replayed programs draw from the ops that make state CUDA graphs must
# handle: parameters (linear, conv, matmul weights), buffers (batch-norm
# statistics) and in-place writes; drawn from every category, they are rare.
STATEFUL_OPS = tuple(n for n in REPLAY_OPS if OPS[n].category in ("linalg", "norm", "inplace", "unary", "activation"))


@st.composite
def replayable(draw, **kwargs) -> tuple[Program, ReplayPlan]:
    """A program without random ops, and a plan to replay it by."""
    program = draw(st.one_of(programs(ops=REPLAY_OPS, **kwargs), programs(ops=STATEFUL_OPS, **kwargs)))
    assume(not draws_random(program))
    return program, draw(replay_plans(program))
