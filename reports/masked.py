"""How much of the space a recorded crash hides: the masked share.

A judgment is one oracle judging one stage of one program (the main run with
its guard variants, twins and toggles; the door run; the CUDA-graph replay).
It is masked when the run it judges died on a known crash first and no run
without that crash's trigger (reports.unmask) judged it instead. Workers
report, per program and stage, how many judgments there were and which known
issue masked how many; the ledger folds them, so ``report merge`` sums them
like every other count. The share per issue says which torch bug to fix or
work around first.
"""

from __future__ import annotations

from collections import Counter

STAGES = ("main", "door", "replay")


def event(judged: dict[str, str | None], stopped: dict[str, str | None] | None = None) -> dict:
    """One stage's judgments as a worker reports them: oracle -> the known
    issue that masked its judgment, or None where it was made; ``stopped``:
    the same before the runs without triggers (what the first run alone left)."""
    return {"judgments": len(judged), "masked": dict(Counter(i for i in judged.values() if i)),
            "stopped": sum(1 for i in (stopped if stopped is not None else judged).values() if i)}


PROGRAMS = "programs"  # the state's count of programs (not a stage): met a known crash first, still masked


def fold(into: dict, e: dict | None) -> None:
    """Add one program's stages (``{stage: event(...)}``) to the running totals."""
    if e:
        c = into.setdefault(PROGRAMS, Counter())
        c["programs"] += 1
        c["stopped"] += any(v.get("stopped") for v in e.values())
        c["masked"] += any(v.get("masked") for v in e.values())
    for stage, counts in (e or {}).items():
        c = into.setdefault(stage, Counter())
        c["judgments"] += counts.get("judgments", 0)
        c["stopped"] += counts.get("stopped", 0)
        for issue, n in counts.get("masked", {}).items():
            c[f"masked:{issue}"] += n


def summary(state: dict) -> dict:
    """The figure: judgments and masked ones, overall, per stage, per issue (most
    first); ``stopped``: those the first run alone could not make."""
    by_stage, by_issue = {}, Counter()
    programs = dict(state.get(PROGRAMS, {}))
    for stage, c in state.items():
        if stage == PROGRAMS:
            continue
        masked = {k.split(":", 1)[1]: n for k, n in c.items() if k.startswith("masked:")}
        by_issue.update(masked)
        n, m = c.get("judgments", 0), sum(masked.values())
        by_stage[stage] = {"judgments": n, "masked": m, "share": round(m / n, 4) if n else 0.0,
                           "stopped": c.get("stopped", 0)}
    total = sum(s["judgments"] for s in by_stage.values())
    masked = sum(by_issue.values())
    stopped = sum(s["stopped"] for s in by_stage.values())
    return {"judgments": total, "masked": masked, "share": round(masked / total, 4) if total else 0.0,
            "stopped": stopped, "stopped_share": round(stopped / total, 4) if total else 0.0,
            "programs": {"judged": programs.get("programs", 0), "stopped": programs.get("stopped", 0),
                         "masked": programs.get("masked", 0)},
            "by_stage": dict(sorted(by_stage.items(), key=lambda kv: STAGES.index(kv[0]) if kv[0] in STAGES else 9)),
            "by_issue": {i: {"masked": n, "share": round(n / total, 4) if total else 0.0}
                         for i, n in by_issue.most_common()}}


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def markdown(s: dict | None) -> list[str]:
    if not s or not s.get("judgments"):
        return []
    lines = ["## Masked by known issues", "",
             f"{s['masked']} of {s['judgments']} judgments (**{_pct(s['share'])}**) could not be made: the run died "
             "on a recorded crash first and no run without its trigger judged it instead "
             f"({s.get('stopped', 0)} stopped in the first run, {_pct(s.get('stopped_share', 0.0))}; programs whose "
             f"first run met a known crash: {s.get('programs', {}).get('stopped', 0)} of "
             f"{s.get('programs', {}).get('judged', 0)}, still masked somewhere: {s.get('programs', {}).get('masked', 0)}).",
             "",
             "| stage | judgments | stopped in the first run | masked | share |", "|---|---|---|---|---|"]
    lines += [f"| {stage} | {v['judgments']} | {v.get('stopped', 0)} | {v['masked']} | {_pct(v['share'])} |"
              for stage, v in s["by_stage"].items()]
    if s["by_issue"]:
        lines += ["", "| known issue | masked | share of all judgments |", "|---|---|---|"]
        lines += [f"| {i} | {v['masked']} | {_pct(v['share'])} |" for i, v in s["by_issue"].items()]
    return lines + [""]


def text(s: dict | None) -> list[str]:
    if not s or not s.get("judgments"):
        return []
    lines = [f"\nmasked by known issues: {s['masked']}/{s['judgments']} judgments ({_pct(s['share'])}; "
             f"{s.get('stopped', 0)} stopped in the first run)"]
    lines += [f"  {stage:<8} {v['masked']:>6}/{v['judgments']:<6} {_pct(v['share'])}" for stage, v in s["by_stage"].items()]
    lines += [f"  {i:<8} {v['masked']:>6} ({_pct(v['share'])})" for i, v in s["by_issue"].items()]
    return lines
