"""``python -m harness check MODULE:FACTORY``: one model through every oracle
that applies to it (``harness.model.MODEL_ORACLES``), written as a campaign
writes its folder: ``summary.json``, ``report.md`` and a folder per finding
with a ``repro.py`` that rebuilds the model from its factory."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

from harness.model_changes import MODEL_CHANGES
from harness.model import MODEL_ORACLES, FactoryError, model_config, run_compiled, load_factory, run_model
from oracles.guards import each_call
from oracles.registry import ORACLES, judge

from reports.html import render_check_html
from reports.known_issues import known_model_issue, match
from reports.repro import render_model_repro
from reports.signature import normalize
from reports.triage import alike


def _culprit(outcome, verdict, off) -> str:  # type: ignore[no-untyped-def]
    """"dedup" when the same model compiled without deduplication (``off()``:
    a real compile, never a spared one) passes this oracle alike."""
    if not outcome.config.dedup:
        return "backend"
    run = off()
    again = replace(outcome, config=replace(outcome.config, dedup=False), compiled=run[0], capture=run[1],
                    companions={"dedup_off": run}, spared={"recapture": "judging blame"})
    return "backend" if alike(ORACLES[verdict.oracle](again), verdict) else "dedup"


def signature(outcome, verdict, culprit: str) -> str:
    """Spelled as a campaign's (``oracle:kind:culprit:detail``), so the
    known-issues baseline names a model's findings too; the detail is a
    crash's stage and message, a structural oracle's label, or where the
    values differ (a model has no repeats to take differences away from)."""
    detail = f"{verdict.details.get('stage')}:{normalize(verdict.message)}" if verdict.kind == "crash" else \
        verdict.details.get("label") or verdict.where.split("[")[0]
    return ":".join(p for p in (verdict.oracle, verdict.kind, culprit, detail) if p)


def known_id(sig: str, outcome) -> str | None:  # type: ignore[no-untyped-def]
    """The known issue naming ``sig``: the program baseline's, else a model issue's."""
    known = match(sig, outcome.config.backend)
    return known.id if known else known_model_issue(sig, outcome.source, outcome.config.backend)


def failures(outcome, verdicts) -> list[tuple]:  # type: ignore[no-untyped-def]
    """(verdict, signature, known issue id or None) of each failed verdict.
    Blame needs one compile without deduplication for them all: the
    companion when it was compiled, else made at the first blame."""
    made: list = []

    def off():  # type: ignore[no-untyped-def]
        if not made:
            made.append(outcome.companions["dedup_off"] if "dedup_off" in outcome.companions
                        and "dedup_off" not in outcome.spared else
                        run_compiled(load_factory(outcome.source), outcome.source,
                                     replace(outcome.config, dedup=False, companions=())))
        return made[0]

    named = []
    for v in verdicts:
        if v.failed:
            sig = signature(outcome, v, _culprit(outcome, v, off))
            named.append((v, sig, known_id(sig, outcome)))
    return named


def _said(status: str, kind: str) -> str:
    return f"{status}{' [' + kind + ']' if kind else ''}"


def _verdict(v, invalid: str) -> dict:
    if v is None:
        return {"status": "invalid" if invalid else "not judged", "verdict": "invalid" if invalid else "not judged"}
    return {"status": v.status.value, "verdict": _said(v.status.value, v.kind), "message": v.message[:300]}


def _changes_through(verdict) -> list[str]:
    """The changed calls a guard finding needs replayed: each of
    MODEL_CHANGES up to the one it failed at (an entry one made can serve the next)."""
    kind = (verdict.details.get("variant") or {}).get("kind")
    kinds = list(MODEL_CHANGES)
    return kinds[: kinds.index(kind) + 1] if kind in kinds else []


def _absolute(spec: str) -> str:
    """A factory file's spec by its absolute path, so its repro runs from anywhere."""
    module, _, name = spec.rpartition(":")
    return f"{Path(module).resolve()}:{name}" if "/" in module or module.endswith(".py") else spec


def check(spec: str, backend: str = "aot_eager", out: Path = Path("runs/check")) -> dict:
    started = time.time()
    config = model_config(backend)
    outcome = run_model(spec, config)
    verdicts = judge(outcome, MODEL_ORACLES)
    calls = each_call(outcome) if outcome.compiled.failure is None else {}
    out.mkdir(parents=True, exist_ok=True)
    findings = []
    for v, sig, known_id in failures(outcome, verdicts):
        culprit = sig.split(":")[2]
        folder = out / "findings" / "".join(c if c.isalnum() else "-" for c in sig)[:80]
        folder.mkdir(parents=True, exist_ok=True)
        changes = _changes_through(v)
        (folder / "repro.py").write_text(render_model_repro(signature=sig, spec=_absolute(spec), backend=backend,
                                                            dedup=config.dedup, changes=changes, oracle=v.oracle,
                                                            root=str(Path(__file__).resolve().parents[1])))
        (folder / "log.txt").write_text(f"{v}\n\n{json.dumps(v.details, indent=2, default=str)[:20000]}\n")
        (folder / "meta.json").write_text(json.dumps({"model": spec, "backend": backend, "dedup": config.dedup,
                                                       "oracle": v.oracle, "kind": v.kind, "culprit": culprit,
                                                       "torch": torch.__version__}, indent=2))
        findings.append({"signature": sig, "oracle": v.oracle, "kind": v.kind, "culprit": culprit,
                         "known_issue": known_id, "message": str(v)[:500],
                         "folder": str(folder.relative_to(out))})
    summary = {"model": spec, "backend": backend, "torch": torch.__version__, "oracles": list(MODEL_ORACLES),
               "seconds": round(time.time() - started, 1), "seconds_by_stage": {k: round(s, 3) for k, s in outcome.seconds.items()},
               "invoke_subgraph_calls": outcome.capture.invoke_subgraph_calls, "frames": outcome.capture.frames,
               "region_groups": len(outcome.capture.region_groups), "spared": outcome.spared,
               "verdicts": {v.oracle: {"status": v.status.value, "kind": v.kind, "message": v.message[:300]} for v in verdicts},
               "changes": [{"kind": r.variant["kind"], "description": r.variant["description"],
                            "recompiled": r.recompiled, "invalid": r.invalid, "seconds": round(r.seconds, 3),
                            **_verdict(calls.get(r.variant["kind"]), r.invalid)} for r in outcome.capture.variants],
               "findings": findings}
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    lines = [f"# Model check: {spec} on {backend}, torch {torch.__version__}", "",
             f"{summary['invoke_subgraph_calls']} invoke_subgraph calls in {summary['frames']} graph(s), "
             f"{summary['region_groups']} region group(s); {summary['seconds']} s.", "",
             "| oracle | verdict | |", "|---|---|---|"]
    lines += [f"| {name} | {_said(v['status'], v['kind'])} | {v['message'][:120]} |"
              for name, v in summary["verdicts"].items()]
    lines += ["", "## Changed calls", "", "| change | call | verdict | seconds |", "|---|---|---|---|"]
    lines += [f"| {c['kind']} ({c['description']}) | {c['invalid'] or ('recompiled' if c['recompiled'] else 'served')} "
              f"| {c.get('verdict', '—')} {c.get('message', '')[:100]} | {c['seconds']} |" for c in summary["changes"]]
    lines += ["", "## Findings", ""] + ([f"- `{f['signature']}` ({f['known_issue'] or '**NEW**'}): `{f['folder']}/repro.py`"
                                         for f in findings] or ["(none)"])
    (out / "report.md").write_text("\n".join(lines) + "\n")
    (out / "report.html").write_text(render_check_html(summary, out))
    return summary


def main(args) -> int:
    try:
        summary = check(args.factory, args.backend, args.out)
    except FactoryError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for name, v in summary["verdicts"].items():
        print(f"{name:16s} {_said(v['status'], v['kind'])}")
    print(f"{len(summary['findings'])} finding(s); report: {args.out / 'report.md'} (also report.html)")
    return 1 if any(not f["known_issue"] for f in summary["findings"]) else 0
