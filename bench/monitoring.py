"""Cost of monitoring: a 2,000-task cluster run the way ``pilot submit`` runs it, root monitoring on vs off.

One cluster of N ``/bin/true`` tasks is planned with ``pilot plan --cluster
whole``; its batch command (the planner's, with the site's pilot options) runs
under mpiexec with 1 master + 2 workers. "on" is that command as planned
(``--jobstate-log --invocation-records -o/-e``) plus the driver's root writes
around it (submitted, running, ended: the job output kept as .out.000);
"off" is the same command without those flags and without the root writer.
Each run gets a fresh submit directory; the fastest of ``--repeat`` runs
counts. Also printed: the files the run created per task (target: none), and,
for comparison, the per-DAG mode of a PMC DAG run alone (``--jobstate-log
--monitord-hack``, which writes two files per task).

    python bench/monitoring.py [--tasks 2000] [--repeat 5] [--dir DIR]

``--dir`` puts the runs on another file system (a parallel file system, where
creating a file costs milliseconds); by default they go to the system temp dir.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import resource
import shlex
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from common import pilot, timed, write_dag

ROOT_FLAGS = ["--jobstate-log", "--invocation-records"]
PER_DAG_FLAGS = ["--jobstate-log", "--monitord-hack"]


def count_files(top: str) -> int:
    return sum(len(files) for _, _, files in os.walk(top))


def plan(run_dir: str, tasks: int) -> tuple[str, str, list[str]]:
    """A submit directory with one cluster of ``tasks`` tasks; (submit dir, cluster dir, batch command)."""
    os.makedirs(run_dir)
    dag = write_dag(os.path.join(run_dir, "bench.dag"), [f"TASK t{i} /bin/true\n" for i in range(tasks)])
    sub = os.path.join(run_dir, "submit")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pilot",
            "plan",
            "--site",
            "local",
            "--cluster",
            "whole",
            dag,
            "--dir",
            sub,
            "--set",
            "ranks_per_node=3",
            "--set",
            "nodes=1",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    cdir = os.path.join(sub, "bench")
    script = pathlib.Path(cdir, "bench.sh").read_text(encoding="utf-8").strip().splitlines()[-1]
    return sub, cdir, shlex.split(script)


def without(argv: list[str], flags: list[str]) -> list[str]:
    """The batch command without the monitoring flags (and -o/-e, which only name the job output)."""
    out, skip = [], 0
    for arg in argv:
        if skip:
            skip -= 1
            continue
        if arg in ("-o", "-e"):
            skip = 1
            continue
        if arg not in flags:
            out.append(arg)
    return out


def cpu() -> float:
    """CPU seconds of this process and its finished children: steadier than wall time on a busy machine."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def run_on(run_dir: str, tasks: int) -> tuple[float, float, int]:
    from pilot.monitor.root import RootMonitor

    sub, cdir, argv = plan(run_dir, tasks)
    before = count_files(sub)
    cpu0 = cpu()
    start = time.perf_counter()
    monitor = RootMonitor(sub)
    monitor.start()
    monitor.submitted("bench", "1", "local")
    monitor.running("bench")
    subprocess.run(argv, cwd=cdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    monitor.ended("bench", retry=False, retry_limit=0)
    monitor.finished(0)
    monitor.close()
    elapsed = time.perf_counter() - start
    return elapsed, cpu() - cpu0, count_files(sub) - before


def run_off(run_dir: str, tasks: int) -> tuple[float, float, int]:
    sub, cdir, argv = plan(run_dir, tasks)
    before = count_files(sub)
    argv = without(argv, ROOT_FLAGS)
    cpu0 = cpu()
    elapsed = timed(argv, cwd=cdir)
    return elapsed, cpu() - cpu0, count_files(sub) - before


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--dir", help="where the runs go (default: the system temp dir)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        on, off, per_dag, plain, cpu_on, cpu_off = [], [], [], [], [], []
        files_on = files_off = files_per_dag = 0
        for rep in range(args.repeat):
            t, c, files_off = run_off(os.path.join(tmp, f"off{rep}"), args.tasks)
            off.append(t)
            cpu_off.append(c)
            t, c, files_on = run_on(os.path.join(tmp, f"on{rep}"), args.tasks)
            on.append(t)
            cpu_on.append(c)
            # The per-DAG mode of a PMC DAG run alone, against the same DAG run plainly.
            pdir = os.path.join(tmp, f"dag{rep}")
            os.mkdir(pdir)
            dag = write_dag(os.path.join(pdir, "bench.dag"), [f"TASK t{i} /bin/true\n" for i in range(args.tasks)])
            plain.append(timed(pilot(3, dag), cwd=pdir))
            before = count_files(pdir)
            per_dag.append(timed(pilot(3, "-s", *PER_DAG_FLAGS, dag), cwd=pdir))
            files_per_dag = count_files(pdir) - before
        n = args.tasks
        print(
            f"{n} x /bin/true, 1 master + 2 workers, as pilot submit runs a cluster: "
            f"monitoring off {min(off):.2f} s, root monitoring on {min(on):.2f} s: "
            f"on/off time = {min(on) / min(off):.3f} (target <= 1.05); "
            f"files created: {files_on} for the whole cluster with monitoring on ({files_on / n:.4f} per task), "
            f"{files_off} off (target: none per task); CPU time on/off = {min(cpu_on) / min(cpu_off):.3f}"
        )
        print(
            f"for comparison, a PMC DAG alone in per-DAG mode ({' '.join(PER_DAG_FLAGS)}): "
            f"{min(per_dag) / min(plain):.3f} x the plain run, {files_per_dag / n:.2f} files per task"
        )


if __name__ == "__main__":
    main()
