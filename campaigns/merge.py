"""Shards' folders merged into one campaign, once or as they grow.

Each shard is one writer of its own folder; the merge only reads them, so it
can run while they write (a line still being written is left for the next
round) and as often as wanted: every round rebuilds the merged folder from
the shards' logs alone, each file replaced atomically, so a reader never
sees half a report. Shards of different campaigns (seed, backend, torch,
mode, shard count) or one shard given twice would count programs twice or
mix root causes: that is refused before anything is written.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import time
from pathlib import Path
from typing import Callable, Optional

from reports import coverage_report, op_coverage
from reports.ledger import LOG, Ledger, read_events

from .corpus import FOLDER as CORPUS, Corpus
from .folder import prepare, slug, write_reports
from .worker_start import covered_paths

# What must be equal in every shard's first start event for their programs and findings to add up.
SAME = ("backend", "seed", "torch", "mode")


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _atomic_copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(f".{dst.name}.{os.getpid()}.tmp")
    shutil.copyfile(src, tmp)
    os.replace(tmp, dst)


def _first_start(run: Path) -> dict:
    """The config of a shard's first start event (the log's first complete line that is one), read no further."""
    try:
        with open(run / LOG) as f:
            for line in f:
                if not line.endswith("\n"):
                    break  # still being written
                try:
                    e = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if e.get("event") == "start":
                    return e.get("config") or {}
    except FileNotFoundError:
        pass
    return {}


def check(runs: list[Path], out: Path) -> list[dict]:
    """Each shard's first start config; an error naming what does not add up."""
    if not runs:
        raise ValueError("merge: no shard folders given")
    configs = []
    for r in runs:
        if not (r / LOG).exists():
            raise ValueError(f"{r}: not a campaign folder (no {LOG})")
        if r.resolve() == out.resolve():
            raise ValueError(f"{r}: the merged folder cannot be one of the shards")
        config = _first_start(r)
        if not config:
            raise ValueError(f"{r}: its log has no start event yet")
        configs.append(config)
    for key in SAME:
        values = {str(c.get(key)) for c in configs}
        if len(values) > 1:
            raise ValueError(f"merge: the shards differ in {key} ({', '.join(sorted(values))}): "
                             f"merge shards of one campaign")
    shards = [str(c.get("shard") or "0/1") for c in configs]
    counts = {s.partition("/")[2] for s in shards}
    if len(counts) > 1:
        raise ValueError(f"merge: the shards were cut in different counts ({', '.join(shards)}): their programs overlap")
    twice = sorted({s for s in shards if shards.count(s) > 1})
    if twice:
        raise ValueError(f"merge: shard {', '.join(twice)} given twice: its programs would count twice")
    return configs


def merge(runs: list[Path], out: Path, fresh: bool = True) -> dict:
    """One campaign from several shards' folders: their logs folded together,
    each finding's folder taken from the shard that minimized it, else the
    shard with the smallest program. ``fresh``: clear earlier outputs in
    ``out`` first (a watch's later rounds overwrite in place instead)."""
    configs = check(runs, out)
    logs = {r: read_events(r / LOG) for r in runs}  # each shard's log read once
    events = [dict(e, shard_dir=str(r)) for r in runs for e in logs[r]]
    events.sort(key=lambda e: e.get("at", 0))
    if fresh:
        prepare(out, resume=False)
    out.mkdir(parents=True, exist_ok=True)
    best: dict[str, tuple] = {}
    for e in events:
        if e.get("event") == "finding" and (e["signature"] not in best or (e.get("size") or 0) < best[e["signature"]][0]):
            best[e["signature"]] = (e.get("size") or 0, e["shard_dir"], e["folder"])
        if e.get("event") == "minimized" and e.get("minimized") is not None:
            best[e["signature"]] = (-1, e["shard_dir"], best.get(e["signature"], (0, "", f"findings/{slug(e['signature'])}"))[2])
    _atomic_write(out / LOG, "".join(json.dumps({k: v for k, v in e.items() if k != "shard_dir"}, default=str) + "\n"
                                     for e in events))
    ledger = Ledger.load(out)
    ledger.active = sum(Ledger.of(logs[r]).active for r in runs)  # shards' seconds add up; their logs interleave
    shards = sorted(str(c.get("shard") or "0/1") for c in configs)
    ledger.config["shard"] = f"merged from {len(runs)} of {shards[0].partition('/')[2]}: {', '.join(shards)}"
    ledger.config["workers"] = sum(int(json.loads((r / "campaign.json").read_text()).get("workers") or 0)
                                   for r in runs if (r / "campaign.json").exists()) or None
    for sig, (_, shard_dir, folder) in best.items():
        src = Path(shard_dir) / folder
        if src.is_dir() and sig in ledger.findings:
            for path in src.rglob("*"):
                if path.is_file() and not path.name.endswith(".tmp"):
                    _atomic_copy(path, out / ledger.findings[sig]["folder"] / path.relative_to(src))
    summary = ledger.summary()
    cov_dirs = [r / "coverage" for r in runs if (r / "coverage").exists()]
    if cov_dirs:
        (out / "coverage").mkdir(exist_ok=True)
        for d in cov_dirs:
            for p in d.glob(".coverage.*"):
                shutil.copy(p, out / "coverage" / f"{p.name}.{d.parent.name}")
        # the files a campaign reports (the data holds every file the tracer saw; analysing each took seconds)
        summary["coverage"] = coverage_report.combine(out / "coverage", covered_paths())
    _merge_corpora(runs, out, summary)
    coverages = [json.loads((r / "summary.json").read_text()).get("op_coverage") for r in runs
                 if (r / "summary.json").exists()]
    if any(coverages):  # each shard swept its own cells (campaigns.op_sweep): the table is their union
        summary["op_coverage"] = op_coverage.merge_all(coverages)
    staging = out / f".reports.{os.getpid()}"
    staging.mkdir(exist_ok=True)
    write_reports(staging, summary)
    for path in staging.iterdir():
        os.replace(path, out / path.name)
    staging.rmdir()
    return summary


def _merge_corpora(runs: list[Path], out: Path, summary: dict) -> None:
    """The shards' corpora in one folder; the edges reached are their union
    (summed per shard, an edge two shards reached would count twice)."""
    folders = [r / CORPUS for r in runs if (r / CORPUS).is_dir()]
    if not folders:
        return
    (out / CORPUS).mkdir(exist_ok=True)
    for folder in folders:
        for path in folder.glob("*.json"):
            if not (out / CORPUS / path.name).exists():
                _atomic_copy(path, out / CORPUS / path.name)
    if summary.get("feedback"):
        merged = Corpus(None, str(summary.get("torch")), str(summary.get("backend")))
        merged.load(out / CORPUS)
        summary["feedback"].update(corpus=len(merged.entries), edges=len(merged.edges()),
                                   corpus_skipped=len(merged.skipped))


def _expand(patterns: list[str]) -> list[Path]:
    runs: list[Path] = []
    for p in patterns:
        found = sorted(glob.glob(p)) if glob.has_magic(p) else [p]
        runs += [Path(f) for f in found if _first_start(Path(f))]  # a shard not started yet is waited for
    return list(dict.fromkeys(runs))


def _state(runs: list[Path]) -> tuple:
    """What changed since the last round: each shard log's size."""
    return tuple((str(r), (r / LOG).stat().st_size if (r / LOG).exists() else -1) for r in runs)


def finished(runs: list[Path]) -> bool:
    """Every shard of the campaign is there and its last invocation ran out its budget, deadline or programs."""
    configs = [_first_start(r) for r in runs]
    count = int(str(configs[0].get("shard") or "0/1").partition("/")[2]) if configs else 0
    return bool(runs) and len(runs) == count and all(Ledger.load(r).complete for r in runs)


def watch(patterns: list[str], out: Path, every: float, until: Optional[float] = None,
          progress: Optional[Callable[[str, bool], None]] = None) -> dict:
    """Merge every ``every`` seconds while the shards write, until each has
    finished (a shard not started yet is waited for) or ``until``."""
    if every <= 0:
        raise ValueError(f"--watch {every}: expected seconds between rounds")
    runs = _expand(patterns)
    if runs:
        check(runs, out)  # a wrong folder fails at once, before anything is written
    state, summary, rounds = None, None, 0
    while True:
        runs = _expand(patterns)
        if runs and _state(runs) != state:
            state = _state(runs)
            summary = merge(runs, out, fresh=rounds == 0)
            rounds += 1
            if progress:
                progress(f"merged {len(runs)} shard(s): {summary['programs']} programs, "
                         f"{len(summary['findings'])} distinct findings ({time.strftime('%H:%M:%S')})", False)
        if runs and finished(runs) or until is not None and time.time() >= until:
            break
        time.sleep(every)
    if runs and _state(runs) != state:  # the last appends came after the last round
        summary = merge(runs, out, fresh=rounds == 0)
    if summary is None:
        raise ValueError(f"merge --watch: no campaign folder matched {' '.join(patterns)}")
    return summary
