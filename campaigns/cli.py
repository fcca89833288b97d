"""Command line.

    python -m harness fuzz --backend NAME --budget SECONDS --workers N --seed S --out DIR
    python -m harness report diff RUN_A RUN_B | merge SHARD... --out DIR | promote FINDING --id KI-0NN --title T
    python -m harness report upstream KI-0NN|RUN/findings/<slug> [--out DIR] [--trace] [--no-ablation] [--torch PY]
    python -m harness bench
    python -m harness stats -n 2000
    python -m harness regress --torch A --torch B [--campaign DIR] [--budget S] [--seed N] --out DIR

Every command is a driver of this floor (``campaigns``), which composes the
floors below; this entry point only parses arguments and turns bad input into
one line. ``python -m harness`` and the ``dedup-harness`` console script both
call ``main``.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path


def _shard(text: str):
    """i/N, or auto / auto/N: the scheduler's variables say (campaigns.scheduler), resolved when the campaign starts."""
    if text == "auto" or text.startswith("auto/"):
        return text
    i, slash, n = text.partition("/")
    try:
        if not slash:
            raise ValueError
        return int(i), int(n)
    except ValueError:
        raise argparse.ArgumentTypeError(f"shard {text!r}: expected i/N, e.g. 0/4") from None


def _resume(text: str):
    if text != "auto":
        raise argparse.ArgumentTypeError(f"--resume {text!r}: give no value, or auto")
    return text


def version() -> str:
    """This harness's version and the torch it would run, read from the
    installed metadata (no torch import)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    def of(dist: str) -> str:
        try:
            return installed(dist)
        except PackageNotFoundError:
            return "not installed"

    return f"dedup-harness {of('dedup-harness')} (torch {of('torch')})"


class _Parser(argparse.ArgumentParser):
    """Bad arguments are one ``error:`` line and exit 2, as every other bad input is (``--help`` has the usage)."""

    def error(self, message: str):
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")


def _parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m harness")
    parser.add_argument("--version", action="version", version=version())
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    fuzz = sub.add_parser("fuzz", help="run a fuzz campaign and write a report")
    fuzz.add_argument("--backend", default="aot_eager",
                      help="built-in name, an entry point of dedup_harness.backends, or package.module:callable")
    fuzz.add_argument("--mode", default="auto", choices=("auto", "train", "inference", "no_grad", "inference_mode"),
                      help="train: forward and backward; inference: forward-only under no_grad or inference_mode "
                           "(drawn per program); auto (default): train where the backend can, else inference")
    fuzz.add_argument("--budget", type=float, default=120.0, help="seconds the campaign runs (default 120)")
    fuzz.add_argument("--until", default="", metavar="TIME",
                      help="a wall-clock deadline next to --budget: ISO 8601 (2026-11-27T06:00, local time unless "
                           "it names a zone), @UNIX_SECONDS or +DURATION (+90m); past: exits at once")
    fuzz.add_argument("--workers", type=int, default=0,
                      help="worker processes (default: the CPUs this process may use, by affinity and cgroup "
                           "quota, fewer if the memory allotted cannot hold them)")
    fuzz.add_argument("--seed", type=int, default=0)
    fuzz.add_argument("--out", type=Path, default=Path("runs/latest"),
                      help="the campaign's folder; {shard} stands for the shard index (runs/nightly/shard-{shard})")
    fuzz.add_argument("--resume", nargs="?", const=True, default=False, type=_resume,
                      help="go on with the campaign already in --out for another --budget; --resume auto: start, "
                           "or go on until the campaign's --budget and --programs are spent in total (one command "
                           "line for a first run and every requeue)")
    fuzz.add_argument("--shard", type=_shard, default=(0, 1),
                      help="i/N: draw only this shard's programs; auto (or auto/N): the index and count from the "
                           "scheduler (Slurm array, Kubernetes Indexed Job, CI matrix variables)")
    fuzz.add_argument("--claims", type=Path, default=None, metavar="DIR",
                      help="a folder the shards share, so one shard follows up (minimizes, localizes, runs the repro "
                           "of) each root cause and the others count their hits (default with N > 1 shards: "
                           "claims/ next to --out)")
    fuzz.add_argument("--oracles", default="", help="comma-separated oracle names (default: all)")
    fuzz.add_argument("--variants", type=int, default=None,
                      help="changed re-calls per program for the guard oracles (default 3; -1: every one)")
    fuzz.add_argument("--config", action="append", default=[], metavar="SECTION.KEY=VALUE",
                      help="torch config while compiling, SECTION one of dynamo, inductor, functorch, e.g. "
                           "functorch.cse=False (repeatable; it wins over a program's drawn settings)")
    fuzz.add_argument("--lint-share", type=float, default=0.25,
                      help="share of programs run with the pass's own graph_deduplication_lint (default 0.25)")
    fuzz.add_argument("--door-share", type=float, default=0.25,
                      help="share of programs also run through a door: a function transform, checkpointing, a "
                           "control-flow operator, torch.export, a warm compile cache, symbolic shapes (default 0.25)")
    fuzz.add_argument("--doors", default="", metavar="DOOR,...",
                      help="the doors drawn from, e.g. control_flow:cond,export:strict (default: every door)")
    fuzz.add_argument("--autograd-share", type=float, default=0.0, metavar="SHARE",
                      help="share of drawn programs given a hook, saved-tensor hooks or another way of asking for "
                           "gradients (generators.autograd) when the draw gave them none (default 0: the draw's own "
                           "rare share)")
    fuzz.add_argument("--sweep", choices=("auto", "on", "off"), default="auto",
                      help="first run every (op, spelling, dtype) of torch's OpInfo database the backend supports, "
                           "in batches of repeated blocks (campaigns.op_sweep); auto (default): for every backend but "
                           "aot_eager")
    fuzz.add_argument("--sweep-share", type=float, default=0.25, metavar="SHARE",
                      help="the part of the budget the sweep's batches go out in (default 0.25; a resumed campaign "
                           "goes on with the sweep where it stopped)")
    fuzz.add_argument("--sweep-ops", default="", metavar="OP,...",
                      help="sweep these OpInfo ops alone (e.g. add,nn.functional.relu,max.reduction_with_dim), "
                           "whatever the backend")
    fuzz.add_argument("--op-share", type=float, default=0.75, metavar="SHARE",
                      help="with the sweep: share of the search's worker time given to OpInfo batches of the cells "
                           "the sweep found failing or did not reach (default 0.75)")
    fuzz.add_argument("--inductor-share", type=float, default=0.05,
                      help="share of the workers' seconds that door runs compiled with inductor, whatever --backend "
                           "is, may take (default 0.05)")
    fuzz.add_argument("--coverage", action="store_true",
                      help="measure line and branch coverage of torch's deduplication code")
    fuzz.add_argument("--feedback", choices=("off", "edges", "steer"), default="off",
                      help="steer: keep programs that reach new branches of torch's capture stack (RUN/corpus), "
                           "mutate them, draw swarm batches, a bandit over what pays; edges: draw plainly and only "
                           "count the edges reached (an A/B's other side); off (default)")
    fuzz.add_argument("--trace-share", type=float, default=0.5,
                      help="with --feedback: share of programs whose capture is traced for arcs of torch's files "
                           "(every program gives the harness's own edges; default 0.5)")
    fuzz.add_argument("--watch", action="append", default=[], metavar="GLOB",
                      help="a torch file glob (relative to site-packages) whose arcs are feedback (repeatable; "
                           "default: Dynamo's guards, variables, output graph, side effects, the tracker, the pass, "
                           "graph utils, invoke_subgraph)")
    fuzz.add_argument("--corpus", action="append", default=[], type=Path, metavar="DIR",
                      help="another campaign's corpus folder (a shard's RUN/corpus) mutants may start from (repeatable)")
    fuzz.add_argument("--timeout", type=float, default=120.0, help="seconds per program before a worker counts as hung")
    fuzz.add_argument("--memory-mb", type=float, default=0.0,
                      help="resident memory per worker before it is killed (default: the memory allotted, by cgroup "
                           "limit or RAM, shared by the workers, 8192 at most)")
    fuzz.add_argument("--minimize-seconds", type=float, default=30.0, help="per distinct finding; 0: do not minimize")
    fuzz.add_argument("--device", default="cuda",
                      help="where the replay oracles (cudagraph, cudagraph_engaged) run (default cuda)")
    fuzz.add_argument("--no-verify", action="store_true", help="do not run each minimized repro.py to check it exits 1")
    fuzz.add_argument("--programs", type=int, default=0, help="stop once this many programs have run (default: no limit)")
    fuzz.add_argument("--batches", type=int, default=0,
                      help="stop after this many of the shard's batches of drawn programs: the same work in any "
                           "shard layout (N shards of k batches are one campaign of N*k; default: no limit)")

    report = sub.add_parser("report", help="compare, merge or promote campaign results")
    rsub = report.add_subparsers(dest="action", required=True)
    d = rsub.add_parser("diff", help="Markdown report of new, fixed and persisting findings from RUN_A to RUN_B")
    d.add_argument("run_a", type=Path)
    d.add_argument("run_b", type=Path)
    d.add_argument("--out", type=Path, default=None, help="also write the report here")
    m = rsub.add_parser("merge", help="combine shard outputs into one campaign folder")
    m.add_argument("runs", nargs="+", help="shard folders; with --watch a quoted glob (runs/nightly/shard-*) is "
                                          "looked at again each round")
    m.add_argument("--out", type=Path, required=True)
    m.add_argument("--watch", type=float, default=0.0, metavar="SECONDS",
                   help="rebuild the merged folder every SECONDS while shards append, until every shard of the "
                        "campaign has finished (or --until); safe while they write")
    m.add_argument("--until", default="", metavar="TIME", help="with --watch: stop watching at this time")
    p = rsub.add_parser("promote", help="make a finding a known issue (reports/known_issues/)")
    p.add_argument("finding", type=Path, help="a finding folder: RUN/findings/<signature>")
    p.add_argument("--id", required=True, help="KI-<number>")
    p.add_argument("--title", required=True)
    r = rsub.add_parser("repro", help="a known issue's standalone script, rendered from its issue.json and program.json")
    r.add_argument("issue", help="KI-NNN")
    r.add_argument("--out", type=Path, default=None, help="write the script here (default: print it)")
    k = rsub.add_parser("known-issues", help="the triage page: every recorded issue ranked by how often campaigns "
                                             "meet it and how much it masks, with its upstream status")
    k.add_argument("--runs", nargs="*", type=Path, default=[], metavar="RUN",
                   help="campaign folders to measure (default: the last measured ones, reports/known_issues/met.json)")
    k.add_argument("--record", action="store_true", help="keep the measure of --runs as the baseline's met.json")
    k.add_argument("--out", type=Path, default=Path("runs/known-issues"),
                   help="folder for known-issues.md and known-issues.html (default runs/known-issues)")
    u = rsub.add_parser("upstream", help="a PyTorch bug report (issue.md) and regression test for an issue or finding")
    u.add_argument("target", help="KI-NNN (a known issue; with --model the model issue), a recorded issue's folder, "
                                  "or a campaign finding's folder RUN/findings/<slug>")
    u.add_argument("--model", action="store_true", help="KI-NNN names the model issue (reports/model_issues)")
    u.add_argument("--out", type=Path, default=None,
                   help="folder for issue.md, test_<id>.py, minimal_repro.py, collect_env.txt, results.json "
                        "(default: runs/upstream/<id>; for a finding, its own folder)")
    u.add_argument("--no-ablation", action="store_true", help="run the strict repro once, not once per ablation row")
    u.add_argument("--fast", action="store_true", help="skip the ablation's inductor row (unless the issue is on inductor)")
    u.add_argument("--trace", action="store_true", help="also run the minimal repro under TORCH_TRACE=OUT/trace")
    u.add_argument("--torch", action="append", default=[], metavar="PYTHON_OR_VENV",
                   help="also run the repros and the regression test with this interpreter (repeatable)")
    u.add_argument("--no-run", action="store_true", help="render from the recorded data alone; run nothing")
    u.add_argument("--timeout", type=float, default=600.0, help="seconds per script before it counts as an error")

    check = sub.add_parser("check", help="one nn.Module (package.module:factory -> (model, inputs)) through the oracles")
    check.add_argument("factory", help="package.module:name or path/to/file.py:name, a callable returning (model, inputs)")
    check.add_argument("--backend", default="aot_eager")
    check.add_argument("--out", type=Path, default=Path("runs/check"))

    zoo = sub.add_parser("zoo", help="model factories compiled once each, every mode re-called and timed (a table)")
    zoo.add_argument("models", nargs="+", help="campaigns.zoo_models names (llama, t5, vit, ...) or factory specs")
    zoo.add_argument("--backend", nargs="+", default=["aot_eager"], help="one or more backends")
    zoo.add_argument("--json", type=Path, help="write the results here")
    zoo.add_argument("--first-call-only", action="store_true", help="no changed calls: compile and judge the first call")

    bench = sub.add_parser("bench", help="programs per second per oracle set, and overhead over plain torch.compile")
    if argv is None or "bench" in argv:  # its options name catalogues that import torch: only when asked for
        from campaigns import bench as bench_module

        bench_module.add_arguments(bench)

    mutants = sub.add_parser("mutants", help="faults planted in torch's own source, one per campaign: which are found")
    mutants.add_argument("--modules", default=None,
                         help="comma-separated torch modules to mutate (default: campaigns.torch_mutants.MODULES)")
    mutants.add_argument("-n", "--count", type=int, default=10, help="mutants to draw (default 10)")
    mutants.add_argument("--kinds", default=None,
                         help="comma-separated edits to draw (default: every kind of campaigns.torch_mutants.KINDS)")
    mutants.add_argument("--budget", type=float, default=60.0, help="seconds of campaign per mutant (default 60)")
    mutants.add_argument("--workers", type=int, default=2)
    mutants.add_argument("--seed", type=int, default=0, help="draws the mutants and seeds each campaign")
    mutants.add_argument("--reached", nargs="*", type=Path, default=[], metavar="RUN",
                         help="only sites on lines these campaigns' corpora reached (fuzz --feedback steer runs)")
    mutants.add_argument("--site", action="append", default=[], metavar="NAME",
                         help="run this mutant (a name from mutants.json, mutant__<module>__<line>__<col>__<kind><k>) "
                              "instead of drawing; repeatable")
    mutants.add_argument("--autograd-share", type=float, default=None,
                         help="each campaign's share of programs with an autograd feature (as fuzz's; for "
                              "torch.autograd.graph, which only those reach)")
    mutants.add_argument("--no-baseline", action="store_true",
                         help="skip the campaign without a mutant that tells torch's own new findings apart")
    mutants.add_argument("--out", type=Path, default=Path("runs/mutants"))

    stats = sub.add_parser("stats", help="generator report: feature counts, eager validity, region share")
    stats.add_argument("-n", type=int, default=2000, help="programs to draw")
    stats.add_argument("--seed", type=int, default=0)
    stats.add_argument("--jobs", type=int, default=2, help="worker processes for the eager and Dynamo runs")
    stats.add_argument("--no-run", action="store_true", help="count features only; run nothing")
    stats.add_argument("--json", type=Path, default=None, help="also write the summary here")
    stats.add_argument("--check", action="store_true", help="exit 1 unless every target is met")
    stats.add_argument("--ops", nargs="*", type=Path, default=None, metavar="RUN",
                       help="instead: the op x spelling x dtype table of these campaigns' sweeps, per backend (none: "
                            "the cells this torch's OpInfo database holds)")

    regress = sub.add_parser("regress", help="replay known issues and findings on two torches, compare per root cause")
    regress.add_argument("--torch", action="append", default=[], metavar="PYTHON_OR_VENV",
                         help="an interpreter or a venv folder (DIR/bin/python) with its own torch; give it twice: A, B")
    regress.add_argument("--campaign", type=Path, default=None, help="also replay this campaign folder's findings")
    regress.add_argument("--budget", type=float, default=120.0,
                         help="seconds of the seeded campaign run in each environment (default 120; 0: none)")
    regress.add_argument("--no-campaign", action="store_true", help="run no seeded campaign (same as --budget 0)")
    regress.add_argument("--seed", type=int, default=0, help="the seeded campaign's seed")
    regress.add_argument("--out", type=Path, default=Path("runs/regress"))
    regress.add_argument("--timeout", type=float, default=300.0, help="seconds per repro before it counts as an error")
    regress.add_argument("--jobs", type=int, default=2, help="repros run at a time in one environment (default 2)")
    return parser


class Progress:
    """One line rewritten in place on a terminal; a plain line every 10 s otherwise."""

    def __init__(self, stream=sys.stderr):
        self.stream, self.tty, self.last = stream, stream.isatty(), 0.0

    def __call__(self, line: str, final: bool) -> None:
        if self.tty:
            self.stream.write("\r\033[K" + line + ("\n" if final else ""))
            self.stream.flush()
        elif final or time.time() - self.last >= 10:
            self.last = time.time()
            print(line, file=self.stream, flush=True)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = _parser(argv).parse_args(argv)
    from harness.loader import own_program_dir

    own_program_dir()  # before any worker starts: they write the programs there, and it goes when this exits
    try:
        return COMMANDS[args.command](args)
    except (ValueError, OSError) as e:  # bad input: one line, no traceback
        print(f"error: {e}", file=sys.stderr)
        return 2


def _fuzz(args) -> int:
    from campaigns import scheduler
    from campaigns.budget import NotStarted, plan

    if args.workers < 0:
        raise ValueError("--workers must be positive (0: sized to the CPUs and memory allotted)")
    shard = scheduler.shard(args.shard) if isinstance(args.shard, str) else args.shard
    until = scheduler.until(args.until) if args.until else None
    out = Path(str(args.out).replace("{shard}", str(shard[0])))
    claims = args.claims or (out.parent / "claims" if shard[1] > 1 else None)
    try:  # past --until, or a requeue after the campaign's end: one line before torch is imported
        plan(out, args.budget, args.programs, args.resume, until)
    except NotStarted as e:
        print(f"shard {shard[0]}/{shard[1]} ({out}): {e}", file=sys.stderr)
        return 0

    from campaigns.worker_start import start_worker_server
    from harness.warm import stop_forkserver

    start_worker_server(args.coverage)  # it imports torch while this process does (harness.warm)
    try:
        return _campaign(args, out, until, claims, shard)
    except BaseException:
        stop_forkserver()
        raise


def _campaign(args, out: Path, until, claims, shard) -> int:
    from campaigns.campaign import Options, run
    from campaigns.budget import NotStarted
    from campaigns.pool import PoolError

    # torch's notice that one subgraph got several backward graphs: expected, not a finding.
    warnings.filterwarnings("ignore", message="invoke_subgraph traced multiple backward graphs")
    options = Options(
        backend=args.backend, budget=args.budget, seed=args.seed, out=out, until=until, claims=claims,
        oracles=tuple(o for o in args.oracles.split(",") if o), variants=args.variants,
        workers=args.workers, shard=shard, resume=args.resume, config=tuple(args.config),
        lint_share=args.lint_share, door_share=args.door_share, autograd_share=args.autograd_share,
        sweep=args.sweep, sweep_share=args.sweep_share, op_share=args.op_share,
        sweep_ops=tuple(o for o in args.sweep_ops.split(",") if o),
        doors=tuple(d for d in args.doors.split(",") if d),
        inductor_share=args.inductor_share, coverage=args.coverage, feedback=args.feedback, watch=tuple(args.watch),
        corpus=tuple(args.corpus), trace_share=args.trace_share, timeout=args.timeout, memory_mb=args.memory_mb,
        minimize_seconds=args.minimize_seconds, verify_repros=not args.no_verify, device=args.device,
        programs=args.programs, batches=args.batches, mode=args.mode,
    )
    try:
        summary = run(options, Progress())
    except PoolError as e:
        print(f"error: {str(e).splitlines()[0]}", file=sys.stderr)
        return 2
    except NotStarted as e:
        print(e, file=sys.stderr)
        return 0
    _print_summary(summary, out)
    return 0


def _print_summary(summary: dict, out: Path) -> None:
    from reports.schema import confirmed, root_cause_line

    print(f"{summary['programs']} programs on {summary['backend']}, torch {summary['torch']}. {root_cause_line(summary)}")
    for f in summary["findings"]:
        label = (f["known_issue"] or "NEW") if confirmed(f) else "UNCONF"
        print(f"  {f['count']:5d}x {label:7s} {f['signature']}")
    for path, c in summary.get("coverage", {}).items():
        print(f"  coverage {path}: {c['lines']}% lines, {c['branches']}% branches")
    if summary.get("aborted"):
        print(f"campaign stopped early: {summary['aborted']}")
    print(f"report: {out / 'report.md'} (also report.html, junit.xml, summary.json)")


def _report(args) -> int:
    from reports import regression

    if args.action == "diff":
        text, counts = regression.diff(args.run_a, args.run_b)
        if args.out:
            args.out.write_text(text)
        print(text)
        return 0
    if args.action == "merge":
        from campaigns import merge, scheduler

        if args.until and not args.watch:
            raise ValueError("--until needs --watch")
        if args.watch:
            until = scheduler.until(args.until) if args.until else None
            summary = merge.watch(args.runs, args.out, args.watch, until, Progress())
        else:
            summary = merge.merge([Path(r) for r in args.runs], args.out)
        _print_summary(summary, args.out)
        return 0
    if args.action == "repro":
        from reports.known_issues import by_id

        issue = by_id(args.issue)
        if issue is None:
            raise ValueError(f"no known issue {args.issue!r} (expected KI-<number> of reports/known_issues/)")
        if args.out is None:
            print(issue.render(), end="")
        else:
            args.out.write_text(issue.render())
            print(f"wrote {args.out}; run it: python {args.out} (exit 1: reproduced, 0: not)")
        return 0
    if args.action == "known-issues":
        from reports import known_issues_page as page

        md, html = page.write(args.out, page.measured(args.runs, args.record))
        print(f"wrote {md} and {html}")
        return 0
    if args.action == "upstream":
        from campaigns import upstream

        return upstream.main(args)
    folder = regression.promote(args.finding, args.id, args.title)
    print(f"recorded {args.id} in {folder}; check it: pytest suites/test_known_issues.py -k {args.id}")
    return 0


def _bench(args) -> int:
    from campaigns import bench

    return bench.main(args)


def _stats(args) -> int:
    from campaigns import stats as generator_stats

    if args.ops is not None:
        return generator_stats.op_table(args.ops)
    if args.n < 1 or args.jobs < 1:
        raise ValueError("-n and --jobs must be positive")
    return generator_stats.run(args.n, args.seed, args.jobs, not args.no_run, args.json, args.check)


def _regress(args) -> int:
    from campaigns import regress

    options = regress.Options(
        torches=tuple(args.torch), out=args.out, campaign=args.campaign,
        budget=0.0 if args.no_campaign else args.budget, seed=args.seed, timeout=args.timeout, jobs=args.jobs,
    )
    report = regress.run(options, lambda line: print(line, file=sys.stderr, flush=True))
    envs = report["environments"]
    print(f"A: torch {envs['A']['torch']} ({envs['A']['python']})")
    print(f"B: torch {envs['B']['torch']} ({envs['B']['python']})")
    print(report["top_line"])
    for e in report["root_causes"]:
        first = e["repros"][0]
        print(f"  {e['verdict']:10s} {e['root_cause'][:70]:70s} A {first['A']['status']:17s} B {first['B']['status']}")
    print(f"report: {args.out / 'regress.md'} (also regress.html, regress.json)")
    return 0


def _check(args) -> int:
    from campaigns import check

    return check.main(args)


def _mutants(args) -> int:
    from campaigns import torch_mutants

    if args.count < 1 or args.budget <= 0 or args.workers < 1:
        raise ValueError("-n, --budget and --workers must be positive")
    if args.autograd_share is not None and not 0 <= args.autograd_share <= 1:
        raise ValueError("--autograd-share must be between 0 and 1")
    modules = tuple(m for m in (args.modules or "").split(",") if m) or torch_mutants.MODULES
    kinds = tuple(k for k in (args.kinds or "").split(",") if k) or tuple(torch_mutants.KINDS)
    unknown = [k for k in kinds if k not in torch_mutants.KINDS]
    if unknown:
        raise ValueError(f"--kinds: unknown {', '.join(unknown)} (one of {', '.join(torch_mutants.KINDS)})")
    for run in args.reached:
        if not (run / "corpus").is_dir():
            raise ValueError(f"--reached {run}: no corpus/ folder (a campaign run with --feedback steer)")
    results = torch_mutants.run(modules, args.count, args.seed, args.budget, args.workers, args.out, args.reached,
                                lambda line: print(line, file=sys.stderr, flush=True), tuple(args.site),
                                not args.no_baseline,
                                None if args.autograd_share is None else {"autograd_share": args.autograd_share},
                                kinds)
    print(torch_mutants.table(results))
    print(f"report: {args.out / 'mutants.md'} (also mutants.json)")
    return 0


def _zoo(args) -> int:
    from campaigns import zoo

    return zoo.main(args)


COMMANDS = {"fuzz": _fuzz, "report": _report, "bench": _bench, "stats": _stats, "regress": _regress, "check": _check,
            "zoo": _zoo, "mutants": _mutants}

if __name__ == "__main__":
    sys.exit(main())
