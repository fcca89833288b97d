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
    coverage: {file: {lines, branches, missing}} or {}   # with --coverage
    generator: {feature: programs}    # generator coverage counts
    aborted: str                      # why it stopped early, "" if it did not
    findings: [finding, ...]          # most hits first

finding::

    signature, oracle, kind, severity, culprit, known_issue (id or None),
    message, first_seen (ISO time), count, folder ("findings/<slug>"),
    size, layer, minimized (bool), repro_exit (int or None: what repro.py
    exited with when the campaign ran it)
"""

from __future__ import annotations

SEVERITIES: dict[str, str] = {
    "wrong": "Wrong results and broken promises",
    "process": "Worker crashes, hangs and runaway memory",
    "missed": "Missed optimizations",
    "recompile": "Unneeded recompiles",
}
