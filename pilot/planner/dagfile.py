"""A cluster's PMC DAG: its TASK lines from the planner's jobs, streamed to the file, and its shape.

A cluster may hold a million jobs, so nothing here builds the DAG's text or
parses it back: lines go to the file as they are made, and what the planner
cannot vouch for is checked by the DAG parser itself, once per distinct
piece: the task options and executable a job gets from its profiles and
catalog entry, and each ``#pilot`` note. A job's arguments were quoted word
by word when it was read (Job.args_line), so they always split back into
those words; task ids are checked to be unique as they are written. Per-job
tables are lists by Job.index (unique within a plan) rather than dicts.
"""

from __future__ import annotations

import collections
import functools
import os
from typing import Callable, Iterator

from pilot.dag.lexer import quote_arg
from pilot.dag.parser import parse_dag
from pilot.dag.writer import ContextNotes, annotation, details, edge_record, task_record, task_text
from pilot.errors import ConfigError, DagError
from pilot.planner.clustering import Cluster
from pilot.planner.model import Job
from pilot.planner.profiles import ProfileResolver
from pilot.planner.staging import INPUT_FILE
from pilot.util import graphs

# The profiles each TASK option comes from, the first one set. As Pegasus' PMC code generator does (since
# 4.6), -m and -c fall back to the job's memory (MB) and cores where the pmc_* keys are unset, so a task
# asks the pilot for what it asked Pegasus. PMC has no GPU option; pilot's -g carries the gpus profile.
REQUESTS = (("-m", ("pmc_request_memory", "memory")), ("-c", ("pmc_request_cpus", "cores")),
            ("-p", ("pmc_priority",)), ("-g", ("gpus",)))
REQUEST_KEYS = tuple(k for _, keys in REQUESTS for k in keys)
WRITE_BUFFER = 1 << 20


def requested(profiles: dict[str, str], keys: tuple[str, ...]) -> tuple[str, str] | None:
    """(value, profile key) of the first of ``keys`` the job sets, or None."""
    for key in keys:
        value = profiles.get(key)
        if value not in (None, ""):
            return str(value), key
    return None


def task_options(profiles: dict[str, str]) -> list[str]:
    """The PMC options of a job's TASK line, from its resource and pmc_* profiles (see REQUESTS)."""
    return list(_options(tuple(map(profiles.get, REQUEST_KEYS)), profiles.get("pmc_task_arguments")))


@functools.lru_cache(maxsize=1024)
def _options(values: tuple, extra) -> tuple[str, ...]:
    """Cached like _request: the jobs of a workflow share a handful of requests."""
    profiles = dict(zip(REQUEST_KEYS, values))
    parts: list[str] = []
    for opt, keys in REQUESTS:
        got = requested(profiles, keys)
        if got is not None and not (opt == "-g" and float(got[0]) == 0):
            parts += [opt, quote_arg(got[0])]
    if extra:
        parts.append(extra)  # verbatim: PMC task options such as -t 3 or -f VAR=FILE
    return tuple(parts)


def _head(job: Job, pfn: str, profiles: dict[str, str]) -> list[str]:
    """A compute job's TASK words between its id and its arguments: options, container wrapper, executable."""
    return [*task_options(profiles), *(quote_arg(w) for w in job.wrapper or ()), quote_arg(pfn)]


def input_file(cdir: str, job: Job) -> str:
    """Where a data job's input (pegasus-transfer's JSON list, registration's map) is written: beside its DAG,
    as pegasus-plan writes ``<job>.in`` into the submit directory."""
    return os.path.join(os.path.abspath(cdir), job.id + ".in")


def data_task_line(job: Job, cdir: str) -> str:
    """A data job's TASK line: its command, with its input file's path."""
    assert job.command is not None
    path = input_file(cdir, job)
    return task_record(quote_arg(job.task_id), " ".join(quote_arg(path if a == INPUT_FILE else a) for a in job.command))


def command_text(job: Job) -> str:
    """The job's arguments as monitoring shows them (a data job: its whole command)."""
    if job.command is None:
        return job.args_line
    return " ".join(quote_arg(a) for a in job.command)


def task_request(profiles: dict[str, str]) -> tuple[int, int, int]:
    """The CPUs, memory (MB) and GPUs a job's task asks for, as pilot run reads its TASK line.

    The options are read by the DAG parser itself, so what the submit
    directory reports is what the task is scheduled with, ``-c``/``-m``/``-g``
    in pmc_task_arguments and rounding included.
    """
    return _request(tuple(map(profiles.get, REQUEST_KEYS)), profiles.get("pmc_task_arguments"))


@functools.lru_cache(maxsize=1024)
def _request(values: tuple, extra) -> tuple[int, int, int]:
    """Cached: a workflow's jobs share a handful of requests, and parsing each of millions would cost seconds."""
    profiles = dict(zip(REQUEST_KEYS, values))
    profiles["pmc_task_arguments"] = extra
    task = next(iter(parse_dag([" ".join(["TASK", "t", *task_options(profiles), "x"])]).tasks.values()))
    return max(1, task.cpus), task.memory, task.gpus


class _Checks:
    """What the DAG parser has accepted so far: note lines and TASK heads, each parsed once."""

    def __init__(self) -> None:
        self.seen: set[str] = set()

    def check(self, lines: list[str], job: Job) -> None:
        key = "\n".join(lines)
        if key in self.seen:
            return
        try:  # as the file's reader will see them: a newline inside a value starts another line
            parse_dag([piece for line in lines for piece in line.splitlines(True)])
        except DagError as exc:
            raise ConfigError(f"{job.where}: the PMC task made from this job is invalid: {exc.message}") from None
        self.seen.add(key)


def _positions(cluster: Cluster) -> list[int] | None:
    """Each member's place in the cluster by its Job.index (-1: not a member), or None when two members share
    an index (then callers fall back to tables keyed by the job object)."""
    size = 1 + max((j.index for j in cluster.jobs), default=-1)
    where = [-1] * size
    for k, job in enumerate(cluster.jobs):
        if where[job.index] >= 0:
            return None
        where[job.index] = k
    return where


def _member_of(cluster: Cluster) -> Callable[[Job], int]:
    """job -> its place in the cluster, -1 when it is not a member."""
    where = _positions(cluster)
    jobs = cluster.jobs
    if where is None:
        by_id = {id(job): k for k, job in enumerate(jobs)}
        return lambda job: by_id.get(id(job), -1)
    size = len(where)

    def member(job: Job) -> int:
        i = job.index
        k = where[i] if i < size else -1
        return k if k >= 0 and jobs[k] is job else -1

    return member


def write_dag(path: str, cluster: Cluster, resolver: ProfileResolver, pfn_of, runtime_of=None, cdir: str = ".") -> None:
    """Write the cluster's PMC DAG to ``path``; a job's known runtime goes on a ``#pilot runtime=`` line, and the
    directory its jobs run in and the variables of its env profiles on ``#pilot cwd=`` and ``#pilot env`` lines
    where they change (PMC skips all three). A TASK that the DAG parser would refuse is a ConfigError naming
    the job it was made from."""
    with open(path, "w", encoding="utf-8", errors="surrogateescape", buffering=WRITE_BUFFER) as fh:  # bytes PMC passes
        fh.writelines(dag_lines(cluster, resolver, pfn_of, runtime_of, cdir))


def dag_lines(cluster: Cluster, resolver: ProfileResolver, pfn_of, runtime_of=None, cdir: str = ".") -> Iterator[str]:
    """The text of write_dag, a job's lines at a time, then the EDGE lines, spelled by pilot.dag.writer."""
    checks = _Checks()
    ids: list[str] = []
    known: dict[str, int] = {}
    notes = ContextNotes()
    heads: dict[tuple, str] = {}  # (options, wrapper, pfn) -> the TASK words between id and arguments
    for n, job in enumerate(cluster.jobs, 1):
        job_env = None if job.command is not None else resolver.env(job, cluster.site)  # data jobs: the pilot's
        before = notes.context(job.cwd, job_env)  # notes before the job's '#@' line, and between it and its TASK
        after = details(runtime_of(job) if runtime_of is not None else None, job.stdio)
        for note in before + after:
            checks.check([note, "TASK t x"], job)
        tid = job.task_id
        if tid in known:
            raise ConfigError(f"{job.where}: the PMC task made from this job is invalid: duplicate task {tid!r} "
                              f"(the task of job {cluster.jobs[known[tid]].id} has that id too)")
        known[tid] = n - 1
        ids.append(quote_arg(tid))
        if job.command is not None:
            line = data_task_line(job, cdir)
            checks.check([line], job)
        else:
            profiles = resolver.pegasus(job, cluster.site)
            pfn = pfn_of(job, cluster.site)
            key = (tuple(map(profiles.get, REQUEST_KEYS)), profiles.get("pmc_task_arguments"),
                   tuple(job.wrapper) if job.wrapper else None, pfn)
            head = heads.get(key)
            if head is None:
                head = " ".join(_head(job, pfn, profiles))
                checks.check(["TASK t " + head], job)
                heads[key] = head
            line = task_record(ids[-1], f"{head} {job.args_line}" if job.args_line else head)
        yield task_text(before, annotation(n, job.tx_label, job.id), after, line)
    known.clear()
    member = _member_of(cluster)
    for k, job in enumerate(cluster.jobs):
        for child in job.children:
            c = member(child)
            if c >= 0:
                yield edge_record(ids[k], ids[c]) + "\n"


def width_and_path(cluster: Cluster, runtime_of) -> tuple[int, float | None]:
    """Most tasks of the cluster that can run at once (by level) and its critical path (None: a runtime unknown).
    Its jobs are in topological order inside it (or independent)."""
    member = _member_of(cluster)
    jobs = cluster.jobs

    def parents(k: int) -> list[int]:
        return [m for p in jobs[k].parents if (m := member(p)) >= 0]

    levels = graphs.longest_paths([1] * len(jobs), parents).finish
    width = max(collections.Counter(levels).values(), default=0)
    runtimes = [rt for rt in map(runtime_of, jobs) if rt is not None]
    if len(runtimes) < len(jobs):
        return width, None
    return width, max(graphs.longest_paths(runtimes, parents).finish, default=0.0)


def roots_of(cluster: Cluster) -> int:
    """Tasks of the cluster with no parent inside it: those ready when it starts."""
    member = _member_of(cluster)
    return sum(1 for job in cluster.jobs if not any(member(p) >= 0 for p in job.parents))
