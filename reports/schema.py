"""The vocabulary a campaign's outputs share: severities and the shape of
``summary.json``, so every renderer (Markdown, HTML, JUnit, diff) reads the
same fields.

summary.json::

    backend, torch, python, seed, shard ("i/N"), workers, oracles: [str]
    programs, seconds, programs_per_second, deduplicated_share
    seconds_per_program: {stage: seconds}
    verdicts: {status: count}
    changed_calls: {...}              # guard oracles' changed re-calls
    findings_by_severity: {severity: distinct findings}
    workers_lost: {kind: count}       # signal / hang / memory
    timeline: [{t, programs, failures, distinct}]   # seconds since start
    feedback: {programs, edges, arcs, semantic_edges, sources, files, swarm, timeline: [{t, edges}], corpus, ...}
                                      # a steered campaign's books (reports.feedback), or None
    coverage: {file: {lines, branches, missing}} or {}   # with --coverage
    generator: {feature: programs}    # generator coverage counts
    guard_kinds: {built: {kind: programs}, known, never: [kind]}   # guard kinds Dynamo built, of those its
                                      # GuardBuilder has (reports.guard_coverage)
    aborted: str                      # why it stopped early, "" if it did not
    root_causes: {known: {KI: hits}, new: [signature], unconfirmed: [signature]}
    unavailable: {capability: what is lost}   # what this torch lacks (harness.capabilities)
    triage: {full, recalled, sampled, mismatched}   # finding hits: triaged in full, or recalled from an
                                      # earlier hit's fingerprint; sampled: recalled ones triaged in full
                                      # anyway; mismatched: of those, the ones full triage named otherwise
    follow_ups: {new, sampled_known, skipped_known}  # distinct findings whose repro was run (new ones also
                                      # minimized and localized), or not (known issues but a sample)
    harness_seconds: {<task type>: {tasks, seconds, torch, harness, per_task}, idle}   # workers' seconds:
                                      # torch running programs (harness.clock) vs the harness around them
    findings: [finding, ...]          # most hits first

finding::

    signature, oracle, kind, severity, culprit, known_issue (id or None),
    message, first_seen (ISO time), count, folder ("findings/<slug>"),
    size, layer, minimized (bool), repro_exit (int or None: what repro.py
    exited with when the campaign ran it; 1 reproduced, 0 not, 3 fails
    differently, 2 the repro itself failed), differences (the call
    differences its program reaches), spellings (``op:kind`` of each op its
    program writes in another spelling than the default: generators.spellings)
"""

from __future__ import annotations

SEVERITIES: dict[str, str] = {
    "wrong": "Wrong results and broken promises",
    "process": "Worker crashes, hangs and runaway memory",
    "missed": "Missed optimizations",
    "recompile": "Unneeded recompiles",
}

# A finding whose repro, run standalone, did not reproduce it (exit 0, 2 or 3)
# is listed apart from the confirmed ones: an oracle judged something the
# repro does not rebuild, or the verdict was flaky.
UNCONFIRMED = "Unconfirmed: the standalone repro does not reproduce these"
REPRO_EXITS = {0: "does not reproduce", 1: "reproduces", 2: "repro error", 3: "fails differently"}


def confirmed(finding: dict) -> bool:
    """Not (yet) contradicted by its standalone repro."""
    return finding.get("repro_exit") in (None, 1)


def grouped(findings: list[dict], severities) -> list[tuple[str, str, list[dict]]]:
    """(key, title, rows) per severity in ``severities``, confirmed findings
    only, then the unconfirmed ones: how every report lists findings."""
    groups = [(s, SEVERITIES.get(s, s), [f for f in findings if (f.get("severity") or "wrong") == s and confirmed(f)])
              for s in severities]
    return groups + [("unconfirmed", UNCONFIRMED, [f for f in findings if not confirmed(f)])]


def root_causes(findings: list[dict]) -> dict:
    """Known issues by hits, and the new and unconfirmed signatures: the
    report's top line counts these before signatures."""
    known: dict[str, int] = {}
    for f in findings:
        if f.get("known_issue") and confirmed(f):
            known[f["known_issue"]] = known.get(f["known_issue"], 0) + f.get("count", 1)
    return {"known": dict(sorted(known.items())),
            "new": sorted(f["signature"] for f in findings if not f.get("known_issue") and confirmed(f)),
            "unconfirmed": sorted(f["signature"] for f in findings if not confirmed(f))}


def root_cause_line(s: dict) -> str:
    r = s.get("root_causes") or root_causes(s.get("findings", []))
    known = ", ".join(f"{k} ×{n}" for k, n in r["known"].items()) or "none"
    return (f"Root causes: {len(r['known'])} known ({known}), {len(r['new'])} new, {len(r['unconfirmed'])} "
            f"unconfirmed; {len(s.get('findings', []))} distinct signatures.")


def harness_errors_line(s: dict) -> str:
    """The programs the harness itself failed on: never judged, so a campaign of nothing else must not read
    as a clean one (on a GPU machine every worker once failed every program so, and the report said 0 new)."""
    n = (s.get("errors") or {}).get("harness_error", 0)
    if not n:
        return ""
    most = "; ".join(f"`{k}` ×{v}" for k, v in (s.get("harness_errors") or {}).items())
    return (f"Harness errors: {n} runs of {s.get('programs', '?')} programs were not judged (a bug of this harness "
            f"or its environment, tracebacks in findings.jsonl){': ' + most if most else ''}")


TIMELINE_POINTS = 60  # at most this many points in a summary's timelines


def thin(points: list) -> list:
    """At most TIMELINE_POINTS, evenly spread, keeping the last."""
    if len(points) <= TIMELINE_POINTS:
        return points
    step = len(points) / TIMELINE_POINTS
    return [points[int(i * step)] for i in range(TIMELINE_POINTS - 1)] + [points[-1]]
