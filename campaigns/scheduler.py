"""What the scheduler running this process says: which shard it is, and until when.

A cluster scheduler hands each job of an array an index (Slurm arrays,
Kubernetes Indexed Jobs, CI matrices and parallel jobs); ``--shard auto``
reads it from the environment through the catalogue below, so one command
line serves every job of the array and every requeue of one. A scheduler
is one entry: the variable holding the index, the one holding the count
(if the scheduler sets one), and where its indices start.
"""

from __future__ import annotations

import math
import os
import re
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Mapping, Optional


@dataclass(frozen=True)
class Source:
    name: str
    index: str  # the variable holding this job's index
    count: str = ""  # the variable holding the number of jobs ("": the scheduler sets none)
    first: str = ""  # the variable holding the first index (Slurm: --array=1-8 starts at 1)
    step: str = ""  # the variable holding the step between indices (Slurm: --array=0-15:2)
    base: int = 0  # where indices start when no variable says


# Explicit variables first: a launcher that sets them (examples/cluster/submitit_launcher.py) is the authority.
GENERIC = Source("DEDUP_HARNESS_SHARD_INDEX/COUNT", "DEDUP_HARNESS_SHARD_INDEX", "DEDUP_HARNESS_SHARD_COUNT")
SOURCES = (
    GENERIC,
    Source("Slurm job array", "SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", first="SLURM_ARRAY_TASK_MIN",
           step="SLURM_ARRAY_TASK_STEP"),
    Source("Kubernetes Indexed Job", "JOB_COMPLETION_INDEX"),  # the count: --shard auto/N or DEDUP_HARNESS_SHARD_COUNT
    Source("Grid Engine array", "SGE_TASK_ID", first="SGE_TASK_FIRST", step="SGE_TASK_STEPSIZE", base=1),
    Source("GitLab CI parallel", "CI_NODE_INDEX", "CI_NODE_TOTAL", base=1),
    Source("Buildkite parallel", "BUILDKITE_PARALLEL_JOB", "BUILDKITE_PARALLEL_JOB_COUNT"),
    Source("CircleCI parallelism", "CIRCLE_NODE_INDEX", "CIRCLE_NODE_TOTAL"),
    Source("PyTorch CI shard", "SHARD_NUMBER", "NUM_TEST_SHARDS", base=1),
)


def _int(env: Mapping[str, str], name: str) -> int:
    text = env[name].strip()
    if not re.fullmatch(r"\d+", text):
        raise ValueError(f"--shard auto: {name}={env[name]!r} is not an index (a whole number)")
    return int(text)


def _read(source: Source, env: Mapping[str, str], count: Optional[int]) -> tuple[int, int]:
    raw = _int(env, source.index)
    first = _int(env, source.first) if source.first and env.get(source.first, "").strip() else source.base
    step = _int(env, source.step) if source.step and env.get(source.step, "").strip() else 1
    if step < 1 or raw < first or (raw - first) % step:
        raise ValueError(f"--shard auto: {source.index}={raw} is not on the array's range (first {first}, step {step}); "
                         f"number the jobs as a range, e.g. --array=0-N")
    index = (raw - first) // step
    if source.count and env.get(source.count, "").strip():
        own = _int(env, source.count)
        if count is not None and own != count:
            raise ValueError(f"--shard auto: {source.count}={own} but the shard count given is {count}")
        count = own
    elif count is None and source is not GENERIC and env.get(GENERIC.count, "").strip():
        count = _int(env, GENERIC.count)
    if count is None:
        raise ValueError(f"--shard auto: {source.name} gives {source.index}={raw} but no shard count; pass "
                         f"--shard auto/N or set {GENERIC.count}")
    if not 0 <= index < count:
        raise ValueError(f"--shard auto: {source.index}={raw} makes shard {index}, outside 0..{count - 1} "
                         f"({source.name}, {count} shards)")
    return index, count


def shard(spec: str, env: Mapping[str, str] = os.environ) -> tuple[int, int]:
    """``auto`` or ``auto/N`` resolved from the scheduler's variables: the
    index (0-based) and count. Every scheduler whose index variable is set
    must agree; none set, or one malformed, is an error naming them."""
    _, slash, given = spec.partition("/")
    count = None
    if slash:
        if not re.fullmatch(r"[1-9]\d*", given.strip()):
            raise ValueError(f"--shard {spec}: expected auto or auto/N with N a positive count")
        count = int(given)
    found = {s.name: _read(s, env, count) for s in SOURCES if env.get(s.index, "").strip()}
    if not found:
        raise ValueError("--shard auto: no scheduler variables in the environment (looked for "
                         + ", ".join(s.index for s in SOURCES) + "); pass --shard i/N")
    if len(set(found.values())) > 1:
        raise ValueError("--shard auto: the schedulers' variables disagree: "
                         + "; ".join(f"{name} says {i}/{n}" for name, (i, n) in found.items()))
    return next(iter(found.values()))


def until(text: str, now: Optional[float] = None) -> float:
    """An absolute deadline as a Unix time: ISO 8601 (``2026-11-27T06:00``,
    local time unless it names a zone), ``@SECONDS`` since the epoch, or
    ``+DURATION`` from ``now`` (``+90m``, ``+2h``, ``+45s``)."""
    text = text.strip()
    now = time.time() if now is None else now
    relative = re.fullmatch(r"\+(\d+(?:\.\d+)?)([smh]?)", text)
    if relative:
        return now + float(relative[1]) * {"": 1, "s": 1, "m": 60, "h": 3600}[relative[2]]
    if re.fullmatch(r"@\d+(?:\.\d+)?", text):
        return float(text[1:])
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"--until {text!r}: not a time; use ISO 8601 (2026-11-27T06:00, +00:00 for UTC), "
                         f"@UNIX_SECONDS or +DURATION (+90m)") from None
    stamp = moment.timestamp()  # naive: local time
    if not math.isfinite(stamp):
        raise ValueError(f"--until {text!r}: not a time")
    return stamp
