"""The master's own cost: rank 0's CPU time and peak memory per task, and its cost per task at scale.

    python bench/master.py [--tasks 2000 20000] [--repeat 3] [--warm 200] [--sim-tasks 1000000] [--skip-mpi | --skip-sim]
    PMC=/path/to/pegasus-mpi-cluster python bench/master.py

1. Under MPI: ``mpiexec -n 3 pilot run`` (1 master + 2 workers) on N x ``/bin/true``
   and on a one-task DAG, interleaved, rank 0 alone measured (CPU seconds and peak RSS,
   the kernel's VmHWM, from wait4 on rank 0's process). Per task = (figure at N - figure
   of the one-task DAG) / (N - 1): what one more task costs the master beyond its start.
   Targets: CPU <= 70 us and memory <= 0.43 KB a task (pegasus-mpi-cluster's figure).
   Where env PMC names a pegasus-mpi-cluster binary, the same figures for it, measured in
   the same run, and pilot's as a ratio of PMC's. The memory per task includes what MPI
   itself touches as messages flow, which a one-task run never reaches: of MPICH's
   shared-memory queues (MPIR_CVAR_CH4_SHM_POSIX_IQUEUE_*, 64 cells of 8 KiB a rank),
   about 0.75 MB here, some 1.5 times one rank's 64 x 8 KiB, as much with 4 workers as
   with 2, all of it within the first hundred tasks. It weighs on 2,000 tasks (about
   0.38 KB a task), hardly on 20,000, and as much on PMC: under the same MPI, PMC too
   is above 0.43 KB a task at 2,000. So each figure is also given beyond a DAG of
   --warm tasks, by which MPI's queues are in use: what a task costs beyond MPI's start.
2. Simulated (pilot.runtime.simulate: the real master, simulated workers, no MPI):
   the master's cost per task with 100 and with 100,000 workers on --sim-tasks tasks of
   1 s (virtual), each again less a run of one task on as many workers (registration,
   host setup and shutdown), and less the time spent in the simulated workers (timed
   around each of their calls); target: at 100,000 workers within 1.2x its cost at 100.
Best of --repeat runs of each.

PMC for it is built against the MPI that pilot's mpi4py uses (here the venv's MPICH),
so that both pay the same MPI; in a clone of https://github.com/pegasus-isi/pegasus:

    cd packages/pegasus-mpi-cluster
    echo '#define PEGASUS_VERSION "src"' > version.h   # else made by Pegasus' release tools
    make CXX=/path/to/venv/bin/mpicxx pegasus-mpi-cluster
    mpiexec -n 3 ./pegasus-mpi-cluster some.dag         # check that it runs

That is how Pegasus builds it: -g, no -O. With CXXFLAGS="-O2 -g -Wall -ansi -DLINUX"
its CPU per task was 25-28 us here against 29-44 us, its memory the same.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from common import mpiexec, write_dag

MEMORY_TARGET_KB = 0.43
CPU_TARGET_US = 70.0
SIM_TARGET = 1.2


def rank0(argv: list[str]) -> int:
    """``--rank0 OUT -- CMD...``: run CMD as this rank (it inherits the launcher's descriptors) and write its
    user+system CPU seconds and peak RSS in KB to OUT."""
    out, cmd = argv[0], argv[2:]
    pid = os.posix_spawn(cmd[0], cmd, os.environ)
    _, status, usage = os.wait4(pid, 0)
    with open(out, "w") as fh:
        fh.write(f"{usage.ru_utime + usage.ru_stime} {usage.ru_maxrss}\n")
    return os.waitstatus_to_exitcode(status)


def measure(program: list[str], dag: str, tmp: str) -> tuple[float, int]:
    """(CPU seconds, peak RSS KB) of rank 0 of ``program DAG`` on 1 master + 2 workers."""
    import subprocess  # noqa: PLC0415 - the --rank0 wrapper must start light

    stats = os.path.join(tmp, "rank0.stats")
    wrapper = [sys.executable, os.path.abspath(__file__), "--rank0", stats, "--"]
    cmd = [mpiexec(), "-n", "1", *wrapper, *program, dag, ":", "-n", "2", *program, dag]
    subprocess.run(cmd, cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    with open(stats) as fh:
        cpu, rss = fh.read().split()
    return float(cpu), int(rss)


def mpi_part(sizes: list[int], repeat: int, tmp: str, warm: int) -> None:
    programs = {"pilot": [sys.executable, "-m", "pilot", "run", "-s", "-q"]}
    if os.environ.get("PMC"):
        programs["PMC"] = [os.environ["PMC"], "-s", "-q"]
    dags = {
        n: write_dag(os.path.join(tmp, f"true{n}.dag"), (f"TASK t{i} /bin/true\n" for i in range(n)))
        for n in sorted({1, warm, *sizes})
    }
    best: dict[tuple[str, int], tuple[float, int]] = {}
    for _ in range(repeat):  # interleaved: every program and size sees the same machine
        for name, program in programs.items():
            for n, dag in dags.items():
                for stale in os.listdir(tmp):  # rescue logs and stdio files of the last run
                    if not stale.endswith(".dag"):
                        os.unlink(os.path.join(tmp, stale))
                cpu, rss = measure(program, dag, tmp)
                old = best.get((name, n), (cpu, rss))
                best[(name, n)] = (min(cpu, old[0]), min(rss, old[1]))
    per_task: dict[tuple[str, int], tuple[float, float]] = {}
    for name in programs:
        cpu1, rss1 = best[(name, 1)]
        print(f"{name}, one-task DAG: rank 0 {cpu1 * 1e3:.0f} ms CPU, peak RSS {rss1 / 1024:.1f} MB")
        for n in sizes:
            cpu, rss = best[(name, n)]
            us, kb = (cpu - cpu1) / (n - 1) * 1e6, (rss - rss1) / (n - 1)
            per_task[(name, n)] = (us, kb)
            print(
                f"{name}, {n} x /bin/true: rank 0 {cpu:.2f} s CPU, peak RSS {rss / 1024:.1f} MB: per task beyond the "
                f"one-task DAG {us:.1f} us CPU ({us / CPU_TARGET_US:.2f}x the {CPU_TARGET_US:g} us target), "
                f"{kb:.3f} KB ({kb / MEMORY_TARGET_KB:.2f}x the {MEMORY_TARGET_KB} KB target); "
                f"start {rss1 / 1024:.1f} MB"
            )
            if warm < n:
                cpuw, rssw = best[(name, warm)]
                print(
                    f"  beyond a DAG of {warm} tasks instead (MPI's queues in use): "
                    f"{(cpu - cpuw) / (n - warm) * 1e6:.1f} us CPU, {(rss - rssw) / (n - warm):.3f} KB a task"
                )
    if "PMC" in programs:
        for n in sizes:
            (us, kb), (pus, pkb) = per_task[("pilot", n)], per_task[("PMC", n)]
            print(
                f"pilot/PMC at {n} tasks: CPU per task {us / pus:.2f}x, memory per task {kb / pkb:.2f}x, "
                f"start {best[('pilot', 1)][1] / best[('PMC', 1)][1]:.2f}x"
            )


def sim_run(workers: int, tasks: int, tmp: str) -> tuple[float, float]:
    """(whole run, the master's part) in seconds: the real master running ``tasks`` tasks of 1 virtual second
    on ``workers`` simulated workers. The master's part leaves out the time spent in the simulated workers
    (their replies, the virtual clock's queue of task ends), which grows with their number whatever the master does."""
    from pilot.runtime.master import Master  # noqa: PLC0415 - loaded only for the simulated part
    from pilot.runtime.options import RunOptions  # noqa: PLC0415 - loaded only for the simulated part
    from pilot.runtime.simulate import SimCluster, SimHost  # noqa: PLC0415 - loaded only for the simulated part

    spent = [0.0]

    class Timed(SimCluster):
        def handle(self, r, msg, reply) -> None:  # type: ignore[no-untyped-def]  # SimCluster.handle's types, as it overrides
            start = time.perf_counter()
            super().handle(r, msg, reply)
            spent[0] += time.perf_counter() - start

        def _advance(self, timeout: float | None) -> None:
            start = time.perf_counter()
            super()._advance(timeout)
            spent[0] += time.perf_counter() - start

    path = write_dag(os.path.join(tmp, f"sim{tasks}.dag"), (f"TASK t{i} /bin/true\n" for i in range(tasks)))
    hosts = [
        SimHost(f"h{h}", cpus=16, memory=64000, slots=min(16, workers - 16 * h)) for h in range((workers + 15) // 16)
    ]
    cluster = Timed(hosts, duration=lambda name: 1.0)
    master = Master(RunOptions(dag=path, resource_log=False, nolock=True, skip_rescue=True), cluster.transport)
    start = time.perf_counter()
    with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull):
        master.run()
    total = time.perf_counter() - start
    return total, total - spent[0]


def sim_part(tasks: int, repeat: int, tmp: str) -> None:
    logging.disable(logging.CRITICAL)
    cost, whole = {}, {}
    for workers in (100, 100_000):
        fixed = min((sim_run(workers, 1, tmp) for _ in range(repeat)), key=lambda t: t[1])
        total = min((sim_run(workers, tasks, tmp) for _ in range(repeat)), key=lambda t: t[1])
        cost[workers] = (total[1] - fixed[1]) / (tasks - 1)
        whole[workers] = (total[0] - fixed[0]) / (tasks - 1)
        print(
            f"simulated, {workers:>6} workers, {tasks} tasks: {total[0]:.1f} s, the master's part {total[1]:.1f} s, "
            f"of which {fixed[1]:.2f} s start and end (a one-task run): the master {cost[workers] * 1e6:.1f} us per "
            f"task (with the simulated workers {whole[workers] * 1e6:.1f} us)"
        )
    print(
        f"simulated: the master's cost per task at 100,000 workers = {cost[100_000] / cost[100]:.2f}x that at 100 "
        f"(target <= {SIM_TARGET}); with the simulated workers' {whole[100_000] / whole[100]:.2f}x"
    )


def main() -> None:
    if sys.argv[1:2] == ["--rank0"]:
        sys.exit(rank0(sys.argv[2:]))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, nargs="+", default=[2000, 20000])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--warm", type=int, default=200, help="tasks of the second baseline DAG (see the doc)")
    ap.add_argument("--sim-tasks", type=int, default=1_000_000)
    ap.add_argument("--skip-mpi", action="store_true")
    ap.add_argument("--skip-sim", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if not args.skip_mpi:
            mpi_part(args.tasks, args.repeat, tmp, args.warm)
        if not args.skip_sim:
            sim_part(args.sim_tasks, 1 if args.sim_tasks > 100_000 else args.repeat, tmp)


if __name__ == "__main__":
    main()
