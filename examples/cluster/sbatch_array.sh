#!/usr/bin/env bash
# A nightly campaign as a Slurm job array: one shard per array task, requeued
# on preemption with the same command line, which goes on where it stopped.
#
#   sbatch --array=0-7%4 --export=ALL,UNTIL="$(date -d 'tomorrow 06:00' --iso-8601=seconds)" \
#       examples/cluster/sbatch_array.sh
#
# The shard index and count come from SLURM_ARRAY_TASK_ID and
# SLURM_ARRAY_TASK_COUNT (--shard auto); workers and their memory from the
# CPUs and memory this task was given (affinity, cgroup); one GPU per worker
# where the task sees several. The shards share RUNS/claims, so one shard
# minimizes each new root cause; `report merge` (below, or --watch while the
# array runs) folds them into RUNS/merged.
#SBATCH --job-name=dedup-fuzz
#SBATCH --cpus-per-task=8
#SBATCH --mem=32G
#SBATCH --time=04:00:00
#SBATCH --requeue
#SBATCH --signal=B:TERM@120
#SBATCH --output=slurm-dedup-fuzz-%A_%a.out
set -euo pipefail
cd "${SLURM_SUBMIT_DIR:-.}"
RUNS="${RUNS:-runs/nightly}"
PYTHON="${PYTHON:-.venv/bin/python}"
mkdir -p "$RUNS"
# --signal=B:TERM sends SIGTERM to this script 120 s before the time limit; it is
# passed on to the campaign, which stops cleanly, and the job is requeued.
"$PYTHON" -m harness fuzz --shard auto --resume auto --out "$RUNS/shard-{shard}" \
    --budget "${BUDGET:-14400}" ${UNTIL:+--until "$UNTIL"} --backend "${BACKEND:-aot_eager}" \
    --seed "${SEED:-0}" --feedback steer &
campaign=$!
trap 'kill -TERM "$campaign" 2>/dev/null; wait "$campaign"; scontrol requeue "$SLURM_JOB_ID" 2>/dev/null || true' TERM
wait "$campaign"
# Any task may merge; the last one to finish leaves the complete report.
"$PYTHON" -m harness report merge "$RUNS"/shard-* --out "$RUNS/merged" || true
