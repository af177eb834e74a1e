"""Late binding against a batch job per cluster, in the same run: batch jobs submitted, the wait of each cluster
between becoming ready and its first task starting (summed), and makespan.

    python bench/latebinding.py [--site local] [--set KEY=VALUE]... [--pilots 2] [--pilot-nodes 1] [--tasks 2]
    python bench/latebinding.py --site container --set "pilot_command=$PWD/.venv/bin/python -m pilot"  # real Slurm

Two workflows of short tasks (/bin/true), planned with --cluster label: a chain of 10 dependent clusters and a fan
of 20 independent ones. Each runs with ``pilot submit`` as it is (one batch job per cluster) and with
``--pilots N``, where each pilot job runs one long-lived pilot run and the driver feeds it each ready cluster
through its inbox. A cluster is ready when the driver submits it (its SUBMIT in the root jobstate.log); it starts
at its first task's EXECUTE in its own jobstate.log. Target: pilot mode submits at most N batch jobs and waits at
most 0.05 s per cluster. Each mode's scheduler commands (sbatch, squeue, scancel, qsub, qstat,
qdel; ps, the local site's queue query) are counted through shims on PATH, per 1,000 tasks. Beside them, HyperQueue (when ``pip install hyperqueue`` provides its LocalCluster) on
the same shapes, a job per cluster, with as many cores as the pilot job has workers. Beside the fan, its floor: its clusters started all at once with no scheduler at all
(bare mpiexec), what starting that many MPI runs at once costs on this machine whatever runs them. On a batch
site (--site FILE of a Slurm or PBS site) the per-cluster gap includes the queue wait, which is what pilot jobs
save.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from Pegasus import api  # noqa: E402 - after the sys.path set-up above

GAP_TARGET = 0.05  # seconds from a cluster ready to its first task, per cluster, in pilot mode


def workflow(path: str, shape: str, clusters: int, tasks: int) -> str:
    tc = api.TransformationCatalog().add_transformations(
        api.Transformation("true", site="local", pfn="/bin/true", is_stageable=False))
    wf = api.Workflow(shape).add_transformation_catalog(tc)
    last = None
    for c in range(clusters):
        jobs = [api.Job("true", _id=f"c{c}t{t}").add_profiles(api.Namespace.PEGASUS, key="label", value=f"L{c}")
                for t in range(tasks)]
        wf.add_jobs(*jobs)
        if shape == "chain" and last is not None:
            for job in jobs:
                wf.add_dependency(job, parents=last)
        last = jobs
    wf.write(path)
    return path


def times(log: str, event: str) -> dict[str, float]:
    """First time of ``event`` per job in a jobstate.log."""
    out: dict[str, float] = {}
    with open(log, encoding="utf-8") as fh:
        for line in fh:
            words = line.split()
            if len(words) > 2 and words[2] == event:
                out.setdefault(words[1], float(words[0]))
    return out


def measure(sub: str, clusters: list[str]) -> tuple[float, float]:
    """(summed gap from SUBMIT to first task EXECUTE over ``clusters``, makespan of the run)."""
    submitted = times(os.path.join(sub, "jobstate.log"), "SUBMIT")
    gap = 0.0
    last = 0.0
    for name in clusters:
        started = times(os.path.join(sub, name, "jobstate.log"), "EXECUTE")
        ended = times(os.path.join(sub, name, "jobstate.log"), "JOB_SUCCESS")
        gap += min(started.values()) - submitted[name]
        last = max(last, max(ended.values()))
    return gap, last - min(submitted.values())


def batch_jobs(sub: str) -> int:
    import json

    with open(os.path.join(sub, "submit.state.json"), encoding="utf-8") as fh:
        state = json.load(fh)
    ids = {j for c in state["clusters"] for j in c["job_ids"]}
    if any(j.startswith("pilot:") for j in ids):
        return len([d for d in os.listdir(os.path.join(sub, "pilots")) if os.path.isdir(os.path.join(sub, "pilots", d))])
    return len(ids)


# The scheduler commands counted (ps: the local site's queue query), by shims first on PATH.
COUNTED = ("sbatch", "squeue", "scancel", "qsub", "qstat", "qdel", "ps")


def shims(where: str) -> tuple[str, str]:
    """A directory of shims, one per scheduler command this machine has, each noting its name in a log and
    running the real one; (the directory, the log)."""
    os.makedirs(where)
    log = os.path.join(where, "calls.log")
    for name in COUNTED:
        real = shutil.which(name)
        if real is not None:
            path = os.path.join(where, name)
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(f"#!/bin/sh\necho {name} >> {shlex.quote(log)}\nexec {shlex.quote(real)} \"$@\"\n")
            os.chmod(path, 0o755)
    return where, log


def calls(log: str) -> dict[str, int]:
    if not os.path.exists(log):
        return {}
    with open(log, encoding="utf-8") as fh:
        names = fh.read().split()
    return {n: names.count(n) for n in COUNTED if n in names}


def run(site: str, sets: list[str], wf: str, sub: str, extra: list[str]) -> tuple[int, float, float, float, dict]:
    start = time.monotonic()
    shim_dir, log = shims(sub + "-shims")
    env = dict(os.environ, PATH=shim_dir + os.pathsep + os.environ.get("PATH", ""))
    res = subprocess.run([sys.executable, "-m", "pilot", "submit", "--no-monitord", "--poll", "0.2", "--site", site,
                          *(f"--set={s}" for s in sets), "--cluster", "label", wf, "--dir", sub, *extra],
                         capture_output=True, text=True, env=env)
    wall = time.monotonic() - start
    if res.returncode != 0:
        sys.exit(f"pilot submit failed ({res.returncode}): {res.stderr[-2000:]}")
    import yaml

    with open(os.path.join(sub, "clusters.yml"), encoding="utf-8") as fh:
        names = [c["name"] for c in yaml.safe_load(fh)["clusters"] if c["name"].startswith("true_") or
                 c["name"].startswith("merge_L")]
    gap, makespan = measure(sub, names)
    tasks = sum(len(times(os.path.join(sub, n, "jobstate.log"), "JOB_SUCCESS")) for n in os.listdir(sub)
                if os.path.exists(os.path.join(sub, n, "jobstate.log")))
    return batch_jobs(sub), gap / max(1, len(names)), makespan, wall, \
        {k: 1000.0 * v / max(1, tasks) for k, v in calls(log).items()}


def floor(tmp: str, count: int, tasks: int, ranks: int) -> float:
    """The wait from ready to first task with no scheduler and no pilot job at all: ``count`` clusters of
    ``tasks`` /bin/true started at the same moment, each by its own ``mpiexec -n ranks pilot run`` on this
    machine (seconds per cluster). What a fan pays here for its own start, in any mode."""
    mpiexec = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    procs, launched = [], []
    for c in range(count):
        d = os.path.join(tmp, f"floor-{c}")
        os.makedirs(d)
        with open(os.path.join(d, "c.dag"), "w", encoding="utf-8") as fh:
            fh.writelines(f"TASK t{t} /bin/true\n" for t in range(tasks))
    for c in range(count):
        launched.append(time.time())
        procs.append(subprocess.Popen([mpiexec, "-n", str(ranks), sys.executable, "-m", "pilot", "run",
                                       "--jobstate-log", "c.dag"], cwd=os.path.join(tmp, f"floor-{c}"),
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    if any(p.wait() for p in procs):
        sys.exit("a pilot run of the floor failed")
    gap = sum(min(times(os.path.join(tmp, f"floor-{c}", "jobstate.log"), "EXECUTE").values()) - launched[c]
              for c in range(count))
    return gap / count


@contextlib.contextmanager
def quiet_stdout():
    """Standard output (the descriptor: HyperQueue's server prints its table from native code) to /dev/null."""
    sys.stdout.flush()
    saved = os.dup(1)
    with open(os.devnull, "wb") as null:
        os.dup2(null.fileno(), 1)
    try:
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def hyperqueue(tmp: str, shape: str, count: int, tasks: int, cores: int) -> float | None:
    """The same shape on HyperQueue (pip install hyperqueue: its LocalCluster, one worker of ``cores`` cores):
    a job of ``tasks`` tasks per cluster, submitted as it becomes ready (a chain: when the one before ended; a
    fan: all at once); seconds per cluster from its submission to its first task's start (each task writes its
    start time: a shell's start counts against it). None without the package."""
    try:
        from hyperqueue import Job, LocalCluster
        from hyperqueue.cluster import WorkerConfig
    except ImportError:
        return None
    d = os.path.join(tmp, f"hq-{shape}")
    os.makedirs(d)

    def job(c: int) -> Job:
        out = Job()
        for t in range(tasks):
            out.program(["/bin/sh", "-c", f"date +%s.%N > {d}/c{c}t{t}"])
        return out

    def started(c: int) -> float:
        return min(float(open(os.path.join(d, f"c{c}t{t}"), encoding="utf-8").read()) for t in range(tasks))

    with quiet_stdout(), LocalCluster(os.path.join(tmp, f"hq-{shape}-server"), WorkerConfig(cores=cores)) as cluster, \
            contextlib.redirect_stderr(io.StringIO()):  # its progress bars
        client = cluster.client()
        client.wait_for_jobs([client.submit(job(-1))])  # the worker is up
        ready: list[float] = []
        if shape == "chain":
            for c in range(count):
                ready.append(time.time())
                client.wait_for_jobs([client.submit(job(c))])
        else:
            submitted = []
            for c in range(count):
                ready.append(time.time())
                submitted.append(client.submit(job(c)))
            client.wait_for_jobs(submitted)
    return sum(started(c) - ready[c] for c in range(count)) / count


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--site", default="local")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="site keys, as pilot submit --set")
    p.add_argument("--pilots", type=int, default=2)
    p.add_argument("--pilot-nodes", type=int, default=1)
    p.add_argument("--tasks", type=int, default=2, help="tasks per cluster (default 2)")
    p.add_argument("--ranks", type=int, default=3, help="ranks of a cluster in the floor (default 3)")
    ns = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="pilot-latebinding-") as tmp:
        for shape, count in (("chain", 10), ("fan", 20)):
            wf = workflow(os.path.join(tmp, f"{shape}.yml"), shape, count, ns.tasks)
            base = run(ns.site, ns.set, wf, os.path.join(tmp, f"{shape}-per-cluster"), [])
            late = run(ns.site, ns.set, wf, os.path.join(tmp, f"{shape}-pilots"),
                       ["--pilots", str(ns.pilots), "--pilot-nodes", str(ns.pilot_nodes)])
            print(f"{shape} of {count} clusters on {ns.site}:")
            for what, r in (("a batch job per cluster", base), (f"--pilots {ns.pilots}", late)):
                print(f"  {what:24s} batch jobs {r[0]:3d}  gap {r[1]:6.2f} s per cluster  makespan {r[2]:7.2f} s"
                      f"  (submit wall {r[3]:.1f} s)")
                print(f"  {'':24s} scheduler commands per 1,000 tasks: "
                      f"{', '.join(f'{k} {v:.0f}' for k, v in r[4].items()) or 'none'}")
            print(f"  ratio pilots/per-cluster: gap {late[1] / base[1] if base[1] else float('nan'):.2f}, makespan "
                  f"{late[2] / base[2] if base[2] else float('nan'):.2f}; target: at most {ns.pilots} batch jobs "
                  f"({'met' if late[0] <= ns.pilots else 'NOT met'}), gap <= {GAP_TARGET} s "
                  f"({'met' if late[1] <= GAP_TARGET else 'NOT met'})")
            hq = hyperqueue(tmp, shape, count, ns.tasks, ns.ranks - 1)
            print(f"  HyperQueue, one worker of {ns.ranks - 1} cores: " +
                  (f"gap {hq:6.3f} s per cluster" if hq is not None else "not measured (pip install hyperqueue)"))
            if shape == "fan":
                least = floor(tmp, count, ns.tasks, ns.ranks)
                print(f"  floor: {count} clusters started at once by mpiexec here, no scheduler: gap {least:.2f} s per "
                      f"cluster; pilots/floor {late[1] / least if least else float('nan'):.2f}")


if __name__ == "__main__":
    main()
