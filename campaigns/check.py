"""``python -m harness check MODULE:FACTORY``: one model through every oracle
that applies to it (``harness.model.MODEL_ORACLES``), written as a campaign
writes its folder: ``summary.json``, ``report.md`` and a folder per finding
with a ``repro.py`` that rebuilds the model from its factory."""

from __future__ import annotations

import fnmatch
import functools
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
from reports.known_issues import match
from reports.signature import normalize
from reports.triage import alike


MODEL_ISSUES = Path(__file__).parent / "model_issues"


@functools.lru_cache(maxsize=1)
def _model_issues() -> tuple[dict, ...]:
    return tuple(json.loads(p.read_text()) for p in sorted(MODEL_ISSUES.glob("*/issue.json")))


def known_model_issue(signature: str, model: str = "", backend: str = "") -> str | None:
    """The id of a known issue found on a model (``reports/model_issues``:
    issue.json with patterns, and a standalone repro.py) that names
    ``signature``. An issue with ``models`` (factory patterns) names only
    those models' findings: a model where a known bug shows as a plain
    mismatch must not make every model's mismatch known; one with a
    ``backend`` other than "all", only that backend's."""
    for issue in _model_issues():
        if issue.get("models") and not any(fnmatch.fnmatchcase(model, m) for m in issue["models"]):
            continue
        if backend and issue.get("backend", "all") not in ("all", backend):
            continue
        if any(fnmatch.fnmatchcase(signature, p) for p in issue["patterns"]):
            return issue["id"]
    return None


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


REPRO = '''"""Repro: {signature}
Model: {spec} (rebuilt from its factory), backend {backend!r}, deduplication {dedup};
after the first call, the changed calls {changes} (harness.model_changes.MODEL_CHANGES), in order.
Exit 1: the compiled model differs from eager (or crashes); 0: it does not; 2: the repro failed."""
import contextlib, importlib, sys
sys.path.insert(0, {root!r})  # the harness, for the factory loader and the changes
import torch
from harness.capabilities import recompile_limit_name
from harness.model import build, load_factory
from harness.model_changes import MODEL_CHANGES
from harness.model_state import restored

SPEC, BACKEND, DEDUP, CHANGES, ORACLE = {spec!r}, {backend!r}, {dedup!r}, {changes!r}, {oracle!r}
CALLS = []  # invoke_subgraph calls in each graph the backend is handed


def backend():
    if ":" in BACKEND:  # package.module:callable, as the harness resolves it
        module, name = BACKEND.split(":")
        inner = getattr(importlib.import_module(module), name)
    else:
        inner = torch._dynamo.lookup_backend(BACKEND)

    def counting(gm, example_inputs, **kwargs):
        CALLS.append(sum(n.target is torch.ops.higher_order.invoke_subgraph for n in gm.graph.nodes))
        return inner(gm, example_inputs, **kwargs)
    return counting


def fresh(change=None):
    model, args, kwargs = build(load_factory(SPEC), SPEC)
    return change(model, args, kwargs) if change else (model, args, kwargs)


def run(model, args, kwargs, fn, context):
    with context():
        out = fn(*args, **kwargs)
        leaves = [x for x in torch.utils._pytree.tree_leaves(out) if isinstance(x, torch.Tensor)]
        loss = sum(x.float().sum() for x in leaves if x.requires_grad)
        if torch.is_tensor(loss):
            loss.backward()
    return [x.detach() for x in leaves], [p.grad for p in model.parameters() if p.grad is not None]


def differ(tag, expected, again, actual, floor):
    bad = []
    for kind, exp, exp2, act in (("output", expected[0], again[0], actual[0]), ("grad", expected[1], again[1], actual[1])):
        for i, (e, e2, a) in enumerate(zip(exp, exp2, act)):
            noise = (e.double() - e2.double()).abs().max().item() if e.numel() else 0.0
            tol = max(floor, 10 * noise) * max(1.0, e.double().abs().max().item() if e.numel() else 1.0)
            if e.shape != a.shape or (e.numel() and (e.double() - a.double()).abs().max().item() > tol):
                bad.append(f"{{tag}}{{kind}}[{{i}}]")
    return bad


def eager(change, context):
    try:
        return [run(m, a, k, m, context) for m, a, k in (fresh(change), fresh(change))]
    except Exception as e:
        print(f"ERROR: the model fails in eager: {{type(e).__name__}}: {{e}}"); sys.exit(2)


calls = [("", None, contextlib.nullcontext, "")]
calls += [(kind + ": ", MODEL_CHANGES[kind].make, MODEL_CHANGES[kind].context, MODEL_CHANGES[kind].dtype)
          for kind in CHANGES]
model, args, kwargs = fresh()
weights = {{k: v.detach().clone() for k, v in model.state_dict().items()}}
limit = recompile_limit_name()
bad = []
with torch._dynamo.config.patch(**{{"use_graph_deduplication": DEDUP, limit: getattr(torch._dynamo.config, limit) + len(CHANGES)}}):
    compiled = torch.compile(model, backend=backend())
    for tag, change, context, dtype in calls:
        expected, again = eager(change, context)
        with torch.no_grad():
            model.load_state_dict(weights)
        for p in model.parameters():
            p.grad = None
        with restored(model):
            _, args, kwargs = change(model, *fresh()[1:]) if change else (model, *fresh()[1:])
            try:
                actual = run(model, args, kwargs, compiled, context)
            except Exception as e:
                print(f"REPRODUCED: {{tag or 'the first call: '}}the compiled call raised {{type(e).__name__}}: {{' '.join(str(e).split())[:300]}}")
                sys.exit(1)
        bad += differ(tag, expected, again, actual, 5e-2 if dtype else 1e-4)
if bad:
    print(f"REPRODUCED: {{', '.join(bad[:8])}} differ from eager (torch {{torch.__version__}})"); sys.exit(1)
if ORACLE == "completeness" and DEDUP and CALLS and CALLS[0] < 2:  # the first call's graph
    print(f"REPRODUCED: the model's repeated layers, and the pass merged nothing: {{CALLS[0]}} invoke_subgraph calls")
    sys.exit(1)
print(f"not reproduced: compiled matches eager (torch {{torch.__version__}})"); sys.exit(0)
'''


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
        (folder / "repro.py").write_text(REPRO.format(signature=sig, spec=_absolute(spec), backend=backend, dedup=config.dedup,
                                                      changes=changes, oracle=v.oracle,
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
