"""Wall-time-aware dispatch: work killed at the limit and time to completion, against FIFO dispatch.

    python bench/walltime.py [--limit 0.1] [--workers 3] [--repeat 1]

A DAG of `sleep` tasks of mixed length (1 to 5 s, 40 CPU-seconds, then one
1 s task after all of them), each with its exact runtime on a `#pilot runtime=`
line, runs under `mpiexec -n workers+1 pilot run --max-wall-time LIMIT`; each
run that ends short of the DAG is resubmitted the way `pilot submit` does
(the same command again, resuming from the rescue log), until the DAG is done.
Measured for both modes in the same run, interleaved:

- runtime-aware (the default): longest task first among equal priorities, and
  no task started that cannot finish before the limit;
- FIFO (`--ignore-runtimes`): DAG order, tasks started whatever the time left.

Printed per mode: the runs it took, CPU-seconds of work killed at the limits
(from the killed tasks' `[cluster-task]` records), and the makespan to
completion (sum of the runs' wall times, MPI start-up included). Target: no
killed work with exact runtimes, and a shorter makespan than FIFO.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))

from common import pilot, write_dag

from pilot.contracts.taskrecord import read_task_record

# Runtimes in DAG order: short and long tasks mixed, as a level of a real workflow.
RUNTIMES = [1, 3, 2, 5, 1, 2, 4, 1, 3, 2, 5, 1, 2, 4, 1, 3]


def dag_lines(runtimes: list[int]) -> list[str]:
    lines = []
    for i, r in enumerate(runtimes):
        lines += [f"#pilot runtime={r}\n", f"TASK t{i} /bin/sleep {r}\n"]
    lines += ["#pilot runtime=1\n", "TASK join /bin/sleep 1\n"]
    lines += [f"EDGE t{i} join\n" for i in range(len(runtimes))]
    return lines


def to_completion(dag: str, workers: int, limit: float, extra: list[str]) -> tuple[int, float, float]:
    """(runs, CPU-seconds killed, seconds to completion) for one mode, from a fresh rescue log."""
    for suffix in (".rescue", ".result"):
        if os.path.exists(dag + suffix):
            os.unlink(dag + suffix)
    runs, killed, total = 0, 0.0, 0.0
    while True:
        runs += 1
        start = time.perf_counter()
        out = subprocess.run(
            pilot(workers + 1, "-q", "--no-resource-log", "--max-wall-time", str(limit), *extra, dag),
            capture_output=True,
            text=True,
        ).stdout
        total += time.perf_counter() - start
        killed += sum(rec.duration for rec in filter(None, map(read_task_record, out.splitlines())) if rec.status < 0)
        if '[cluster-summary stat="ok"' in out:
            return runs, killed, total
        if runs >= 10:
            raise SystemExit(f"{dag}: not done after {runs} runs of {extra or 'the default mode'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--limit", type=float, default=0.1, help="--max-wall-time of each run, in minutes (default 0.1: 6 s)"
    )
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    modes = {"runtime-aware": [], "FIFO (--ignore-runtimes)": ["--ignore-runtimes"]}
    results: dict[str, list[tuple[int, float, float]]] = {m: [] for m in modes}
    tmp = tempfile.mkdtemp(prefix="pilot-bench-walltime-")
    try:
        dag = write_dag(os.path.join(tmp, "mixed.dag"), dag_lines(RUNTIMES))
        for _ in range(args.repeat):  # interleaved: both see the same machine state
            for mode, extra in modes.items():
                results[mode].append(to_completion(dag, args.workers, args.limit, extra))
    finally:
        shutil.rmtree(tmp)
    work = sum(RUNTIMES) + 1
    print(
        f"{len(RUNTIMES) + 1} sleep tasks, {work} CPU-s of work, {args.workers} workers, --max-wall-time {args.limit:g} "
        f"({args.limit * 60:g} s) per run, resubmitted until done; medians of {args.repeat} run(s)"
    )
    span = {}
    for mode, rows in results.items():
        runs = statistics.median(r[0] for r in rows)
        killed = statistics.median(r[1] for r in rows)
        span[mode] = statistics.median(r[2] for r in rows)
        print(
            f"  {mode:26s} runs {runs:g}, killed work {killed:6.2f} CPU-s, makespan to completion {span[mode]:6.2f} s"
        )
    aware, fifo = span["runtime-aware"], span["FIFO (--ignore-runtimes)"]
    print(f"makespan runtime-aware / FIFO = {aware / fifo:.2f} (target < 1; killed work target 0)")


if __name__ == "__main__":
    main()
