"""A sharded campaign as a job array through submitit: a Slurm array where
Slurm is, local processes where it is not (how its test runs).

    python examples/cluster/submitit_launcher.py --shards 4 --out runs/nightly -- --budget 3600 --backend inductor

Each job runs ``python -m harness fuzz --shard auto --resume auto`` with the
arguments after ``--``; the shard index reaches it through
DEDUP_HARNESS_SHARD_INDEX/COUNT (equal to SLURM_ARRAY_TASK_ID/COUNT on
Slurm, which the harness checks). A preempted or timed-out job stops its
campaign with SIGTERM (its results are on disk, its reports written) and is
requeued with the same call, which goes on where it stopped. Meanwhile this
launcher merges the shards into OUT/merged as they write, so a finding is
visible while the array still runs. A dead worker is not retried here: the
harness's supervisor on each node turns it into a finding.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import submitit


class Shard:
    """One job of the array: the campaign as a child process, so a
    preemption signal stops it cleanly before the job is requeued."""

    def __init__(self, count: int, out: Path, argv: list[str], python: str = sys.executable):
        self.count, self.out, self.argv, self.python = count, out, argv, python
        self.child = None

    def command(self) -> list[str]:
        return [self.python, "-m", "harness", "fuzz", "--shard", "auto", "--resume", "auto",
                "--out", str(self.out / "shard-{shard}"), *self.argv]

    def __call__(self, index: int) -> int:
        env = {**os.environ, "DEDUP_HARNESS_SHARD_INDEX": str(index), "DEDUP_HARNESS_SHARD_COUNT": str(self.count)}
        self.child = subprocess.Popen(self.command(), env=env)
        # polled, not waited on: a blocking wait holds the lock that checkpoint's wait needs when the
        # preemption signal interrupts it (it would sit out its whole timeout)
        while (code := self.child.poll()) is None:
            time.sleep(1)
        if code != 0:
            raise RuntimeError(f"shard {index}/{self.count}: the campaign exited {code}")
        return code

    def checkpoint(self, index: int) -> submitit.helpers.DelayedSubmission:
        """Preempted or out of time: stop the campaign, requeue the same call."""
        if self.child is not None and self.child.poll() is None:
            self.child.terminate()
            try:
                self.child.wait(120)
            except subprocess.TimeoutExpired:
                self.child.kill()
        return submitit.helpers.DelayedSubmission(self, index)

    def __getstate__(self) -> dict:
        return {**self.__dict__, "child": None}


def launch(shards: int, out: Path, argv: list[str], cluster: str | None = None, parallel: int = 0,
           timeout_min: int = 24 * 60, slurm: dict | None = None) -> tuple[submitit.Executor, list]:
    executor = submitit.AutoExecutor(folder=out / "submitit", cluster=cluster)
    executor.update_parameters(timeout_min=timeout_min, **({"slurm_array_parallelism": parallel} if parallel else {}),
                               **(slurm or {}))
    jobs = executor.map_array(Shard(shards, out, argv), range(shards))
    return executor, jobs


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ours, _, theirs = (argv[:argv.index("--")], None, argv[argv.index("--") + 1:]) if "--" in argv else (argv, None, [])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shards", type=int, required=True)
    parser.add_argument("--out", type=Path, default=Path("runs/cluster"))
    parser.add_argument("--cluster", default=None, help="slurm, local or debug (default: slurm where sbatch is)")
    parser.add_argument("--parallel", type=int, default=0, help="jobs of the array running at once (Slurm)")
    parser.add_argument("--timeout-min", type=int, default=24 * 60)
    parser.add_argument("--partition", default=None, help="Slurm partition")
    parser.add_argument("--cpus-per-task", type=int, default=0)
    parser.add_argument("--mem-gb", type=int, default=0)
    parser.add_argument("--watch", type=float, default=30.0, help="seconds between merges while the shards run")
    args = parser.parse_args(ours)
    slurm = {k: v for k, v in (("slurm_partition", args.partition), ("cpus_per_task", args.cpus_per_task),
                               ("mem_gb", args.mem_gb)) if v}
    _, jobs = launch(args.shards, args.out, theirs, args.cluster, args.parallel, args.timeout_min, slurm)
    print(f"submitted {len(jobs)} shard(s): {', '.join(j.job_id for j in jobs)}; merging into {args.out / 'merged'}",
          flush=True)
    merge = [sys.executable, "-m", "harness", "report", "merge", str(args.out / "shard-*"), "--out",
             str(args.out / "merged")]
    watcher = subprocess.Popen([*merge, "--watch", str(args.watch)], stdout=subprocess.DEVNULL)
    failed = []
    for job in jobs:
        try:
            job.result()  # waits; a requeued job is waited for through its requeues
        except Exception as e:  # a shard whose campaign could not run: say so, merge the rest
            print(f"shard job {job.job_id} failed: {str(e).strip().splitlines()[-1]}", file=sys.stderr)
            failed.append(job.job_id)
    watcher.terminate()
    watcher.wait()
    done = subprocess.run(merge)
    return 1 if failed or done.returncode else 0


if __name__ == "__main__":
    sys.exit(main())
