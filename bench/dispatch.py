"""Dispatch throughput: pilot run vs xargs on the same 2,000 /bin/true commands.

    python bench/dispatch.py [--tasks 2000] [--repeat 5]

Whole process for both, MPI start-up included: ``mpiexec -n 3 pilot run`` (1 master
+ 2 workers) against ``xargs -P 2``, and ``-n 5`` against ``-P 4``. Prints the best
of --repeat runs of each and pilot's throughput as a ratio of xargs' (target ≥ 0.9),
and the median of the ratios of back-to-back pairs (each pilot run against the xargs
run right after it), which a slow spell of a shared machine moves less than the ratio
of two minimums taken at different times.
Beside it, what the ratio is made of: pilot's fixed cost (the same command on a DAG
of one task: mpiexec, interpreters, imports, MPI_Init, the end of the run) and its
cost per task beyond that, against xargs' cost per task. And the floor under that fixed
cost: an mpi4py program that does nothing, started the same way (same launcher, ranks
and MPI start settings), which any MPI master/worker pays on this machine; with it, the
ratio pilot would reach at its measured cost per task if its own start and end cost
nothing.
Run it with the Python of a regular install (``pip install .``): an editable
install adds an import hook that costs every rank a few milliseconds at start.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))

from common import mpiexec, pilot, timed, write_dag

from pilot.runtime.mpistart import MPI_START_ENV, ONE_HOST_START_ENV


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--extra", nargs="*", default=[], help="extra pilot run options (e.g. --jobstate-log)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        dag = write_dag(os.path.join(tmp, "bench.dag"), (f"TASK t{i} /bin/true\n" for i in range(args.tasks)))
        one = write_dag(os.path.join(tmp, "one.dag"), ["TASK t0 /bin/true\n"])
        lines = "".join("/bin/true\n" for _ in range(args.tasks)).encode()
        # What pilot run sets for MPI's start, unless already set: every rank runs here.
        bare_env = {**MPI_START_ENV, **ONE_HOST_START_ENV, **os.environ}
        for ranks in (3, 5):
            workers = ranks - 1
            run = pilot(ranks, "-s", "-q", *args.extra, dag)
            fixed = pilot(ranks, "-s", "-q", *args.extra, one)
            bare = [mpiexec(), "-n", str(ranks), sys.executable, "-c", "from mpi4py import MPI"]
            xargs = ["xargs", "-P", str(workers), "-I{}", "/bin/true"]
            p_times, f_times, b_times, x_times = [], [], [], []
            for _ in range(args.repeat):  # interleave so all see the same machine state
                p_times.append(timed(run, cwd=tmp))
                x_times.append(timed(xargs, lines))  # right after: the pair shares the machine's state
                f_times.append(timed(fixed, cwd=tmp))
                b_times.append(timed(bare, cwd=tmp, env=bare_env))
            p, f, b, x = min(p_times), min(f_times), min(b_times), min(x_times)
            per_task, x_task = (p - f) / (args.tasks - 1), x / args.tasks
            paired = statistics.median(q / r for r, q in zip(p_times, x_times))
            print(
                f"{args.tasks} x /bin/true, {workers} workers: pilot -n {ranks} {p:.2f} s ({args.tasks / p:.0f} tasks/s), "
                f"xargs -P {workers} {x:.2f} s ({args.tasks / x:.0f} tasks/s): pilot/xargs throughput = {x / p:.2f} "
                f"(best runs); {paired:.2f} (median of back-to-back pairs)"
            )
            print(
                f"  made of: pilot's fixed cost {f:.2f} s (a one-task DAG), then {1e3 * per_task:.3f} ms per task "
                f"against xargs' {1e3 * x_task:.3f} ms: per-task throughput ratio {x_task / per_task:.2f}"
            )
            print(
                f"  floor: an mpi4py program doing nothing on {ranks} ranks takes {b:.2f} s here, so pilot's own start "
                f"and end cost {f - b:.2f} s; were they free, pilot/xargs would be {x / (b + args.tasks * per_task):.2f}"
            )


if __name__ == "__main__":
    main()
