"""Tasks that kill their worker: found after the job died, run alone to be sure, stopped after N crashes.

A task that kills the process that started it (``kill -9 $PPID``, the OOM
killer choosing the worker, a ``pkill`` of the wrong name) takes the whole job
down: the launcher ends every rank with SIGKILL, so nothing is written at the
time, and a rerun would start the same task and die the same way, forever.

So every worker keeps the name of the task it is running in a small file
mapped into its memory, ``DAG.running.<rank>`` (a store into the page cache,
no system call per task, which survives the SIGKILL of the process). A run
that ends normally leaves those files empty. The next run reads them at start:
the tasks named there were running when the job died. That does not say
which of them did it, nor whether a node failure or a ``scancel`` did, so they
become *suspects*: the run starts each of them with nothing else running (the
log line ``ALONE task``), before any other work. A suspect that ends is cleared
(``CLEAR task``); a job that dies while a suspect runs alone is that task's
crash (``CRASH task``). A task with ``--max-crashes`` crashes (default 2) is not
started again: it is failed with a line that says why, and the rest of the DAG
goes on as after any failed task. The record is ``DAG.crashes``, one line per
event, appended and kept across runs, so counts survive any number of kills.

Where the launcher lets the other ranks live on when one dies (Slurm's ``srun
--kill-on-bad-exit=0``; see docs/pmc-differences.md for what MPICH's mpiexec
does), a lost worker costs only its task: its watchdog appends the rank to
``DAG.lost`` (one file, so the master's look at it is one ``stat`` however
many workers there are). The master then knows which task's worker died,
counts that crash, starts the task again on another worker (a crash does not
use up ``--tries``) until it has ``--max-crashes`` of them, and gives the
tasks queued on the dead worker to others; the run goes on with one worker
less.
"""

from __future__ import annotations

import collections
import enum
import glob
import logging
import mmap
import os
import re
import signal
import sys
import time
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, BinaryIO

from pilot.dag.model import Dag, Task
from pilot.errors import DagError
from pilot.runtime.watchdog import lost_path
from pilot.util.safeopen import open_fd, open_file, read_at_most
from pilot.util.tail import Tail

if TYPE_CHECKING:  # the master's side only: every worker rank imports this module at start, for its Slot
    from pilot.monitor.events import RunEvents
    from pilot.runtime.engine import Engine
    from pilot.runtime.options import RunOptions
    from pilot.runtime.slotmatch import Matcher
    from pilot.runtime.slots import Slots

log = logging.getLogger("pilot.master")

SLOT_BYTES = 4096
MAX_LOG_BYTES = 1 << 24  # of the crash record read back; a line cut there is dropped as a torn one
_SLOT = re.compile(r"\.running\.(\d+)\Z")


class Event(str, enum.Enum):
    SUSPECT = "SUSPECT"  # running when the job died, beside other tasks or before being run alone
    ALONE = "ALONE"  # started with nothing else running
    CLEAR = "CLEAR"  # ran alone to its end: it was not the cause
    CRASH = "CRASH"  # the job died while it ran alone


def log_path(dag: str) -> str:
    return dag + ".crashes"


def slot_path(dag: str, rank: int) -> str:
    return f"{dag}.running.{rank}"


class Slot:
    """A worker's record of the task it runs (see the module doc). Opened before its first task."""

    def __init__(self, dag: str, rank: int) -> None:
        fd = open_fd(slot_path(dag, rank), os.O_RDWR | os.O_CREAT)
        try:
            os.ftruncate(fd, SLOT_BYTES)
            self._map = mmap.mmap(fd, SLOT_BYTES)
        finally:
            os.close(fd)
        self._map[0:1] = b"\0"

    def running(self, name: str) -> None:
        data = name.encode("utf-8", "surrogateescape")
        if len(data) < SLOT_BYTES:
            self._map[0 : len(data) + 1] = data + b"\0"

    def idle(self) -> None:
        self._map[0:1] = b"\0"

    def close(self) -> None:
        self.idle()
        self._map.close()


def open_slot(dag: str, rank: int) -> Slot | None:
    """The worker's slot; None where it cannot be made (its crashes then go unnoticed, as before)."""
    try:
        return Slot(dag, rank)
    except (OSError, ValueError) as exc:
        log.debug("worker %d: no crash slot (%s)", rank, exc)
        return None


def close_slot(slot: Slot | None, dag: str, rank: int) -> None:
    """A worker that ends cleanly removes its slot: a clean run leaves no file behind."""
    if slot is None:
        return
    slot.close()
    try:
        os.unlink(slot_path(dag, rank))
    except OSError:
        pass


def _read_slots(dag: str) -> list[str]:
    """Names in the previous run's slot files (tasks running when it died); the files are removed."""
    names = []
    for path in glob.glob(glob.escape(dag) + ".running.*"):
        if not _SLOT.search(path):
            continue
        try:
            data = read_at_most(path, SLOT_BYTES).split(b"\0", 1)[0]
            os.unlink(path)
        except OSError:
            continue
        if data:
            names.append(data.decode("utf-8", "surrogateescape"))
    return names


def recorded_crashes(dag: str) -> dict[str, int]:
    """The crashes per task that ``DAG.crashes`` records, for the run's report at its end: read only (the slot
    files and the record are the start's to bring up to date), lines that are not records skipped."""
    try:
        text = read_at_most(log_path(dag), MAX_LOG_BYTES).decode("utf-8", "surrogateescape")
    except OSError:
        return {}
    counts: dict[str, int] = {}
    for line in text.splitlines(keepends=True):
        event, _, name = line.rstrip("\n").partition(" ")
        if line.endswith("\n") and event == Event.CRASH.value and name:
            counts[name] = counts.get(name, 0) + 1
    return counts


class CrashState:
    """What the record says at the start of a run (a plain class: ranks start without dataclasses)."""

    def __init__(self) -> None:
        self.crashes: dict[str, int] = {}  # task -> crashes while it ran alone
        self.suspects: list[str] = []  # to run alone, in the order they were found


def _fold(path: str, lines: list[str], known: dict[str, Task]) -> tuple[CrashState, str | None]:
    """The state the lines describe, and the task left running alone (no CLEAR or CRASH after its ALONE)."""
    state = CrashState()
    suspects: dict[str, None] = {}
    alone = None
    for lineno, line in enumerate(lines, 1):
        parts = line.split(" ", 1)
        if len(parts) != 2 or parts[0] not in Event.__members__ or not parts[1]:
            raise DagError(
                path,
                lineno,
                f"not a crash record ({line[:80]!r}): expected 'SUSPECT|ALONE|CLEAR|CRASH "
                "<task>'; delete the file to forget the crashes it recorded",
            )
        event, name = Event(parts[0]), parts[1]
        if name not in known:
            continue  # a task the DAG no longer has
        if event is Event.SUSPECT:
            suspects[name] = None
        elif event is Event.ALONE:
            alone = name
        elif event is Event.CLEAR:
            suspects.pop(name, None)
            alone = None if alone == name else alone
        else:
            state.crashes[name] = state.crashes.get(name, 0) + 1
            alone = None if alone == name else alone
    state.suspects = list(suspects)
    return state, alone


class CrashLog:
    """``DAG.crashes``: read and brought up to date at the start of a run, appended to during it."""

    def __init__(self, dag: str, known: dict[str, Task]) -> None:
        self.path = log_path(dag)
        try:
            text = read_at_most(self.path, MAX_LOG_BYTES).decode("utf-8", "surrogateescape")
        except FileNotFoundError:
            text = ""
        except OSError as exc:
            raise DagError(self.path, None, f"cannot read the crash record: {exc.strerror}") from None
        lines = text.splitlines()
        if text and not text.endswith("\n"):
            lines = lines[:-1]  # torn by the kill: an unfinished last line says nothing
        state, alone = _fold(self.path, lines, known)
        running = [n for n in _read_slots(dag) if n in known]
        self._fh: IO[str] | None = None
        new = []
        if running:
            if alone is not None and alone in running:
                new.append((Event.CRASH, alone))  # the job died while this task ran alone
                state.crashes[alone] = state.crashes.get(alone, 0) + 1
            for name in running:
                if name != alone and name not in state.suspects:
                    new.append((Event.SUSPECT, name))
                    state.suspects.append(name)
            if alone is not None and alone in running and alone not in state.suspects:
                state.suspects.insert(0, alone)  # run alone again, unless its crashes stop it
        self.state = state
        for event, name in new:
            self.write(event, name)

    def write(self, event: Event, name: str) -> None:
        """One line, flushed at once: the next thing may be the SIGKILL of the whole job."""
        if self._fh is None:
            self._fh = open_file(self.path, "a", encoding="utf-8", errors="surrogateescape")
        self._fh.write(f"{event.value} {name}\n")
        self._fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


# -- the master's side ---------------------------------------------------------


class Turn(enum.Enum):
    """What ``Isolation.step`` lets the master's dispatch do."""

    WAIT = "wait"  # a suspect runs alone, or the others must end first: nothing may start
    ALONE = "alone"  # the next suspect is queued, to run alone
    OVER = "over"  # every suspect ran: the tasks kept back are queued, and dispatch goes on as usual


class Isolation:
    """This run's suspects, started one at a time with nothing else running, before any other work.

    The master keeps it while it lasts: ``defer`` for each task that becomes
    ready, ``step`` before each dispatch, ``ended`` for each task that ends.
    """

    def __init__(
        self, suspects: list[Task], engine: Engine, matcher: Matcher, record: CrashLog, ready: Callable[[Task], None]
    ) -> None:
        self.queue = collections.deque(suspects)
        self.alone: Task | None = None
        self.deferred: list[Task] = []  # tasks that became ready meanwhile: queued once every suspect ran
        self.engine = engine
        self.matcher = matcher
        self.record = record
        self.ready = ready  # the master's: number a ready task, log it queued, and queue it

    def defer(self, task: Task) -> bool:
        """Keep a ready task back while suspects are run alone (True); the suspect itself goes on."""
        if task is self.alone:
            return False
        self.deferred.append(task)
        return True

    def step(self) -> Turn:
        """Before each dispatch: wait while a suspect runs alone or the others must end first; otherwise
        queue the next suspect alone, or, with none left, every task kept back."""
        engine = self.engine
        if self.alone is not None or engine.running:
            return Turn.WAIT
        while self.queue:
            task = self.queue.popleft()
            if engine.is_ready(task) and not engine.stopped:
                self.alone = task
                self.record.write(Event.ALONE, task.name)
                self.ready(task)
                return Turn.ALONE
        for task in self.deferred:
            self.matcher.push(task)
        return Turn.OVER

    def ended(self, task: Task) -> None:
        """A task ended with its worker alive: if it was the one running alone, it is cleared."""
        if self.alone is task:
            self.record.write(Event.CLEAR, task.name)
            self.alone = None

    def lost(self, task: Task) -> None:
        """The worker of ``task`` died (its crash is recorded by ``CrashGuard``): no suspect runs alone now."""
        if self.alone is task:
            self.alone = None


class CrashGuard:
    """The master's use of the crash record: tasks at --max-crashes failed, suspects isolated, lost workers.

    Made once the DAG is read (it reads ``DAG.crashes`` and the previous run's
    slots); ``begin`` sorts the tasks ready at start, ``lost_ranks`` and
    ``lose_worker`` take a dead worker out of the run.
    """

    def __init__(
        self,
        opts: RunOptions,
        dag: Dag,
        engine: Engine,
        matcher: Matcher,
        slots: Slots,
        events: RunEvents,
        task_out: BinaryIO | None,
        ready: Callable[[Task], None],
        number: Callable[[Task], int],
    ) -> None:
        self.opts = opts
        self.record = CrashLog(opts.dag, dag.tasks)
        self._lost = Tail(lost_path(opts.dag), from_end=True)  # earlier runs' lines are not this run's
        self.engine = engine
        self.matcher = matcher
        self.slots = slots
        self.events = events
        self.task_out = task_out  # where the records of a task failed for its crashes go (None: stdout)
        self.ready = ready  # the master's: number a ready task, log it queued, and queue it
        self.number = number  # the master's: number an attempt that is not queued, and log it queued

    def begin(self, ready: list[Task]) -> tuple[Isolation | None, list[Task]]:
        """Sort the tasks ready at start: a task with --max-crashes crashes fails at once, suspects are to run
        alone (the Isolation returned, None if there are none), the rest (returned) are for the master to
        queue, behind the suspects."""
        state = self.record.state
        by_name = {t.name: t for t in ready}
        for name, count in state.crashes.items():
            if count >= self.opts.max_crashes and name in by_name:
                self._fail_blamed(by_name.pop(name), count)
        suspects = [by_name.pop(n) for n in state.suspects if n in by_name]
        isolation = None
        if suspects:
            log.warning(
                "%d task(s) were running when the job died (%s): each runs alone first, so that a task that "
                "kills its worker is known",
                len(suspects),
                ", ".join(t.name for t in suspects[:5]),
            )
            isolation = Isolation(suspects, self.engine, self.matcher, self.record, self.ready)
        return isolation, [task for task in ready if task.name in by_name]

    def lost_ranks(self) -> list[int]:
        """Ranks whose watchdog said, since the last look, that their worker died (``DAG.lost``)."""
        _, lines = self._lost.lines()
        return [int(line) for line in lines if line.strip().isdigit()]

    def lose_worker(self, rank: int, isolation: Isolation | None) -> None:
        """Go on without ``rank``: its task's crash is counted and the task started elsewhere (or failed at
        --max-crashes); what was queued on it goes back to the ready tasks; its slot stays taken."""
        engine, opts, record = self.engine, self.opts, self.record
        try:
            os.unlink(slot_path(opts.dag, rank))  # its crash is counted here: the next run need not suspect it
        except OSError:
            pass
        entry, held = self.slots.lose(rank)
        log.error(
            "worker %d died%s; the run goes on without it",
            rank,
            f" while running task {entry[0].name}" if entry else "",
        )
        for task in held:
            engine.unstart(task)
            if engine.is_ready(task) and not engine.stopped:
                self.matcher.push(task)  # numbered and logged as ready already
        if entry is None:
            return
        task, _alloc, seq = entry
        if isolation is not None:
            isolation.lost(task)
        record.write(Event.CRASH, task.name)
        count = record.state.crashes[task.name] = record.state.crashes.get(task.name, 0) + 1
        again = count < opts.max_crashes and not engine.stopped
        self.events.task_ended(task, seq, -signal.SIGKILL, again)
        if again:
            engine.unstart(task)  # a crash does not use up --tries
            self.ready(task)
            return
        engine.failed(task, retry=False)
        self._stopped(task, count)

    def close(self) -> None:
        self.record.close()

    def _fail_blamed(self, task: Task, count: int) -> None:
        """Fail a task that crashed its worker ``count`` times without starting it: records, jobstate, one line."""
        seq = self.number(task)
        self.engine.start(task)
        self.events.task_dispatched(task, seq, 0, "-")
        self.engine.failed(task, retry=False)
        self.events.task_ended(task, seq, -signal.SIGKILL, False)
        self._stopped(task, count)

    def _stopped(self, task: Task, count: int) -> None:
        """A task failed for its crashes: the one line that says so, and its [cluster-task] and invocation records
        in the job output (where pegasus-monitord and pegasus-analyzer find it)."""
        opts, now = self.opts, time.time()
        why = f"task {task.name} was running when its worker died {count} times: not started again (--max-crashes {opts.max_crashes})"
        log.error("%s%s", why, f"; its stderr is in {opts.stderr}" if opts.stderr else "")
        if opts.per_task_stdio:
            return  # no job output to put them in: jobstate.log and the log line say it
        from pilot.contracts import taskrecord
        from pilot.monitor import kickstart

        host = os.uname().nodename
        text = taskrecord.cluster_task(
            task.name, now, 0.0, -signal.SIGKILL, task.argv[0], host, 0, task.cpus, task.memory, task.pegasus_id
        )
        if opts.invocation_records:
            text = (
                "\n"
                + kickstart.xml_invocation(
                    task.transformation or task.name,
                    task.dax_id or task.name,
                    now,
                    0.0,
                    -signal.SIGKILL,
                    task.argv,
                    host,
                    why + "\n",
                    task.cwd,
                )
                + text
            )
        out = self.task_out if self.task_out is not None else sys.stdout.buffer  # no -o: the master's stdout
        out.write(text.encode("utf-8", "surrogateescape"))
        out.flush()
