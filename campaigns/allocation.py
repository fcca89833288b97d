"""What this process was allocated on its node: CPUs, memory, GPUs.

A cluster node's allocation is not ``os.cpu_count()`` and the node's RAM:
Slurm and Kubernetes give a job a subset of CPUs by affinity, cap its CPU time
by a cgroup quota and its memory by a cgroup limit, and hand it GPUs through
``CUDA_VISIBLE_DEVICES``. A campaign that sized itself by the node would start
more workers than it has CPUs for and be killed for memory it never had. So
the defaults for the worker count and each worker's memory limit come from
here. Everything is read from files under a root (``/`` in use, a fake tree in
the tests); a file that is missing or unreadable means no limit, never an error.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Optional

# Per-worker limit when memory allows more: enough for large compiles, and a
# bound on what one runaway program can take from the others.
DEFAULT_MEMORY_MB = 8192.0
# The least a worker needs: a process that imports torch and compiles programs.
MIN_WORKER_MB = 1536.0
# Kept back for the campaign process itself (torch, triage, the corpus).
RESERVE_MB = 1024.0

_V1_NO_LIMIT = 2**60  # v1 writes "no limit" as a huge page-rounded number


@dataclass(frozen=True)
class Allocation:
    cpus: int  # affinity set capped by the cgroup CPU quota, at least 1
    memory_mb: Optional[float]  # tightest cgroup limit or MemTotal; None if none readable
    gpus: tuple[str, ...] = ()  # visible GPU ids, as CUDA_VISIBLE_DEVICES would name them
    sources: dict = field(default_factory=dict, compare=False)  # figure -> where it came from


def _text(path: Path) -> Optional[str]:
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _int(path: Path) -> Optional[int]:
    text = _text(path)
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _cpu_list(text: str) -> int:
    """The number of CPUs in a list like ``0-3,8,10-11``."""
    count = 0
    for part in filter(None, (p.strip() for p in text.split(","))):
        lo, _, hi = part.partition("-")
        count += int(hi or lo) - int(lo) + 1
    return count


def _affinity(root: Path) -> tuple[int, str]:
    for line in (_text(root / "proc/self/status") or "").splitlines():
        if line.startswith("Cpus_allowed_list:"):
            try:
                return _cpu_list(line.split(":", 1)[1]), "affinity"
            except ValueError:
                break
    if root == Path("/") and hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)), "sched_getaffinity"
    return os.cpu_count() or 1, "cpu_count"


def _cgroups(root: Path) -> list[tuple[str, str]]:
    """(controllers, path) per line of proc/self/cgroup; controllers is "" for v2."""
    out = []
    for line in (_text(root / "proc/self/cgroup") or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            out.append((parts[1], parts[2]))
    return out


def _up(base: Path, path: str) -> list[Path]:
    """The cgroup directory of ``path`` under ``base`` and each ancestor up to ``base``.

    A limit on any ancestor applies; and in a container the path may not exist
    under the mount at all (it shows the container's own cgroup at its root),
    which the walk reaches last."""
    parts = [p for p in path.split("/") if p and p != ".."]
    return [base.joinpath(*parts[:i]) for i in range(len(parts), -1, -1)]


def _where(base: Path, d: Path) -> str:
    rel = d.relative_to(base).as_posix()
    return "/" if rel == "." else "/" + rel


def _cpu_quotas(root: Path) -> list[tuple[float, str]]:
    """Every CPU quota (in CPUs) on this process's cgroups and their ancestors."""
    fs = root / "sys/fs/cgroup"
    found = []
    for controllers, path in _cgroups(root):
        if controllers == "":
            for d in _up(fs, path):
                fields = (_text(d / "cpu.max") or "").split()
                if len(fields) == 2 and fields[0] != "max":
                    try:
                        cpus = int(fields[0]) / int(fields[1])
                    except (ValueError, ZeroDivisionError):
                        continue
                    found.append((cpus, f"cgroup v2 cpu.max {fields[0]} {fields[1]} at {_where(fs, d)}"))
        elif "cpu" in controllers.split(","):
            for mount in dict.fromkeys((controllers, "cpu,cpuacct", "cpu")):
                for d in _up(fs / mount, path):
                    quota, period = _int(d / "cpu.cfs_quota_us"), _int(d / "cpu.cfs_period_us")
                    if quota is not None and quota > 0 and period:
                        found.append((quota / period, f"cgroup v1 cfs_quota_us {quota} {period} at {_where(fs / mount, d)}"))
    return found


def _memory_limits(root: Path) -> list[tuple[float, str]]:
    """Every memory limit (in MB) on this process's cgroups and their ancestors, and MemTotal."""
    fs = root / "sys/fs/cgroup"
    found = []
    for controllers, path in _cgroups(root):
        if controllers == "":
            base, name, what = fs, "memory.max", "cgroup v2 memory.max"
        elif "memory" in controllers.split(","):
            base, name, what = fs / "memory", "memory.limit_in_bytes", "cgroup v1 memory.limit_in_bytes"
        else:
            continue
        for d in _up(base, path):
            limit = _int(d / name)  # "max" reads as None
            if limit is not None and 0 < limit < _V1_NO_LIMIT:
                mb = limit / 2**20
                found.append((mb, f"{what} {mb:.0f} MB at {_where(base, d)}"))
    for line in (_text(root / "proc/meminfo") or "").splitlines():
        if line.startswith("MemTotal:"):
            try:
                mb = int(line.split()[1]) / 1024
            except (IndexError, ValueError):
                break
            found.append((mb, f"MemTotal {mb:.0f} MB"))
            break
    return found


def _gpus(root: Path, env: Mapping[str, str]) -> tuple[tuple[str, ...], str]:
    if "CUDA_VISIBLE_DEVICES" in env:
        ids = []
        for entry in (e.strip() for e in env["CUDA_VISIBLE_DEVICES"].split(",")):
            if not (entry.isdigit() or entry.startswith(("GPU-", "MIG-"))):
                break  # CUDA ignores everything from the first invalid entry ("", "-1")
            ids.append(entry)
        return tuple(ids), "CUDA_VISIBLE_DEVICES"
    try:
        count = len(list((root / "proc/driver/nvidia/gpus").iterdir()))
    except OSError:
        return (), "none found"
    return tuple(str(i) for i in range(count)), "proc/driver/nvidia/gpus"


def read(root: Path = Path("/"), env: Mapping[str, str] = os.environ) -> Allocation:
    """This process's allocation, read from the files under ``root`` and from ``env``."""
    root = Path(root)
    affinity, how = _affinity(root)
    cpus, cpu_source = affinity, f"{how} {affinity}"
    quotas = _cpu_quotas(root)
    if quotas:
        quota, where = min(quotas)
        cpus = min(cpus, math.ceil(quota))
        cpu_source += f", {where}"
    memory = _memory_limits(root)
    memory_mb, memory_source = min(memory) if memory else (None, "none readable")
    gpus, gpu_source = _gpus(root, env)
    return Allocation(
        cpus=max(1, cpus), memory_mb=memory_mb, gpus=gpus,
        sources={"cpus": cpu_source, "memory": memory_source, "gpus": gpu_source},
    )


def _usable_mb(a: Allocation) -> Optional[float]:
    # Never below one worker's need: with less, one worker still runs.
    return None if a.memory_mb is None else max(a.memory_mb - RESERVE_MB, MIN_WORKER_MB)


def default_workers(a: Allocation) -> int:
    """As many workers as there are CPUs and as memory holds at MIN_WORKER_MB each; at least 1."""
    usable = _usable_mb(a)
    by_memory = a.cpus if usable is None else int(usable // MIN_WORKER_MB)
    return max(1, min(a.cpus, by_memory))


def default_memory_mb(a: Allocation, workers: int) -> float:
    """Each of ``workers`` workers' memory limit: an equal share of what is usable, at most DEFAULT_MEMORY_MB.

    A share under MIN_WORKER_MB is still returned as is: the caller asked for
    that many workers."""
    usable = _usable_mb(a)
    if usable is None:
        return DEFAULT_MEMORY_MB
    return float(math.floor(min(DEFAULT_MEMORY_MB, usable / max(1, workers))))


def worker_env(a: Allocation, index: int) -> dict[str, str]:
    """The environment that pins worker ``index`` to one GPU, round robin, when there are several."""
    if len(a.gpus) > 1:
        return {"CUDA_VISIBLE_DEVICES": a.gpus[index % len(a.gpus)]}
    return {}
