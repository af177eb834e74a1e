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
from collections.abc import Callable, Iterator, Sequence
from typing import NamedTuple

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
from pilot.planner.model import INPUT_FILE, Cluster, Job, tx_key_of
from pilot.planner.profiles import ProfileResolver
from pilot.util.safeopen import open_file

# The profiles each TASK option comes from, the first one set. As Pegasus' PMC code generator does (since
# 4.6), -m and -c fall back to the job's memory (MB) and cores where the pmc_* keys are unset, so a task
# asks the pilot for what it asked Pegasus. PMC has no GPU option; pilot's -g carries the gpus profile.
REQUESTS = (("-m", ("pmc_request_memory", "memory")), ("-c", ("pmc_request_cpus", "cores")),
            ("-p", ("pmc_priority",)), ("-g", ("gpus",)))
REQUEST_KEYS = tuple(k for _, keys in REQUESTS for k in keys)
WRITE_BUFFER = 1 << 20
CHUNK = 4096  # jobs' lines, or EDGE lines, joined per write


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


def _with_credentials(env: tuple[tuple[str, str], ...] | None,
                      credentials: tuple[tuple[str, str], ...] | None) -> tuple[tuple[str, str], ...] | None:
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


def write_dag(path: str, cluster: Cluster, resolver: ProfileResolver, pfn_of,
              runtimes: Sequence[float | None] | None = None, cdir: str = ".") -> None:
    """Write the cluster's PMC DAG to ``path``; a job's known runtime goes on a ``#pilot runtime=`` line, and the
    directory its jobs run in and the variables of its env profiles on ``#pilot cwd=`` and ``#pilot env`` lines
    where they change (PMC skips all three). A TASK that the DAG parser would refuse is a ConfigError naming
    the job it was made from."""
    with open_file(path, "w", encoding="utf-8", errors="surrogateescape", buffering=WRITE_BUFFER) as fh:  # bytes PMC passes
        fh.writelines(dag_lines(cluster, resolver, pfn_of, runtimes, cdir))


def dag_lines(cluster: Cluster, resolver: ProfileResolver, pfn_of, runtimes: Sequence[float | None] | None = None,
              cdir: str = ".") -> Iterator[str]:
    """The text of write_dag, CHUNK jobs' lines at a time, then the EDGE lines, spelled by pilot.dag.writer.

    ``pfn_of(job, site)`` is the job's executable; ``runtimes`` the jobs' runtimes by their places. A cluster
    may hold a million jobs, most of them alike: the jobs of a transformation that have no profiles of their
    own or container share its environment, executable and TASK head, looked up once (``_Heads.plain``)."""
    checks = _Checks()
    heads = _Heads(resolver, cluster.site, pfn_of, checks)
    plains = heads.plains
    ids: list[str] = []
    known: set[str] = set()  # the task ids written (a set grows by one each, or the id is a duplicate)
    notes = ContextNotes()
    cwd_now: object = None  # the cwd and env the notes were last asked about (skip asking while they stay these)
    env_now: object = None
    data_env = resolver.data_env  # the data jobs' variables (pegasus-transfer's credentials), or None
    data_envs: dict[tuple, tuple[tuple[str, str], ...] | None] = {}  # a data transformation's, with those
    runtime_notes: dict[float, list[str]] = {}
    site = cluster.site
    texts: list[str] = []  # jobs' lines, joined CHUNK jobs at a time: a write each would cost more
    try:
        for n, job in enumerate(cluster.jobs, 1):
            if len(texts) == CHUNK:
                yield "".join(texts)
                texts.clear()
            data = job.command is not None  # a data job: the pilot's environment, a command of the planner's
            plain = None  # or, for a job with no profiles of its own or container, its transformation's values
            if not (data or job.profiles or job.wrapper is not None):
                plain = plains.get(tx_key_of(job)) or heads.plain(job)
            if data:  # its transformation's (pegasus::transfer, ...) variables with pegasus-transfer's credentials
                job_env = data_envs.get(job.tx_key, False)
                if job_env is False:
                    job_env = data_envs[job.tx_key] = _with_credentials(resolver.env(job, site), data_env)
            else:
                job_env = plain.env if plain is not None else resolver.env(job, site)
            before = ()
            if job.cwd is not cwd_now or job_env is not env_now:  # notes before the job's '#@' line, if any
                before = notes.context(job.cwd, job_env)
                cwd_now, env_now = job.cwd, job_env
            runtime = runtimes[n - 1] if runtimes is not None else None
            if job.stdio is not None:
                after = details(runtime, job.stdio)
            elif runtime is None:
                after = ()
            elif (after := runtime_notes.get(runtime)) is None:
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
            label = job.tx_label if plain is None else plain.label
            if data:
                line = data_task_line(job, cdir)
                checks.check([line], job)
            else:
                head = heads.of(job) if plain is None else plain.head or heads.plain_head(job, plain)
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
    return ConfigError(f"{job.where}: the PMC task made from this job is invalid: duplicate task {tid!r} "
                       f"(the task of job {first.id} has that id too)")


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
        edges = ((ids[k], ids[c]) for k, job in enumerate(jobs) for child in job.children
                 if child.index < size and (c := where[child.index]) >= 0 and jobs[c] is child)
    while chunk := list(itertools.islice(edges, CHUNK)):
        yield edge_lines(chunk)


class _Plain:
    """What the jobs of a transformation that have no profiles of their own or container share on a site: their
    environment, the transformation's label, and their TASK head (None until the first of them is written)."""

    __slots__ = ("env", "label", "head")

    def __init__(self, env: tuple[tuple[str, str], ...] | None, label: str) -> None:
        self.env, self.label = env, label
        self.head: str | None = None


class _Heads:
    """The TASK words between a job's id and its arguments (``_head``), each distinct one checked by the DAG
    parser once; and a transformation's shared values (``_Plain``) on the cluster's site."""

    def __init__(self, resolver: ProfileResolver, site: str, pfn_of, checks: _Checks) -> None:
        self.resolver, self.site, self.pfn_of, self.checks = resolver, site, pfn_of, checks
        self.heads: dict[tuple, str] = {}  # (options, wrapper, pfn) -> head
        self.plains: dict[tuple, _Plain] = {}  # transformation -> its shared values

    def plain(self, job: Job) -> _Plain:
        plain = self.plains[job.tx_key] = _Plain(self.resolver.env(job, self.site), job.tx_label)
        return plain

    def plain_head(self, job: Job, plain: _Plain) -> str:
        """The head of the first job of ``plain``'s transformation, which its others share."""
        plain.head = self.of(job)
        return plain.head

    def of(self, job: Job) -> str:
        profiles = self.resolver.pegasus(job, self.site)
        pfn = self.pfn_of(job, self.site)
        key = (tuple(map(profiles.get, REQUEST_KEYS)), profiles.get("pmc_task_arguments"),
               tuple(job.wrapper) if job.wrapper else None, pfn)
        head = self.heads.get(key)
        if head is None:
            head = " ".join(_head(job, pfn, profiles))
            self.checks.check(["TASK t " + head], job)
            self.heads[key] = head
        return head


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
