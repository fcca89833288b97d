"""``python -m harness check MODULE:FACTORY``: one model through every oracle
that applies to it (``harness.model.MODEL_ORACLES``), written as a campaign
writes its folder: ``summary.json``, ``report.md`` and a folder per finding
with a ``repro.py`` that rebuilds the model from its factory."""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

from harness.model import MODEL_ORACLES, FactoryError, model_config, run_compiled, load_factory, run_model
from oracles.registry import ORACLES, judge

from .known_issues import match
from .triage import alike, normalize


MODEL_ISSUES = Path(__file__).parent / "model_issues"


def known_model_issue(signature: str) -> str | None:
    """The id of a known issue found on a model (``reports/model_issues``:
    issue.json with patterns, and a standalone repro.py) or of the program
    baseline, that names ``signature``."""
    import fnmatch

    for path in sorted(MODEL_ISSUES.glob("*/issue.json")):
        issue = json.loads(path.read_text())
        if any(fnmatch.fnmatchcase(signature, p) for p in issue["patterns"]):
            return issue["id"]
    return None


def _culprit(outcome, verdict) -> str:
    """"dedup" when the same model compiled without deduplication (a real
    compile, never a spared one) passes this oracle alike."""
    if not outcome.config.dedup:
        return "backend"
    off = run_compiled(load_factory(outcome.source), outcome.source, replace(outcome.config, dedup=False, companions=()))
    again = replace(outcome, config=replace(outcome.config, dedup=False), compiled=off[0], capture=off[1],
                    companions={"dedup_off": off}, spared={"recapture": "judging blame"})
    return "backend" if alike(ORACLES[verdict.oracle](again), verdict) else "dedup"


def signature(outcome, verdict, culprit: str) -> str:
    """Spelled as a campaign's (``oracle:kind:culprit:detail``), so the
    known-issues baseline names a model's findings too; the detail is a
    crash's stage and message, a structural oracle's label, or where the
    values differ (a model has no repeats to take differences away from)."""
    detail = f"{verdict.details.get('stage')}:{normalize(verdict.message)}" if verdict.kind == "crash" else \
        verdict.details.get("label") or verdict.where.split("[")[0]
    return ":".join(p for p in (verdict.oracle, verdict.kind, culprit, detail) if p)


REPRO = '''"""Repro: {signature}
Model: {spec} (rebuilt from its factory), backend {backend!r}, deduplication {dedup}.
Exit 1: the compiled model differs from eager (or crashes); 0: it does not; 2: the repro failed."""
import importlib, os, sys
sys.path.insert(0, {cwd!r})
import torch

SPEC, BACKEND, DEDUP = {spec!r}, {backend!r}, {dedup!r}


def backend():
    if ":" in BACKEND:  # package.module:callable, as the harness resolves it
        module, name = BACKEND.split(":")
        return getattr(importlib.import_module(module), name)
    return BACKEND


def build():
    module, name = SPEC.split(":")
    torch.manual_seed(0)
    model, inputs = getattr(importlib.import_module(module), name)()
    inputs = inputs() if callable(inputs) else inputs
    return model, ((), inputs) if isinstance(inputs, dict) else (tuple(inputs), {{}})


def run(fn_of_model):
    model, (args, kwargs) = build()
    out = fn_of_model(model)(*args, **kwargs)
    leaves = [x for x in torch.utils._pytree.tree_leaves(out) if isinstance(x, torch.Tensor)]
    loss = sum(x.float().sum() for x in leaves if x.requires_grad)
    if torch.is_tensor(loss):
        loss.backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    return [x.detach() for x in leaves], grads


try:
    expected = run(lambda m: m)
    expected_again = run(lambda m: m)
except Exception as e:
    print(f"ERROR: the model fails in eager: {{type(e).__name__}}: {{e}}"); sys.exit(2)
try:
    with torch._dynamo.config.patch(use_graph_deduplication=DEDUP):
        actual = run(lambda m: torch.compile(m, backend=backend()))
except Exception as e:
    print(f"REPRODUCED: the compile raised {{type(e).__name__}}: {{str(e).splitlines()[0][:300]}}"); sys.exit(1)
bad = []
for kind, exp, again, act in (("output", expected[0], expected_again[0], actual[0]), ("grad", expected[1], expected_again[1], actual[1])):
    for i, (e, e2, a) in enumerate(zip(exp, again, act)):
        noise = (e.double() - e2.double()).abs().max().item() if e.numel() else 0.0
        tol = max(1e-4, 10 * noise) * max(1.0, e.double().abs().max().item() if e.numel() else 1.0)
        if e.shape != a.shape or (e.double() - a.double()).abs().max().item() > tol:
            bad.append(f"{{kind}}[{{i}}]")
if bad:
    print(f"REPRODUCED: {{', '.join(bad[:8])}} differ from eager (torch {{torch.__version__}})"); sys.exit(1)
print(f"not reproduced: compiled matches eager (torch {{torch.__version__}})"); sys.exit(0)
'''


def check(spec: str, backend: str = "aot_eager", out: Path = Path("runs/check"), train: bool = False) -> dict:
    started = time.time()
    config = model_config(backend)
    outcome = run_model(spec, config)
    verdicts = judge(outcome, MODEL_ORACLES)
    out.mkdir(parents=True, exist_ok=True)
    findings = []
    for v in verdicts:
        if not v.failed:
            continue
        culprit = _culprit(outcome, v)
        sig = signature(outcome, v, culprit)
        known = match(sig, backend)
        known_id = known.id if known else known_model_issue(sig)
        folder = out / "findings" / "".join(c if c.isalnum() else "-" for c in sig)[:80]
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "repro.py").write_text(REPRO.format(signature=sig, spec=spec, backend=backend, dedup=config.dedup,
                                                      cwd=os.getcwd()))
        (folder / "log.txt").write_text(f"{v}\n\n{json.dumps(v.details, indent=2, default=str)[:20000]}\n")
        findings.append({"signature": sig, "oracle": v.oracle, "kind": v.kind, "culprit": culprit,
                         "known_issue": known_id, "message": str(v)[:500],
                         "folder": str(folder.relative_to(out))})
    summary = {"model": spec, "backend": backend, "torch": torch.__version__, "oracles": list(MODEL_ORACLES),
               "seconds": round(time.time() - started, 1), "seconds_by_stage": {k: round(s, 3) for k, s in outcome.seconds.items()},
               "invoke_subgraph_calls": outcome.capture.invoke_subgraph_calls, "frames": outcome.capture.frames,
               "region_groups": len(outcome.capture.region_groups), "spared": outcome.spared,
               "verdicts": {v.oracle: {"status": v.status.value, "kind": v.kind, "message": v.message[:300]} for v in verdicts},
               "findings": findings}
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    lines = [f"# Model check: {spec} on {backend}, torch {torch.__version__}", "",
             f"{summary['invoke_subgraph_calls']} invoke_subgraph calls in {summary['frames']} graph(s), "
             f"{summary['region_groups']} region group(s); {summary['seconds']} s.", "",
             "| oracle | verdict | |", "|---|---|---|"]
    lines += [f"| {name} | {v['status']}{' [' + v['kind'] + ']' if v['kind'] else ''} | {v['message'][:120]} |"
              for name, v in summary["verdicts"].items()]
    lines += ["", "## Findings", ""] + ([f"- `{f['signature']}` ({f['known_issue'] or '**NEW**'}): `{f['folder']}/repro.py`"
                                         for f in findings] or ["(none)"])
    (out / "report.md").write_text("\n".join(lines) + "\n")
    return summary


def main(args) -> int:
    try:
        summary = check(args.factory, args.backend, args.out)
    except FactoryError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for name, v in summary["verdicts"].items():
        print(f"{name:16s} {v['status']}{' [' + v['kind'] + ']' if v['kind'] else ''}")
    print(f"{len(summary['findings'])} finding(s); report: {args.out / 'report.md'}")
    return 1 if any(not f["known_issue"] for f in summary["findings"]) else 0
