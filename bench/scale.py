"""Master-side scale: parse 1M tasks + 1M edges, replay 1M DONE records, and per-task
scheduling cost from 10 to 10,000 simulated workers (InProcTransport, no MPI).

    python bench/scale.py [--tasks 1000000]

Targets: parse < 10 s, replay < 10 s, scheduling cost per task flat.
Each figure is also printed as a ratio against a baseline measured in the same run.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import logging
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from pilot.contracts.rescue import RescueLog, read_rescue
from pilot.dag import read_dag
from pilot.runtime.master import Master
from pilot.runtime.options import RunOptions
from pilot.runtime.simulate import SimCluster, SimHost


def write_dag(path: str, n: int) -> None:
    with open(path, "w") as fh:
        for i in range(n):
            fh.write(f"TASK t{i} -m 10 /bin/echo 'task {i}' x\n")
        # n edges: a chain of fan-outs, each task i>0 gets one parent
        for i in range(1, n):
            fh.write(f"EDGE t{(i - 1) // 2} t{i}\n")
        fh.write(f"EDGE t0 t{n - 1}\n")


def baseline_read(path: str) -> float:
    """Plain split of every line: the floor any parser pays."""
    start = time.perf_counter()
    with open(path) as fh:
        for line in fh:
            line.split()
    return time.perf_counter() - start


def schedule(workers: int, tasks: int, tmp: str) -> float:
    """Marginal master cost per task: runs of ``tasks`` and ``2 * tasks`` tasks, differenced,
    so registering and stopping the workers does not count."""
    return (_run_sim(workers, 2 * tasks, tmp) - _run_sim(workers, tasks, tmp)) / tasks


def _run_sim(workers: int, tasks: int, tmp: str) -> float:
    path = os.path.join(tmp, f"sched{workers}-{tasks}.dag")
    with open(path, "w") as fh:
        fh.writelines(f"TASK t{i} /bin/true\n" for i in range(tasks))
    hosts = [SimHost(f"h{h}", cpus=16, memory=64000, slots=16) for h in range((workers + 15) // 16)]
    extra = len(hosts) * 16 - workers
    if extra:
        hosts[-1].slots -= extra
    cluster = SimCluster(hosts, duration=lambda name: 1.0)
    opts = RunOptions(dag=path, resource_log=False, nolock=True)
    master = Master(opts, cluster.transport)
    start = time.perf_counter()
    with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull):
        master.run()
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=1_000_000)
    ap.add_argument("--sched-tasks", type=int, default=30_000)
    args = ap.parse_args()
    logging.disable(logging.CRITICAL)
    with tempfile.TemporaryDirectory() as tmp:
        dag_path = os.path.join(tmp, "big.dag")
        write_dag(dag_path, args.tasks)
        base = baseline_read(dag_path)
        start = time.perf_counter()
        dag = read_dag(dag_path)
        parse = time.perf_counter() - start
        print(
            f"parse: {len(dag)} tasks, {sum(len(t.children) for t in dag)} edges in {parse:.2f} s "
            f"(target < 10 s; {parse / base:.1f}x a bare line split of the file, {base:.2f} s)"
        )

        rescue_path = os.path.join(tmp, "big.dag.rescue")
        with open(rescue_path, "w") as fh:
            fh.writelines(f"DONE t{i}\n" for i in range(args.tasks))
        start = time.perf_counter()
        done = read_rescue(rescue_path, dag.tasks)
        log = RescueLog(rescue_path, sorted(done))
        log.close()
        replay = time.perf_counter() - start
        base = baseline_read(rescue_path)
        print(
            f"rescue replay: {len(done)} DONE records read and rewritten in {replay:.2f} s "
            f"(target < 10 s; {replay / base:.1f}x a bare line split, {base:.2f} s)"
        )
        del dag, done
        gc.collect()  # the million-task DAG is cyclic garbage: gone before the timings below

        costs = {}
        schedule(10, args.sched_tasks // 10, tmp)  # warm-up: the first run pays for growing the heap
        for workers in (10, 100, 1000, 10_000):
            costs[workers] = min(schedule(workers, args.sched_tasks, tmp) for _ in range(2))
        base = costs[10]
        for workers, cost in costs.items():
            print(
                f"scheduling: {workers:>6} workers: {cost * 1e6:6.1f} us/task ({cost / base:.2f}x the 10-worker cost)"
            )


if __name__ == "__main__":
    main()
