"""sharedfs against nonsharedfs and condorio: wall time and file-system operations on the shared scratch.

    python bench/data.py --layouts [--jobs 10000] [--trace-jobs N] [--transfer-jobs 10] [--tasks-only]

One workflow of N jobs on one level, each reading its input ``in<i>`` (staged in from the replica
catalog), writing three temporary files of its own, and its output ``out<i>`` (staged out and
registered), as a program with scratch files does. It is planned with ``--cluster whole`` for the local
site under each data configuration (pegasus.data.configuration), and run with ``mpiexec -n 3 pilot run``
and the options of the cluster's batch script, in the same invocation, one layout after the other:

- workflow: the wall time of the cluster's DAG, data jobs and all (not with ``--tasks-only``);
- tasks: the wall time of its N compute tasks alone (the DAG without its data jobs, their inputs put in
  the workflow's directory beforehand): the part the layouts change;
- operations on the shared scratch: a run of ``--trace-jobs`` compute tasks alone under
  ``strace -f -y -e trace=%file``, counting every system call that names a path in the shared scratch
  (strace's ``-y`` gives the directory a relative name is looked up in, and the file an open returns, so
  an open through a task directory's link to the shared scratch counts as the shared-scratch open it is).

The data jobs (create-dir, stage-in, stage-out, registration, cleanup) run in the workflow's directory in
every layout, the same operations each time; pegasus-transfer's 2 s wait before each call makes most of
the workflow's time. Figures go in notes, not tests.
"""

from __future__ import annotations

import collections
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

LAYOUTS = ("sharedfs", "nonsharedfs", "condorio")
# A program with scratch files: three temporary files, its output, the temporary files removed.
WORK = """#!/bin/sh
for k in 1 2 3; do echo "scratch $k" > "tmp.$$.$k"; done
{ read line < "$1"; echo "$line"; cat "tmp.$$.1"; } > "$2"
exec rm -f "tmp.$$.1" "tmp.$$.2" "tmp.$$.3"
"""
PATHS = re.compile(r'(?:AT_FDCWD|-?\d+)<([^>]*)>, "([^"]*)"|(?:^\w+\(|, )"([^"]*)"')


def node_local(base: str) -> str:
    """The nodes' local scratch: /dev/shm where there is one (a RAM file system, as many clusters' $TMPDIR is),
    else a directory beside the shared scratch."""
    return (
        tempfile.mkdtemp(prefix="pilot-bench-node-", dir="/dev/shm")
        if os.path.isdir("/dev/shm")
        else os.path.join(base, "node-local")
    )


def write(base: str, n: int, layout: str, transfer_jobs: int, local: str) -> tuple[str, str]:
    """The workflow (Pegasus 5 YAML) with its inputs and properties; (workflow, properties)."""
    data = os.path.join(base, "inputs")
    os.makedirs(data, exist_ok=True)
    work = os.path.join(base, "work.sh")
    with open(work, "w") as fh:
        fh.write(WORK)
    os.chmod(work, 0o755)
    path = os.path.join(base, f"{layout}.yml")
    with open(path, "w") as fh:
        fh.write("pegasus: 5.0.4\nname: layouts\n")
        fh.write(
            f"transformationCatalog:\n  transformations:\n  - name: work\n    sites:\n    - name: local\n"
            f"      pfn: {work}\n      type: installed\n"
        )
        fh.write(
            f"siteCatalog:\n  sites:\n  - name: local\n    directories:\n"
            f"    - type: sharedScratch\n      path: {base}/scratch-{layout}\n"
            f"    - type: localScratch\n      path: {local}\n"
            f"    - type: localStorage\n      path: {base}/output-{layout}\n"
        )
        fh.write("replicaCatalog:\n  replicas:\n")
        for i in range(n):
            fh.write(f"  - lfn: in{i}\n    pfns:\n    - site: local\n      pfn: {data}/in{i}\n")
        fh.write("jobs:\n")
        for i in range(n):
            fh.write(
                f"- type: job\n  name: work\n  id: j{i}\n  arguments: [in{i}, out{i}]\n  uses:\n"
                f"  - {{lfn: in{i}, type: input}}\n"
                f"  - {{lfn: out{i}, type: output, stageOut: true, registerReplica: true}}\n"
            )
    for i in range(n):
        with open(os.path.join(data, f"in{i}"), "w") as out:
            out.write(f"{i}\n")
    props = os.path.join(base, f"{layout}.properties")
    with open(props, "w") as fh:
        fh.write(
            f"pegasus.data.configuration = {layout}\npegasus.stagein.clusters = {transfer_jobs}\n"
            f"pegasus.stageout.clusters = {transfer_jobs}\npegasus.file.cleanup.clusters.num = {transfer_jobs}\n"
            "pegasus.transfer.arguments = -m 1\n"
        )
    return path, props


def plan(workflow: str, props: str, submit: str) -> str:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pilot",
            "plan",
            workflow,
            "--site",
            "local",
            "--cluster",
            "whole",
            "--dir",
            submit,
            "--conf",
            props,
        ],
        check=True,
        capture_output=True,
    )
    (cdir,) = [os.path.join(submit, d) for d in os.listdir(submit) if d.startswith("merge_")]
    return cdir


def run(cdir: str, dag: str | None = None, trace: str | None = None) -> float:
    """Run the cluster as its batch script does (its pilot run options, --task-files among them), or ``dag``
    in its place; seconds."""
    with open(next(os.path.join(cdir, f) for f in os.listdir(cdir) if f.endswith(".sh"))) as fh:
        line = next(x for x in fh if " run " in x)
    words = shlex.split(line)
    words = words[words.index("run") + 1 :]
    if dag:
        words[-1] = dag
        if "--task-files" in words:
            words[words.index("--task-files") + 1] = dag + ".taskfiles"
    mpiexec = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    cmd = [
        mpiexec if os.path.exists(mpiexec) else "mpiexec",
        "-n",
        "3",
        sys.executable,
        "-m",
        "pilot",
        "run",
        "-s",
        "-q",
        "-n",
        *words,
    ]
    if trace:
        cmd = ["strace", "-f", "-qq", "-y", "-o", trace, "-e", "trace=%file", *cmd]
    t = time.perf_counter()
    res = subprocess.run(cmd, cwd=cdir, capture_output=True)
    took = time.perf_counter() - t
    if res.returncode != 0:
        sys.exit(f"run of {cdir} failed: {res.stderr.decode()[-2000:]}")
    return took


def compute_only(cdir: str, workdir: str, inputs: str, n: int) -> str:
    """The cluster's DAG without its data jobs, for ``n`` of its compute tasks, their inputs put in the
    workflow's directory as its stage-in jobs put them; the DAG's file name. What the tasks themselves do."""
    os.makedirs(workdir, exist_ok=True)
    for i in range(n):
        shutil.copyfile(os.path.join(inputs, f"in{i}"), os.path.join(workdir, f"in{i}"))
    (dag,) = [f for f in os.listdir(cdir) if f.endswith(".dag") and f != "compute.dag"]
    keep = {f"work_j{i}" for i in range(n)}
    out = os.path.join(cdir, "compute.dag")
    with open(os.path.join(cdir, dag)) as src, open(out, "w") as dst:
        note = ""
        for line in src:
            if line.startswith("#pilot cwd="):
                dst.write(line)
            elif line.startswith("#@"):
                note = line
            elif line.startswith("TASK "):
                if line.split()[1] in keep:
                    dst.write(note + line)
                note = ""
    lists = next((f for f in os.listdir(cdir) if f.endswith(".taskfiles") and not f.startswith("compute.")), None)
    if lists:  # the same lists, for the tasks kept
        with open(os.path.join(cdir, lists)) as fh:
            rows = fh.readlines()
        with open(os.path.join(cdir, "compute.dag.taskfiles"), "w") as fh:
            fh.writelines([rows[0], *(r for r in rows[1:] if r.split('"')[1] in keep)])
    return "compute.dag"


def count(trace: str, shared: str) -> collections.Counter:
    """System calls of the trace that name a path in ``shared``, by name."""
    out: collections.Counter = collections.Counter()
    prefix = shared.rstrip("/") + "/"
    with open(trace, errors="replace") as fh:
        for line in fh:
            pid, _, rest = line.partition(" ")
            rest = rest.lstrip()
            name = rest.split("(", 1)[0]
            if not name.isidentifier():
                continue
            paths = []
            ret = rest.rsplit(" = ", 1)
            if len(ret) == 2 and "<" in ret[1]:  # an fd returned: the file itself, links followed
                paths.append(ret[1].split("<", 1)[1].split(">", 1)[0])
            elif name in ("symlink", "symlinkat"):  # the link made, not the file it names
                words = re.findall(r'(?:(?:AT_FDCWD|\d+)<([^>]*)>, )?"([^"]*)"', rest)[1:2]  # ("", path) if no dirfd
                paths = [rel if rel.startswith("/") else f"{d}/{rel}" for d, rel in words]
            else:  # every path it names (a rename names two)
                paths = [
                    plain or (rel if rel.startswith("/") else f"{d}/{rel}") for d, rel, plain in PATHS.findall(rest)
                ]
            if any((p + "/").startswith(prefix) for p in paths):
                out[name] += 1
    return out


def compare(jobs: int, trace_jobs: int, transfer_jobs: int, tasks_only: bool = False) -> None:
    """``tasks_only``: skip the run of the whole workflow, whose data jobs (the same in every layout) take most
    of its time at 10,000 jobs."""
    if shutil.which("strace") is None:
        sys.exit("strace is needed to count the operations (apt-get install strace)")
    base = tempfile.mkdtemp(prefix="pilot-bench-layouts-")
    local = node_local(base)
    try:
        whole: dict[str, float] = {}
        tasks: dict[str, float] = {}
        ops: dict[str, collections.Counter] = {}
        for layout in LAYOUTS:
            where = os.path.join(base, layout)
            os.makedirs(where)
            workflow, props = write(where, jobs, layout, transfer_jobs, local)
            cdir = plan(workflow, props, os.path.join(where, "submit"))
            scratch = os.path.join(where, f"scratch-{layout}")
            with open(os.path.join(cdir, os.path.basename(cdir) + ".dag")) as fh:
                workdir = next(line.split("=", 1)[1].strip() for line in fh if line.startswith("#pilot cwd="))
            whole[layout] = float("nan") if tasks_only else run(cdir)
            shutil.rmtree(scratch, ignore_errors=True)
            tasks[layout] = run(cdir, compute_only(cdir, workdir, os.path.join(where, "inputs"), jobs))
            shutil.rmtree(scratch)
            trace = os.path.join(where, "strace.txt")
            run(cdir, compute_only(cdir, workdir, os.path.join(where, "inputs"), trace_jobs), trace)
            ops[layout] = count(trace, scratch)
            shutil.rmtree(where, ignore_errors=True)
        print(
            f"{jobs} jobs, each with three temporary files (mpiexec -n 3 pilot run, --cluster whole, "
            f"{transfer_jobs} stage-in, stage-out and cleanup jobs; shared scratch in {tempfile.gettempdir()}, "
            f"local scratch in {os.path.dirname(local)}); wall time of the whole workflow and of its "
            f"compute tasks alone; operations on the shared scratch counted under strace over {trace_jobs} "
            "compute tasks"
        )
        for layout in LAYOUTS:
            total = sum(ops[layout].values())
            top = ", ".join(f"{k} {v}" for k, v in ops[layout].most_common(5))
            print(
                f"  {layout:<12} workflow {whole[layout]:7.1f} s  tasks {tasks[layout]:7.1f} s  shared-scratch "
                f"operations {total:7d} ({total / trace_jobs:.1f} per task: {top})"
            )
        for layout in LAYOUTS[1:]:
            print(
                f"  {layout} / sharedfs: workflow {whole[layout] / whole['sharedfs']:.2f}, tasks "
                f"{tasks[layout] / tasks['sharedfs']:.2f}, shared-scratch operations per task "
                f"{sum(ops[layout].values()) / max(1, sum(ops['sharedfs'].values())):.2f}"
            )
    finally:
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(local, ignore_errors=True)
