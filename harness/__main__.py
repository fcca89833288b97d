"""Command line: ``python -m harness fuzz --backend NAME --budget SECONDS ...``
and ``python -m harness stats -n 2000`` (the generator report).

The campaign composes every layer, so it lives in ``reports.campaign``; this
entry point only parses arguments and turns bad input into one line.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness")
    sub = parser.add_subparsers(dest="command", required=True)
    fuzz = sub.add_parser("fuzz", help="run a fuzz campaign and write a report")
    fuzz.add_argument("--backend", default="aot_eager", help="built-in name or package.module:callable")
    fuzz.add_argument("--budget", type=float, default=120.0, help="seconds to spend drawing programs")
    fuzz.add_argument("--seed", type=int, default=0)
    fuzz.add_argument("--out", type=Path, default=Path("runs/latest"))
    fuzz.add_argument("--oracles", default="", help="comma-separated oracle names (default: all)")
    fuzz.add_argument("--variants", type=int, default=None,
                      help="changed re-calls per program for the guard oracles (default 3; -1: every one)")
    stats = sub.add_parser("stats", help="generator report: feature counts, eager validity, region share")
    stats.add_argument("-n", type=int, default=2000, help="programs to draw")
    stats.add_argument("--seed", type=int, default=0)
    stats.add_argument("--jobs", type=int, default=2, help="worker processes for the eager and Dynamo runs")
    stats.add_argument("--no-run", action="store_true", help="count features only; run nothing")
    stats.add_argument("--json", type=Path, default=None, help="also write the summary here")
    stats.add_argument("--check", action="store_true", help="exit 1 unless every target is met")
    args = parser.parse_args(argv)

    if args.command == "stats":
        from harness import stats as generator_stats

        if args.n < 1 or args.jobs < 1:
            print("error: -n and --jobs must be positive", file=sys.stderr)
            return 2
        return generator_stats.run(args.n, args.seed, args.jobs, not args.no_run, args.json, args.check)

    import torch

    from harness.backends import BackendError
    from reports.campaign import run

    torch.set_num_threads(1)
    # torch's notice that one subgraph got several backward graphs: expected, not a finding.
    warnings.filterwarnings("ignore", message="invoke_subgraph traced multiple backward graphs")
    oracles = tuple(o for o in args.oracles.split(",") if o) or None
    try:
        summary = run(args.backend, args.budget, args.seed, args.out, oracles, variants=args.variants)
    except (BackendError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    new = [f for f in summary["findings"] if not f["known_issue"]]
    print(f"{summary['programs']} programs, {len(summary['findings'])} distinct findings "
          f"({len(new)} new) on {summary['backend']}, torch {summary['torch']}")
    for f in summary["findings"]:
        print(f"  {f['count']:5d}x {f['known_issue'] or 'NEW':7s} {f['signature']}")
    if summary.get("aborted"):
        print(f"campaign stopped early: {summary['aborted']}")
    print(f"report: {args.out / 'report.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
