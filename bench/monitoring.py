"""Cost of monitoring: the same 2,000-task DAG with --jobstate-log --monitord-hack
--per-task-stdio against none of them, in one run (target ≤ 1.15x the time).

    python bench/monitoring.py [--tasks 2000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))

from common import pilot, timed, write_dag  # noqa: E402

FLAGS = ["--jobstate-log", "--monitord-hack", "--per-task-stdio"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        lines = [f"TASK t{i} /bin/true\n" for i in range(args.tasks)]
        plain, monitored = [], []
        for rep in range(args.repeat):
            # A fresh directory per run: deleting thousands of files just before
            # (discard on ext4) would slow the next run's file creation.
            run_dir = os.path.join(tmp, f"run{rep}")
            os.mkdir(run_dir)
            dag = write_dag(os.path.join(run_dir, "bench.dag"), lines)
            plain.append(timed(pilot(3, "-s", "-q", dag), cwd=run_dir))
            monitored.append(timed(pilot(3, "-s", "-q", *FLAGS, dag), cwd=run_dir))
        p, m = min(plain), min(monitored)
        print(f"{args.tasks} x /bin/true, 2 workers: no monitoring {p:.2f} s, {' '.join(FLAGS)} {m:.2f} s: "
              f"monitored/plain time = {m / p:.2f} (target <= 1.15)")


if __name__ == "__main__":
    main()
