"""Typed messages between the master (rank 0) and the workers.

Messages are named tuples: a class costs little to make (every rank builds
all of them at start, before MPI_Init). Over MPI a message travels as a plain
tuple of its fields, with its kind (its place in ``KINDS``) as the MPI tag:
pickle writes and reads a plain tuple of strings and numbers three times
faster than a class instance, which it must name, look up and rebuild through
``__reduce__``, and the master and the workers do that for every task. The worker's
``Hello`` carries ``PROTOCOL_VERSION`` and the master refuses a mismatch, so a
job that mixes two pilot versions (say, a stale install on some nodes) fails
at start instead of misbehaving later.

Annotations here are evaluated (no ``from __future__ import annotations``):
``NamedTuple`` would otherwise compile each string annotation at start.
"""

from collections.abc import Sequence
from typing import Any, NamedTuple

PROTOCOL_VERSION = 10
# Seconds between the SIGTERM and the SIGKILL a worker sends a task's process group on
# KillTask; the master waits that long, plus a margin, for the workers' answers.
KILL_GRACE = 3.0


class Hello(NamedTuple):
    """Worker -> master: registration with the host's resources."""

    version: int
    rank: int
    hostname: str
    memory_mb: int
    cpus: int
    gpu_ids: tuple[str, ...]
    pid: int
    cores: int = 0  # physical cores and sockets: where a multi-CPU task's CPUs are aligned (0: unknown)
    sockets: int = 0


class HostSetup(NamedTuple):
    """Master -> every worker: its rank on its host, and the host script if it is the one to run it (then it reports)."""

    script: str | None
    host_rank: int
    run_id: str = ""  # marks this run's task processes; those of an earlier run of the DAG are ended first
    end_stale: bool = True  # False with -n: another run of the same DAG may rightly be running
    # The DAG's key in those marks (pilot.runtime.startup.dag_key), made once by the master.
    dag_key: str = ""


class HostReady(NamedTuple):
    """Worker -> master, after a host script only: it started and exited 0 (or ``error`` says why not)."""

    hostname: str
    error: str | None = None


class RunTask(NamedTuple):
    """Master -> worker: run one attempt of a task.

    A worker may receive one while a task runs (prefetch): it queues it and
    starts it the moment the running task ends, so short tasks do not wait
    for a round trip to the master.
    """

    name: str
    argv: list[str]
    attempt: int
    memory: int = 0
    cpus: int = 1
    gpu_ids: tuple[str, ...] = ()
    pegasus_id: str | None = None
    pipe_forwards: Sequence[tuple[str, str]] = ()
    file_forwards: Sequence[tuple[str, str]] = ()
    transformation: str | None = None
    dax_id: str | None = None
    cpu_ids: tuple[int, ...] = ()  # CPUs given to a multi-CPU task (PMC_AFFINITY, --set-affinity)
    # Run only if the task named here, the one before it on this worker, succeeds;
    # otherwise give it back (Recalled) unstarted. Saves a chain a round trip per step.
    after: str | None = None
    # Other tasks wait for this one: its result wakes the master at once. A result
    # that only frees this worker, which has more queued, can wait for the master's
    # next look (see pilot.runtime.transport on rings).
    urgent: bool = True
    cwd: str | None = None  # the task's working directory (#pilot cwd=); None: the worker's own
    stdio: tuple[str, str, str] | None = None  # files for stdin, stdout, stderr ("": the usual), from its cwd
    env: tuple[tuple[str, str], ...] | None = None  # variables set on top of the worker's environment (#pilot env)
    # The DAG the task is of, when the master runs several (``pilot run --inbox``): its stdio files go next to
    # that DAG, not the worker's own. None: the worker's own DAG.
    dag: str | None = None
    # (inputs, outputs, optional outputs) relative to ``cwd``, from --task-files: the task runs in a directory of
    # its own on node-local storage (pilot.runtime.taskdir, which says why the master sends them); None: it runs
    # in ``cwd``
    files: tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]] | None = None


class Resume(NamedTuple):
    """Master -> worker: go on with your queued tasks.

    With -m, a worker whose task failed waits for this before it starts a
    prefetched task: that failure may be the one that stops the run, and then
    the queued tasks are recalled instead.
    """


class TaskResult(NamedTuple):
    """Worker -> master: how an attempt ended.

    ``status`` is the exit code, or minus the signal number. ``forwards``
    holds (destination, data) pairs of I/O forwarding, only for status 0.
    ``error`` explains failures that are not the task's own (spawn failure,
    forwarding source missing or too large).
    """

    name: str
    status: int
    start: float
    duration: float
    forwards: Sequence[tuple[str, bytes]] = ()
    error: str | None = None
    stdout: str | None = None
    stderr: str | None = None


class Recall(NamedTuple):
    """Master -> worker: give back a prefetched task that has not started."""

    name: str


class Recalled(NamedTuple):
    """Worker -> master: this prefetched task was dropped unstarted (recall or abort)."""

    name: str


class KillTask(NamedTuple):
    """Master -> worker: end the running task (SIGTERM to its group, SIGKILL ``KILL_GRACE`` s later) and drop queued ones."""

    reason: str


class Shutdown(NamedTuple):
    """Master -> worker: no more work; clean up and say Bye."""

    reason: str = ""


class Bye(NamedTuple):
    """Worker -> master: stdio files closed, host script stopped; safe to merge."""

    rank: int


class WorkerFailed(NamedTuple):
    """Worker -> master: an error on the worker.

    Not ``fatal``: reported beside a failed task (its stdio files could not be
    opened). ``fatal``: the worker cannot run tasks any more; it still answers
    Recall and Shutdown, and the master ends the run.
    """

    rank: int
    error: str
    fatal: bool = False


Message = (
    Hello
    | HostSetup
    | HostReady
    | RunTask
    | Resume
    | TaskResult
    | Recall
    | Recalled
    | KillTask
    | Shutdown
    | Bye
    | WorkerFailed
)

# Every message class, in a fixed order: a message's place here is its MPI tag.
# Hello stays first: a rank of another pilot version is still understood far
# enough to be told apart by Hello.version.
KINDS: tuple[type, ...] = (
    Hello,
    HostSetup,
    HostReady,
    RunTask,
    Resume,
    TaskResult,
    Recall,
    Recalled,
    KillTask,
    Shutdown,
    Bye,
    WorkerFailed,
)
KIND_OF: dict[type, int] = {cls: tag for tag, cls in enumerate(KINDS)}


def to_wire(msg: Message) -> tuple[int, tuple[Any, ...]]:
    """(MPI tag, plain tuple of fields) for sending ``msg``."""
    return KIND_OF[type(msg)], tuple(msg)


def from_wire(tag: int, fields: tuple[Any, ...]) -> Message:
    """The message whose tag and fields came in.

    ``tuple.__new__`` takes the fields as they are (``_make`` would also count them, in
    Python, for every message): ranks of different versions are told apart by
    ``Hello.version`` instead.
    """
    return tuple.__new__(KINDS[tag], fields)
