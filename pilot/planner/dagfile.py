"""A cluster's PMC DAG: its TASK lines from the planner's jobs, streamed to the file, and its shape.

A cluster may hold a million jobs, so nothing here builds the DAG's text or
parses it back: lines go to the file as they are made, a few thousand at a
time, and what the planner cannot vouch for is checked by the DAG parser
itself, once per distinct piece: the task options and executable a job gets
from its profiles and catalog entry, and each ``#pilot`` note. A job's arguments were quoted word
by word when it was read (Job.args_line), so they always split back into
those words; task ids are checked to be unique as they are written. Per-job
tables are lists by Job.index (unique within a plan) rather than dicts.
"""

from __future__ import annotations

import collections
import functools
import itertools
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

from pilot.dag.lexer import quote_arg
from pilot.dag.model import NO_DAX_ID
from pilot.dag.parser import parse_dag
from pilot.dag.writer import (
    ContextNotes,
    annotation,
    details,
    edge_lines,
    plain_task,
    plain_task_text,
    task_record,
    task_text,
)
from pilot.errors import ConfigError, DagError
from pilot.planner.model import INPUT_FILE, Cluster, Job
from pilot.util.safeopen import open_file

if TYPE_CHECKING:  # resolve builds its templates with this module's TASK heads and requests
    from pilot.planner.resolve import Template

# The profiles each TASK option comes from, the first one set. As Pegasus' PMC code generator does (since
# 4.6), -m and -c fall back to the job's memory (MB) and cores where the pmc_* keys are unset, so a task
# asks the pilot for what it asked Pegasus. PMC has no GPU option; pilot's -g carries the gpus profile.
REQUESTS = (
    ("-m", ("pmc_request_memory", "memory")),
    ("-c", ("pmc_request_cpus", "cores")),
    ("-p", ("pmc_priority",)),
    ("-g", ("gpus",)),
)
REQUEST_KEYS = tuple(k for _, keys in REQUESTS for k in keys)
WRITE_BUFFER = 1 << 20
CHUNK = 4096  # jobs' lines, or EDGE lines, joined per write


def requested(profiles: Mapping[str, str], keys: tuple[str, ...]) -> tuple[str, str] | None:
    """(value, profile key) of the first of ``keys`` the job sets, or None."""
    for key in keys:
        value = profiles.get(key)
        if value not in (None, ""):
            return str(value), key
    return None


def task_options(profiles: Mapping[str, str]) -> list[str]:
    """The PMC options of a job's TASK line, from its resource and pmc_* profiles (see REQUESTS)."""
    return list(_options(tuple(map(profiles.get, REQUEST_KEYS)), profiles.get("pmc_task_arguments")))


@functools.lru_cache(maxsize=1024)
def _options(values: tuple, extra: str | None) -> tuple[str, ...]:
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


def task_head(job: Job, pfn: str, profiles: Mapping[str, str], wrapper: Sequence[str] | None) -> str:
    """A compute job's TASK words between its id and its arguments: options, container wrapper, executable;
    checked by the DAG parser (a ConfigError naming the job if it refuses them)."""
    head = " ".join([*task_options(profiles), *(quote_arg(w) for w in wrapper or ()), quote_arg(pfn)])
    message = _refusal(("TASK t " + head,))
    if message is not None:
        raise ConfigError(f"{job.where}: the PMC task made from this job is invalid: {message}")
    return head


def input_file(cdir: str, job: Job) -> str:
    """Where a data job's input (pegasus-transfer's JSON list, registration's map) is written: beside its DAG,
    as pegasus-plan writes ``<job>.in`` into the submit directory."""
    return os.path.join(os.path.abspath(cdir), job.id + ".in")


def with_credentials(
    env: tuple[tuple[str, str], ...] | None, credentials: tuple[tuple[str, str], ...] | None
) -> tuple[tuple[str, str], ...] | None:
    """A data job's variables: its transformation's env profiles, then the credentials pegasus-transfer reads
    (the planner's, set last). ``credentials`` itself when the transformation has none."""
    if not env:
        return credentials
    merged = dict(env)
    merged.update(credentials or ())
    return tuple(merged.items())


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


def task_request(profiles: Mapping[str, str]) -> tuple[int, int, int]:
    """The CPUs, memory (MB) and GPUs a job's task asks for, as pilot run reads its TASK line.

    The options are read by the DAG parser itself, so what the submit
    directory reports is what the task is scheduled with, ``-c``/``-m``/``-g``
    in pmc_task_arguments and rounding included.
    """
    return _request(tuple(map(profiles.get, REQUEST_KEYS)), profiles.get("pmc_task_arguments"))


@functools.lru_cache(maxsize=1024)
def _request(values: tuple, extra: str | None) -> tuple[int, int, int]:
    """Cached: a workflow's jobs share a handful of requests, and parsing each of millions would cost seconds."""
    profiles = {key: value for key, value in zip(REQUEST_KEYS, values) if value is not None}
    if extra is not None:
        profiles["pmc_task_arguments"] = extra
    task = next(iter(parse_dag([" ".join(["TASK", "t", *task_options(profiles), "x"])]).tasks.values()))
    return max(1, task.cpus), task.memory, task.gpus


class _Checks:
    """What the DAG parser has accepted: note lines and TASK heads, each parsed once (``_refusal``)."""

    def __init__(self) -> None:
        self.notes: set[str] = set()

    def check(self, lines: list[str], job: Job) -> None:
        message = _refusal(tuple(lines))
        if message is not None:
            raise ConfigError(f"{job.where}: the PMC task made from this job is invalid: {message}")

    def note(self, note: str, job: Job) -> None:
        """A ``#pilot`` note line, checked before a TASK line (most tasks repeat the last task's notes)."""
        if note not in self.notes:
            self.check([note, "TASK t x"], job)
            self.notes.add(note)


@functools.lru_cache(maxsize=4096)
def _refusal(lines: tuple[str, ...]) -> str | None:
    """Why the DAG parser refuses ``lines`` (None: it accepts them). Kept across clusters: a plan of thousands
    writes the same notes and TASK heads into each."""
    try:  # as the file's reader will see them: a newline inside a value starts another line
        parse_dag([piece for line in lines for piece in line.splitlines(True)])
    except DagError as exc:
        return exc.message
    return None


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


def write_dag(path: str, cluster: Cluster, templates: Iterable[Template], cdir: str = ".") -> None:
    """Write the cluster's PMC DAG to ``path``; a job's known runtime goes on a ``#pilot runtime=`` line, and the
    directory its jobs run in and the variables of its env profiles on ``#pilot cwd=`` and ``#pilot env`` lines
    where they change (PMC skips all three). A TASK that the DAG parser would refuse is a ConfigError naming
    the job it was made from."""
    with open_file(
        path, "w", encoding="utf-8", errors="surrogateescape", buffering=WRITE_BUFFER
    ) as fh:  # bytes PMC passes
        fh.writelines(dag_lines(cluster, templates, cdir))


def dag_lines(cluster: Cluster, templates: Iterable[Template], cdir: str = ".") -> Iterator[str]:
    """The text of write_dag, CHUNK jobs' lines at a time, then the EDGE lines, spelled by pilot.dag.writer.

    ``templates`` are the jobs' by their places (planner.resolve): each job's label, environment, runtime and
    checked TASK head come from its template, which the jobs of a transformation without profiles share."""
    checks = _Checks()
    ids: list[str] = []
    known: set[str] = set()  # the task ids written (a set grows by one each, or the id is a duplicate)
    notes = ContextNotes()
    cwd_now: object = None  # the cwd and env the notes were last asked about (skip asking while they stay these)
    env_now: object = None
    runtime_notes: dict[float, list[str]] = {}
    texts: list[str] = []  # jobs' lines, joined CHUNK jobs at a time: a write each would cost more
    try:
        for n, (job, template) in enumerate(zip(cluster.jobs, templates), 1):
            if len(texts) == CHUNK:
                yield "".join(texts)
                texts.clear()
            data = job.command is not None  # a data job: the pilot's environment, a command of the planner's
            job_env = template.env
            before: Sequence[str] = ()
            if job.cwd is not cwd_now or job_env is not env_now:  # notes before the job's '#@' line, if any
                before = notes.context(job.cwd, job_env)
                cwd_now, env_now = job.cwd, job_env
            runtime = template.runtime
            after: Sequence[str]
            if job.stdio is not None:
                after = details(runtime, job.stdio)
            elif runtime is None:
                after = ()
            elif (known_after := runtime_notes.get(runtime)) is not None:
                after = known_after
            else:
                after = runtime_notes[runtime] = details(runtime, None)
            if before or after:
                for note in (*before, *after):
                    checks.note(note, job)
            tid = job.task_id
            known.add(tid)
            if len(known) < n:
                raise _duplicate(cluster, job, tid)
            qid = quote_arg(tid)
            ids.append(qid)
            label = template.label
            if data:
                line = data_task_line(job, cdir)
                checks.check([line], job)
            else:
                head = template.head
                if not (before or after):  # most jobs
                    texts.append(plain_task(n, label, job.id, qid, head, job.args_line))
                    continue
                line = task_record(qid, f"{head} {job.args_line}" if job.args_line else head)
            dax_id = NO_DAX_ID if data else job.id  # a data job runs no task of the workflow's, as in Pegasus
            if before or after:
                texts.append(task_text(list(before), annotation(n, label, dax_id), list(after), line))
            else:
                texts.append(plain_task_text(n, label, dax_id, line))
    except Exception:
        yield "".join(texts)  # the jobs before the one refused, as a writer of a line at a time leaves the file
        raise
    yield "".join(texts)
    known.clear()
    yield from _edge_lines(cluster, ids)


def _duplicate(cluster: Cluster, job: Job, tid: str) -> ConfigError:
    first = next(other for other in cluster.jobs if other.task_id == tid)
    return ConfigError(
        f"{job.where}: the PMC task made from this job is invalid: duplicate task {tid!r} "
        f"(the task of job {first.id} has that id too)"
    )


def _edge_lines(cluster: Cluster, ids: list[str]) -> Iterator[str]:
    """The cluster's EDGE lines, CHUNK at a time (a job may have a child per root of the workflow): each edge
    between two of its members, ``ids`` their task ids."""
    jobs = cluster.jobs
    where = _positions(cluster)
    if where is None:
        member = _member_of(cluster)
        edges = ((ids[k], ids[c]) for k, job in enumerate(jobs) for c in map(member, job.children) if c >= 0)
    else:
        size = len(where)
        edges = (
            (ids[k], ids[c])
            for k, job in enumerate(jobs)
            for child in job.children
            if child.index < size and (c := where[child.index]) >= 0 and jobs[c] is child
        )
    while chunk := list(itertools.islice(edges, CHUNK)):
        yield edge_lines(chunk)


class Shape(NamedTuple):
    """What the plan says of a cluster's DAG besides its tasks."""

    width: int  # most tasks that can run at once (by level)
    critical_path: float | None  # None: a runtime unknown
    roots: int  # tasks with no parent inside the cluster: those ready when it starts


def shape(cluster: Cluster, runtimes: Sequence[float | None]) -> Shape:
    """The cluster's Shape, ``runtimes`` its jobs' by their places. Its jobs are in topological order inside it
    (or independent): a parent placed after its child counts as not started, as graphs.longest_paths has it
    (whose sums this makes, in one pass without a list of parents per job)."""
    timed = None not in runtimes
    jobs = cluster.jobs
    level = [0] * len(jobs)
    finish = [0.0] * len(jobs)  # runtimes are never negative: a chain starts at 0 or its latest parent's end
    roots = 0
    where = _positions(cluster)
    member = _member_of(cluster) if where is None else None
    size = 0 if where is None else len(where)
    for k, job in enumerate(jobs):
        top, start, inner = 0, 0.0, False
        for p in job.parents:  # its parents inside the cluster (as _inner_parents, without a list each)
            if member is not None:
                m = member(p)
            elif p.index >= size or (m := where[p.index]) < 0 or jobs[m] is not p:  # type: ignore[index]  # where is given whenever member is None
                m = -1
            if m < 0:
                continue
            inner = True
            if level[m] > top:
                top = level[m]
            if finish[m] > start:
                start = finish[m]
        level[k] = top + 1
        if not inner:
            roots += 1
        if timed:
            finish[k] = start + runtimes[k]  # type: ignore[operator]  # runtimes is given whenever timed is true
    width = max(collections.Counter(level).values(), default=0)
    return Shape(width, max(finish, default=0.0) if timed else None, roots)


def roots_of(cluster: Cluster) -> int:
    """Tasks of the cluster with no parent inside it: those ready when it starts."""
    return sum(1 for inner in _inner_parents(cluster) if not inner)


def _inner_parents(cluster: Cluster) -> Iterator[list[int]]:
    """Each job's parents inside the cluster, by their places there, job by job."""
    jobs = cluster.jobs
    where = _positions(cluster)
    if where is None:
        member = _member_of(cluster)
        for job in jobs:
            yield [m for p in job.parents if (m := member(p)) >= 0]
        return
    size = len(where)
    for job in jobs:
        yield [m for p in job.parents if p.index < size and (m := where[p.index]) >= 0 and jobs[m] is p]
