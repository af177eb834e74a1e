"""Late binding against a batch job per cluster, in the same run: batch jobs submitted, the wait of each cluster
between becoming ready and its first task starting, scheduler commands, and makespan.

    python bench/latebinding.py [--site local] [--set KEY=VALUE]... [--pilots 2] [--pilot-nodes 1] [--tasks 2]
                                [--poll 0.2] [--repeat 1] [--keep DIR]

On the local site (no batch system), three runs, medians:

    python bench/latebinding.py --site local --pilots 1 --repeat 3

On the real single-node Slurm of containers/ (site ``container``; the bench's catalog names site ``local``, and the
pilot jobs run this checkout's pilot through the same Python):

    SLURM_CPUS=8 bash containers/start-slurm.sh
    PATH="$PWD/.venv/bin:$PATH" PYTHONPATH=$PWD python bench/latebinding.py --site container --pilots 1 --repeat 3 \
        --set pegasus_site=local --set "pilot_command=$PWD/.venv/bin/python -m pilot"

Two workflows of short tasks (/bin/true), planned with --cluster label: a chain of 10 dependent clusters and a fan
of 20 independent ones (each cluster's one parent is the workflow's create-dir job). Each runs with ``pilot submit``
as it is (one batch job per cluster) and with ``--pilots N``, where each pilot job runs one long-lived pilot run
and the driver feeds it each ready cluster through its inbox. A cluster is ready when the last task of its parents
ended (in their own jobstate.logs: what the driver must notice, at its next poll); it starts at its first task's
EXECUTE in its own jobstate.log. Also shown, from the driver's SUBMIT of the cluster in the root jobstate.log
(after the site's ``max_queued`` let it go; in pilot mode the driver writes it just after feeding the cluster, so
it can come after the first task). Target: pilot mode submits at most N batch jobs and waits at most 0.05 s per
cluster from ready. Each mode's scheduler commands (sbatch, squeue, scancel, qsub, qstat, qdel; ps, the local
site's queue query) are counted through shims first on PATH, per 1,000 tasks (tasks of every cluster, the
create-dir and cleanup jobs among them), with the most queue queries in one poll (calls less than half a poll
apart): 1 when one query serves every job of the site. Beside them, HyperQueue (when ``pip install hyperqueue``
provides its LocalCluster) on the same shapes, a job per cluster, with as many cores as the pilot job has workers,
measured the same way (a chain's job is submitted when the client learns the one before ended). Beside the fan,
its floor: its clusters started all at once with no scheduler at all (bare mpiexec), what starting that many MPI
runs at once costs on this machine whatever runs them. On a batch site the per-cluster gap includes the queue
wait, which is what pilot jobs save.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from Pegasus import api

GAP_TARGET = 0.05  # seconds from a cluster ready to its first task, per cluster, in pilot mode


def workflow(path: str, shape: str, clusters: int, tasks: int) -> str:
    tc = api.TransformationCatalog().add_transformations(
        api.Transformation("true", site="local", pfn="/bin/true", is_stageable=False)
    )
    wf = api.Workflow(shape).add_transformation_catalog(tc)
    last = None
    for c in range(clusters):
        jobs = [
            api.Job("true", _id=f"c{c}t{t}").add_profiles(api.Namespace.PEGASUS, key="label", value=f"L{c}")
            for t in range(tasks)
        ]
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


def measure(sub: str, clusters: dict[str, list[str]]) -> tuple[float, float, float]:
    """(summed gap from ready to first task over ``clusters`` (name -> parents), the same from the driver's SUBMIT,
    makespan of the run). A cluster is ready when the last task of its parents ended (their own jobstate.logs:
    what the driver must notice, in either mode), or at the run's first SUBMIT without parents."""
    submitted = times(os.path.join(sub, "jobstate.log"), "SUBMIT")
    ended = {
        name: times(os.path.join(sub, name, "jobstate.log"), "JOB_SUCCESS")
        for name in {*clusters, *(p for parents in clusters.values() for p in parents)}
    }
    gap = from_submit = last = 0.0
    for name, parents in clusters.items():
        first = min(times(os.path.join(sub, name, "jobstate.log"), "EXECUTE").values())
        ready = max((max(ended[p].values()) for p in parents), default=min(submitted.values()))
        gap += first - ready
        from_submit += first - submitted[name]
        last = max(last, max(ended[name].values()))
    return gap, from_submit, last - min(submitted.values())


def batch_jobs(sub: str) -> int:
    import json

    with open(os.path.join(sub, "submit.state.json"), encoding="utf-8") as fh:
        state = json.load(fh)
    ids = {j for c in state["clusters"] for j in c["job_ids"]}
    if any(j.startswith("pilot:") for j in ids):
        return len(
            [d for d in os.listdir(os.path.join(sub, "pilots")) if os.path.isdir(os.path.join(sub, "pilots", d))]
        )
    return len(ids)


# The scheduler commands counted (ps: the local site's queue query), by shims first on PATH.
COUNTED = ("sbatch", "squeue", "scancel", "qsub", "qstat", "qdel", "ps")


def shims(where: str) -> tuple[str, str]:
    """A directory of shims, one per scheduler command this machine has, each noting its name and the time in a
    log (bash's clock: no process of its own) and running the real one; (the directory, the log)."""
    os.makedirs(where)
    log = os.path.join(where, "calls.log")
    for name in COUNTED:
        real = shutil.which(name)
        if real is not None:
            path = os.path.join(where, name)
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(
                    f"#!/bin/bash\necho {name} $EPOCHREALTIME >> {shlex.quote(log)}\n"
                    f'exec {shlex.quote(real)} "$@"\n'
                )
            os.chmod(path, 0o755)
    return where, log


QUERIES = ("squeue", "qstat", "ps")  # the queue queries, one per poll if one serves every job


def calls(log: str, poll: float, until: float) -> tuple[dict[str, int], float]:
    """(calls of each command, the most queue queries in one poll: those less than half a poll apart, up to
    ``until``, the run's last event: the driver's own end asks again, once, after its cancel)."""
    if not os.path.exists(log):
        return {}, 0.0
    with open(log, encoding="utf-8") as fh:
        said = [line.split() for line in fh if line.strip()]
    names = [w[0] for w in said]
    queries = sorted(float(w[1]) for w in said if w[0] in QUERIES and float(w[1]) <= until)
    bursts = [1]
    for before, now in zip(queries, queries[1:]):
        if now - before < poll / 2:
            bursts[-1] += 1
        else:
            bursts.append(1)
    return {n: names.count(n) for n in COUNTED if n in names}, float(max(bursts)) if queries else 0.0


@dataclasses.dataclass
class Result:
    """One ``pilot submit`` of a shape in one mode."""

    jobs: int  # batch jobs submitted
    gap: float  # seconds per cluster from ready (its parents' last task ended) to its first task
    from_submit: float  # the same from the driver's SUBMIT of the cluster (after its throttle)
    makespan: float  # from the run's first SUBMIT (its create-dir job: a pilot job's start counts) to the last end
    wall: float  # of the whole pilot submit
    per_1000: dict[str, float]  # scheduler commands per 1,000 tasks
    per_poll: float  # the most queue queries in one poll


def run(site: str, sets: list[str], wf: str, sub: str, extra: list[str], poll: float) -> Result:
    start = time.monotonic()
    shim_dir, log = shims(sub + "-shims")
    env = dict(os.environ, PATH=shim_dir + os.pathsep + os.environ.get("PATH", ""))
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "pilot",
            "submit",
            "--no-monitord",
            "--poll",
            str(poll),
            "--site",
            site,
            *(f"--set={s}" for s in sets),
            "--cluster",
            "label",
            wf,
            "--dir",
            sub,
            *extra,
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    wall = time.monotonic() - start
    if res.returncode != 0:
        sys.exit(f"pilot submit failed ({res.returncode}): {res.stderr[-2000:]}")
    import yaml

    with open(os.path.join(sub, "clusters.yml"), encoding="utf-8") as fh:
        clusters = {
            c["name"]: list(c["parents"])
            for c in yaml.safe_load(fh)["clusters"]
            if c["name"].startswith(("true_", "merge_L"))
        }
    gap, from_submit, makespan = measure(sub, clusters)
    tasks = sum(
        len(times(os.path.join(sub, n, "jobstate.log"), "JOB_SUCCESS"))
        for n in os.listdir(sub)
        if os.path.exists(os.path.join(sub, n, "jobstate.log"))
    )
    with open(os.path.join(sub, "jobstate.log"), encoding="utf-8") as fh:
        last_event = float(fh.read().split("\n")[-2].split()[0])
    counts, per_poll = calls(log, poll, last_event)
    return Result(
        batch_jobs(sub),
        gap / max(1, len(clusters)),
        from_submit / max(1, len(clusters)),
        makespan,
        wall,
        {k: 1000.0 * v / max(1, tasks) for k, v in counts.items()},
        per_poll,
    )


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
        procs.append(
            subprocess.Popen(
                [mpiexec, "-n", str(ranks), sys.executable, "-m", "pilot", "run", "--jobstate-log", "c.dag"],
                cwd=os.path.join(tmp, f"floor-{c}"),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
    if any(p.wait() for p in procs):
        sys.exit("a pilot run of the floor failed")
    gap = sum(
        min(times(os.path.join(tmp, f"floor-{c}", "jobstate.log"), "EXECUTE").values()) - launched[c]
        for c in range(count)
    )
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


def hyperqueue(tmp: str, shape: str, count: int, tasks: int, cores: int) -> tuple[float, float, float] | None:
    """The same shape on HyperQueue (pip install hyperqueue: its LocalCluster, one worker of ``cores`` cores):
    a job of ``tasks`` tasks per cluster, submitted as it becomes ready (a chain: when the client learns the one
    before ended; a fan: all at once); seconds per cluster from ready (a chain: the last task of the one before
    ended; a fan: the submission of the first) to its first task's start, as pilot's are measured, and from its
    submission; and the chain as one job whose clusters' tasks depend on the one before's, which HyperQueue's
    server releases itself (nan for the fan). Each task writes its start and end times (a shell's start counts
    against it). None without the package."""
    try:
        from hyperqueue import Job, LocalCluster
        from hyperqueue.cluster import WorkerConfig
    except ImportError:
        return None
    d = os.path.join(tmp, f"hq-{shape}")
    os.makedirs(d)

    def add(job: Job, c: int, deps: Sequence[Any] = ()) -> list[Any]:
        return [
            job.program(
                ["/bin/sh", "-c", f"date +%s.%N > {d}/c{c}t{t}.start; date +%s.%N > {d}/c{c}t{t}.end"],
                deps=deps,
                cwd=d,
                stdout=None,
                stderr=None,
            )  # its default: N.stdout in the caller's cwd
            for t in range(tasks)
        ]

    def alone(c: int) -> Job:
        job = Job()
        add(job, c)
        return job

    def stamp(c: int, t: int, what: str) -> float:
        with open(os.path.join(d, f"c{c}t{t}.{what}"), encoding="utf-8") as fh:
            return float(fh.read())

    def gap(first: int, ready: Callable[[int], float]) -> float:
        return (
            sum(min(stamp(c, t, "start") for t in range(tasks)) - ready(c) for c in range(first, first + count)) / count
        )

    def after(c: int) -> float:
        return max(stamp(c - 1, t, "end") for t in range(tasks))

    with (
        quiet_stdout(),
        LocalCluster(os.path.join(tmp, f"hq-{shape}-server"), WorkerConfig(cores=cores)) as cluster,
        contextlib.redirect_stderr(io.StringIO()),
    ):  # its progress bars
        client = cluster.client()
        client.wait_for_jobs([client.submit(alone(-1))])  # the worker is up
        fan_ready = time.time()
        submitted = [fan_ready] * count
        if shape == "chain":
            for c in range(count):
                submitted[c] = time.time()
                client.wait_for_jobs([client.submit(alone(c))])
            one, deps = Job(), []
            for c in range(count, 2 * count):
                deps = add(one, c, deps)
            whole = time.time()
            client.wait_for_jobs([client.submit(one)])
        else:
            client.wait_for_jobs([client.submit(alone(c)) for c in range(count)])
    if shape == "chain":
        return (
            gap(0, lambda c: after(c) if c else submitted[c]),
            gap(0, lambda c: submitted[c]),
            gap(count, lambda c: after(c) if c > count else whole),
        )
    return gap(0, lambda c: fan_ready), gap(0, lambda c: fan_ready), float("nan")


@contextlib.contextmanager
def kept(keep: str | None, name: str) -> Iterator[str]:
    """A fresh directory for one run: ``keep/name`` when kept, else a temporary one."""
    if keep is None:
        with tempfile.TemporaryDirectory(prefix="pilot-latebinding-") as tmp:
            yield tmp
    else:
        path = os.path.join(keep, name)
        os.makedirs(path)
        yield path


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b else "-"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--site", default="local")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="site keys, as pilot submit --set")
    p.add_argument("--pilots", type=int, default=2)
    p.add_argument("--pilot-nodes", type=int, default=1)
    p.add_argument("--tasks", type=int, default=2, help="tasks per cluster (default 2)")
    p.add_argument("--ranks", type=int, default=3, help="ranks of a cluster in the floor (default 3)")
    p.add_argument("--repeat", type=int, default=1, help="runs of everything, one after the other; medians (default 1)")
    p.add_argument("--poll", type=float, default=0.2, help="the driver's seconds between queue polls (default 0.2)")
    p.add_argument("--keep", metavar="DIR", help="keep each run's submit directories and scheduler call logs here")
    ns = p.parse_args()
    if ns.repeat < 1 or ns.pilots < 1 or ns.poll <= 0:
        p.error("--repeat and --pilots are at least 1, --poll more than 0")
    modes = ("a batch job per cluster", f"--pilots {ns.pilots}")
    for shape, count in (("chain", 10), ("fan", 20)):
        got: dict[str, list[Result]] = {m: [] for m in modes}
        hq: list[tuple[float, float, float]] = []
        least: list[float] = []
        for r in range(ns.repeat):
            with kept(ns.keep, f"{shape}-{r + 1}") as tmp:
                wf = workflow(os.path.join(tmp, f"{shape}.yml"), shape, count, ns.tasks)
                got[modes[0]].append(run(ns.site, ns.set, wf, os.path.join(tmp, f"{shape}-per-cluster"), [], ns.poll))
                got[modes[1]].append(
                    run(
                        ns.site,
                        ns.set,
                        wf,
                        os.path.join(tmp, f"{shape}-pilots"),
                        ["--pilots", str(ns.pilots), "--pilot-nodes", str(ns.pilot_nodes)],
                        ns.poll,
                    )
                )
                h = hyperqueue(tmp, shape, count, ns.tasks, ns.ranks - 1)
                if h is not None:
                    hq.append(h)
                if shape == "fan":
                    least.append(floor(tmp, count, ns.tasks, ns.ranks))
            print(
                f"  [{shape} run {r + 1}: gap {' / '.join(f'{got[m][-1].gap:.3f}' for m in modes)} s, HyperQueue "
                f"{f'{hq[-1][0]:.3f}' if hq else '-'} s; load {os.getloadavg()[0]:.1f}]",
                flush=True,
            )
        print(
            f"{shape} of {count} clusters on {ns.site}, median of {ns.repeat} run(s), per cluster from ready (its "
            f"parents' last task ended) to its first task:"
        )
        med = {}
        for m in modes:
            rs = got[m]
            med[m] = {
                k: median([getattr(x, k) for x in rs]) for k in ("jobs", "gap", "from_submit", "makespan", "wall")
            }
            med[m]["per_poll"] = max(x.per_poll for x in rs)
            cmds = {
                k: median([x.per_1000.get(k, 0.0) for x in rs]) for k in COUNTED if any(k in x.per_1000 for x in rs)
            }
            print(
                f"  {m:24s} batch jobs {med[m]['jobs']:3.0f}  gap {med[m]['gap']:6.3f} s (from its SUBMIT "
                f"{med[m]['from_submit']:6.3f} s)  makespan {med[m]['makespan']:6.2f} s  (submit wall "
                f"{med[m]['wall']:.1f} s)"
            )
            print(
                f"  {'':24s} scheduler commands per 1,000 tasks: "
                f"{', '.join(f'{k} {v:.0f}' for k, v in cmds.items()) or 'none'}; queue queries in one poll, "
                f"at most (all runs): {med[m]['per_poll']:.0f}"
            )
        late, base = med[modes[1]], med[modes[0]]
        print(
            f"  ratio pilots/per-cluster: gap {ratio(late['gap'], base['gap'])}, makespan "
            f"{ratio(late['makespan'], base['makespan'])}; target: at most {ns.pilots} batch jobs "
            f"({'met' if late['jobs'] <= ns.pilots else 'NOT met'}), gap <= {GAP_TARGET} s "
            f"({'met' if late['gap'] <= GAP_TARGET else 'NOT met'})"
        )
        print(
            f"  HyperQueue, one worker of {ns.ranks - 1} cores: "
            + (
                f"gap {median([h[0] for h in hq]):6.3f} s per cluster (from its submission "
                f"{median([h[1] for h in hq]):6.3f} s); pilots/HyperQueue {ratio(late['gap'], median([h[0] for h in hq]))}"
                + (
                    f"; the chain as one job of dependent tasks: gap {median([h[2] for h in hq]):6.3f} s"
                    if shape == "chain"
                    else ""
                )
                if hq
                else "not measured (pip install hyperqueue)"
            )
        )
        if least:
            print(
                f"  floor: {count} clusters started at once by mpiexec here, no scheduler: gap {median(least):.2f} s "
                f"per cluster; pilots/floor {ratio(late['gap'], median(least))}"
            )


if __name__ == "__main__":
    main()
