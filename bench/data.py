"""Staging cost: N jobs, each copying one input to one output, with and without Pegasus' data jobs.

    python bench/data.py [--jobs 10000] [--transfer-jobs 10] [--no-run]
    python bench/data.py --layouts [--jobs 10000] [--trace-jobs N] [--transfer-jobs 10] [--tasks-only]

With ``--layouts``: the data configurations against each other (bench/datalayouts.py).

Two workflows of the same N ``cp`` jobs on one level, planned with ``--cluster whole``
for the local site and run with ``mpiexec -n 3 pilot run`` on the cluster's DAG:

- staged: each job reads ``in<i>`` from the replica catalog (stage-in), writes
  ``out<i>`` (stage-out to the output site, registration), and in-place cleanup
  removes both from the workflow's directory;
- in place: the same jobs reading their input by absolute path and declaring no
  files, so the plan has only its create-dir and cleanup jobs.

Printed: plan time of each (Pegasus' default grouping: a stage-in and a
stage-out job per 10 jobs, a cleanup job per 5) and their ratio; then the run
time of each and the ratio, with ``--transfer-jobs K`` stage-in, stage-out and
cleanup jobs (the properties pegasus.stagein.clusters, pegasus.stageout.clusters,
pegasus.file.cleanup.clusters.num). Every pegasus-transfer call waits 2 s before
its first transfer, so at Pegasus' default grouping 10,000 jobs make about 4,000
calls, over an hour of waiting on 2 workers: the run uses fewer, larger
transfer jobs. Figures go in notes, not tests.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))


def write(base: str, n: int, staged: bool) -> str:
    """The workflow (Pegasus 5 YAML as Pegasus.api lays it out) and, for the staged one, its inputs."""
    data = os.path.join(base, "inputs")
    os.makedirs(data, exist_ok=True)
    path = os.path.join(base, "staged.yml" if staged else "inplace.yml")
    with open(path, "w") as fh:
        fh.write("pegasus: 5.0.4\nname: copies\n")
        fh.write(
            "transformationCatalog:\n  transformations:\n  - name: cp\n    sites:\n    - name: local\n"
            "      pfn: /bin/cp\n      type: installed\n"
        )
        fh.write(
            f"siteCatalog:\n  sites:\n  - name: local\n    directories:\n"
            f"    - type: sharedScratch\n      path: {base}/scratch\n"
            f"    - type: localStorage\n      path: {base}/output\n"
        )
        if staged:
            fh.write("replicaCatalog:\n  replicas:\n")
            for i in range(n):
                fh.write(f"  - lfn: in{i}\n    pfns:\n    - site: local\n      pfn: {data}/in{i}\n")
        fh.write("jobs:\n")
        for i in range(n):
            if staged:
                fh.write(
                    f"- type: job\n  name: cp\n  id: j{i}\n  arguments: [in{i}, out{i}]\n  uses:\n"
                    f"  - {{lfn: in{i}, type: input}}\n"
                    f"  - {{lfn: out{i}, type: output, stageOut: true, registerReplica: true}}\n"
                )
            else:
                fh.write(f"- type: job\n  name: cp\n  id: j{i}\n  arguments: [{data}/in{i}, out{i}]\n")
    for i in range(n):
        with open(os.path.join(data, f"in{i}"), "w") as out:
            out.write(f"{i}\n")
    return path


def plan(workflow: str, submit: str, props: str | None) -> float:
    cmd = [sys.executable, "-m", "pilot", "plan", workflow, "--site", "local", "--cluster", "whole", "--dir", submit]
    if props:
        cmd += ["--conf", props]
    t = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return time.perf_counter() - t


def run(submit: str) -> tuple[float, int]:
    mpiexec = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    cdir = os.path.join(submit, "merge_copies")
    t = time.perf_counter()
    res = subprocess.run(
        [
            mpiexec if os.path.exists(mpiexec) else "mpiexec",
            "-n",
            "3",
            sys.executable,
            "-m",
            "pilot",
            "run",
            "-s",
            "-q",
            "-o",
            "/dev/null",
            "merge_copies.dag",
        ],
        cwd=cdir,
        capture_output=True,
    )
    took = time.perf_counter() - t
    if res.returncode != 0:
        sys.exit(f"run of {cdir} failed: {res.stderr.decode()[-2000:]}")
    with open(os.path.join(cdir, "merge_copies.dag")) as fh:
        calls = sum(1 for line in fh if line.startswith("TASK") and "pegasus-transfer" in line)
    return took, calls


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--jobs", type=int, default=10000)
    p.add_argument("--transfer-jobs", type=int, default=10, help="stage-in, stage-out and cleanup jobs for the run")
    p.add_argument("--no-run", action="store_true", help="plan only")
    p.add_argument(
        "--layouts",
        action="store_true",
        help="sharedfs against nonsharedfs and condorio: wall time and operations on the shared scratch",
    )
    p.add_argument(
        "--trace-jobs",
        type=int,
        help="with --layouts: jobs of the run counted under strace "
        "(default: --jobs; strace slows every system call)",
    )
    p.add_argument(
        "--tasks-only",
        action="store_true",
        help="with --layouts: time the compute tasks alone, not "
        "the whole workflow (its data jobs, the same in every layout, take most of its time)",
    )
    ns = p.parse_args()
    if ns.layouts:
        from datalayouts import compare  # noqa: PLC0415 - bench/ is on sys.path as the script's directory

        compare(ns.jobs, ns.trace_jobs or ns.jobs, ns.transfer_jobs, ns.tasks_only)
        return
    base = tempfile.mkdtemp(prefix="pilot-bench-data-")
    try:
        staged, inplace = write(base, ns.jobs, True), write(base, ns.jobs, False)
        tp_staged = plan(staged, os.path.join(base, "plan-staged"), None)
        tp_inplace = plan(inplace, os.path.join(base, "plan-inplace"), None)
        print(
            f"{ns.jobs} jobs, plan (Pegasus' default grouping): staged {tp_staged:.2f} s, in place {tp_inplace:.2f} s, "
            f"ratio {tp_staged / tp_inplace:.2f}"
        )
        if ns.no_run:
            return
        props = os.path.join(base, "pegasus.properties")
        with open(props, "w") as fh:
            k = ns.transfer_jobs
            fh.write(
                f"pegasus.stagein.clusters = {k}\npegasus.stageout.clusters = {k}\n"
                f"pegasus.file.cleanup.clusters.num = {k}\npegasus.transfer.arguments = -m 1\n"
            )
        plan(staged, os.path.join(base, "run-staged"), props)
        plan(inplace, os.path.join(base, "run-inplace"), props)
        tr_staged, calls_staged = run(os.path.join(base, "run-staged"))
        tr_inplace, calls_inplace = run(os.path.join(base, "run-inplace"))
        outputs = len(os.listdir(os.path.join(base, "output")))
        print(
            f"{ns.jobs} jobs, run (mpiexec -n 3): staged {tr_staged:.1f} s ({calls_staged} pegasus-transfer calls, "
            f"{outputs} outputs staged out), in place {tr_inplace:.1f} s ({calls_inplace} calls), "
            f"ratio {tr_staged / tr_inplace:.2f}"
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
