"""A zoo of model factories through the compile, mode by mode: the table a
backend's engineers read (``python -m harness zoo``) and what the zoo suite
asserts (every failure named by a known issue).

One compile per model and backend, then each change of
``harness.model_changes.MODEL_CHANGES`` re-called on it (the same inputs, new values,
train(), no_grad, bfloat16 autocast, dropout, then the batch and sequence
changes), each judged on its own
(``oracles.guards.each_call``), with its seconds. Unlike ``check`` there is
no companion compile: blame needs a compile without deduplication, made only
for a failure no known issue names with the culprit "dedup" (the known
issue's own repro is what proves deduplication at fault there).
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import replace
from pathlib import Path

from harness.model import run_model, model_config
from oracles.guards import each_call
from oracles.registry import judge

from .check import failures, known_id, signature

# Judged on the first call and on each changed call (the structural oracles
# need the companions a check compiles).
ORACLES = ("differential", "hygiene", "guards", "recompiles")
ZOO = "campaigns.zoo_models"


def _named(outcome, verdicts) -> list[tuple[str, str | None]]:  # type: ignore[no-untyped-def]
    """The signature and known issue of each failed verdict: as blamed on
    deduplication when a known issue names it so, else with real blame (one
    compile without deduplication for all of those)."""
    cheap = [signature(outcome, v, "dedup" if outcome.config.dedup else "backend") for v in verdicts]
    ids = [known_id(sig, outcome) for sig in cheap]
    blamed = iter(failures(outcome, [v for v, i in zip(verdicts, ids) if not i]))
    return [(sig, i) if i else next(blamed)[1:] for sig, i in zip(cheap, ids)]


def run(spec: str, backend: str = "aot_eager", changes: bool = True) -> dict:
    """One model's result: the first call's verdicts and each mode's (none
    without ``changes``)."""
    started = time.perf_counter()
    outcome = run_model(spec, replace(model_config(backend), companions=(), variants=-1 if changes else 0))
    verdicts = judge(outcome, ORACLES)
    # a wrong first call is the differential oracle's finding, repeated by every later call
    first_wrong = any(v.oracle == "guards" and v.kind == "first_call_wrong" for v in verdicts)
    calls = each_call(outcome) if outcome.compiled.failure is None and not first_wrong else {}
    # the guards verdict is read call by call
    failed = [v for v in verdicts if v.failed and v.oracle != "guards"] + [v for v in calls.values() if v.failed]
    names = dict(zip(map(id, failed), _named(outcome, failed)))
    first = [{"oracle": v.oracle, "signature": names[id(v)][0], "known_issue": names[id(v)][1],
              "message": v.message[:300]} for v in verdicts if id(v) in names]
    recalled = sum(r.seconds for r in outcome.capture.variants)  # timed inside the compile's run
    wrong = next((f for f in first if f["oracle"] == "differential"), None)
    modes = {"first call": {"status": "fail" if outcome.compiled.failure or wrong else "pass",
                            "seconds": round(outcome.seconds.get("compiled", 0.0) - recalled, 2),
                            **({"signature": wrong["signature"], "known_issue": wrong["known_issue"],
                                "message": wrong["message"]} if wrong else {})}}
    for r in outcome.capture.variants:
        kind, v = r.variant["kind"], calls.get(r.variant["kind"])
        mode = {"status": "invalid" if r.invalid else v.status.value if v else
                "first call wrong" if first_wrong else "not judged",
                "recompiled": r.recompiled, "seconds": round(r.seconds, 2)}
        if r.invalid:
            mode["message"] = r.invalid
        if v is not None and v.failed:
            mode["signature"], mode["known_issue"] = names[id(v)]
            mode["message"] = v.message[:300]
        modes[kind] = mode
    return {"model": spec, "backend": backend, "invoke_subgraph_calls": outcome.capture.invoke_subgraph_calls,
            "region_groups": len(outcome.capture.region_groups), "first_call": first, "modes": modes,
            "seconds": round(time.perf_counter() - started, 1)}


def unknown(result: dict) -> list[str]:
    """Each failure no known issue names, as signature and message."""
    found = [f for f in result["first_call"] if not f["known_issue"]]
    found += [m for k, m in result["modes"].items()  # the first call's are among the oracles' above
              if k != "first call" and m.get("signature") and not m["known_issue"]]
    return [f"{f['signature']}\n  {f['message']}" for f in found]


def _cell(mode: dict) -> str:
    verdict = mode.get("known_issue") or ("NEW" if mode.get("signature") else mode["status"])
    return f"{verdict} {mode['seconds']}s"


def table(results: list[dict]) -> str:
    """Markdown: a row per model and backend, a column per mode."""
    modes = list(dict.fromkeys(k for r in results for k in r["modes"]))
    lines = ["| model | backend | calls | first call: oracles | " + " | ".join(modes) + " | seconds |",
             "|---|---|---|---|" + "---|" * len(modes) + "---|"]
    for r in results:
        first = ", ".join(sorted({f["known_issue"] or "NEW" for f in r["first_call"]})) or "pass"
        cells = " | ".join(_cell(r["modes"][m]) if m in r["modes"] else "—" for m in modes)
        lines.append(f"| {r['model'].split(':')[-1]} | {r['backend']} | {r['invoke_subgraph_calls']} | {first} | "
                     f"{cells} | {r['seconds']} |")
    return "\n".join(lines)


def main(args) -> int:
    from harness.model import FactoryError

    results = []
    for name in args.models:
        spec = name if ":" in name else f"{ZOO}:{name}"
        for backend in args.backend:
            try:
                results.append(run(spec, backend, changes=not args.first_call_only))
            except FactoryError as e:
                print(f"error: {e}", file=sys.stderr)
                return 2
            print(table(results[-1:]).splitlines()[-1], flush=True)
            if args.json:  # after each model: a crash of the compiler loses nothing done
                Path(args.json).write_text(json.dumps(results, indent=2))
    print(table(results))
    return 1 if any(unknown(r) for r in results) else 0
