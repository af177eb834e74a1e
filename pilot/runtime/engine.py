"""The DAG state machine: readiness, tries, permanent failures, the -m limit.

No MPI, no I/O: the master feeds it events and it answers which tasks became
ready. Task states move WAITING -> READY -> RUNNING -> DONE | FAILED, with a
failed attempt going back to READY while tries remain. Tasks under a failed
task never become ready; they end the run as unfinished.
"""

from __future__ import annotations

from array import array
from enum import IntEnum

from pilot.dag.model import Dag, Task


class State(IntEnum):
    WAITING = 0
    READY = 1
    RUNNING = 2
    DONE = 3
    FAILED = 4


# The states as plain ints: what ``Engine.state`` holds, and quicker to compare than enum members.
WAITING, READY, RUNNING, DONE, FAILED = (int(s) for s in State)


class States:
    """A read-only view of the states the engine keeps as bytes: each one as its State."""

    __slots__ = ("_bytes",)

    def __init__(self, states: bytearray) -> None:
        self._bytes = states

    def __getitem__(self, order: int) -> State:
        return _STATES[self._bytes[order]]

    def __len__(self) -> int:
        return len(self._bytes)


_STATES = tuple(State)


class Engine:
    """Tracks every task of one DAG for one run."""

    def __init__(
        self, dag: Dag, tries: int = 1, max_failures: int = 0, done: set[str] | frozenset[str] = frozenset()
    ) -> None:
        if tries < 1:
            raise ValueError("tries must be at least 1")
        self.dag = dag
        self.default_tries = tries
        self.max_failures = max_failures
        n = len(dag)
        # Per task, by order, in machine ints rather than lists of objects: a run holds every task of
        # its DAG, and a byte or four a task here is a good part of what the master needs per task.
        self._state = bytearray(n)  # a State each (WAITING: 0); ``state`` reads them as States
        self.attempts = array("i", bytes(4 * n))
        self._missing = array("i", bytes(4 * n))
        self.running = 0
        self.done_count = 0
        self.failed_count = 0  # tasks failed permanently
        self.submitted = 0  # attempts started this run
        self.succeeded_this_run = 0
        self.stopped = False
        self.stop_reason: str | None = None
        self._initial: list[Task] = []
        for task in dag.tasks.values():
            if task.name in done:
                self._state[task.order] = DONE
                self.done_count += 1
        for task in dag.tasks.values():
            i = task.order
            if self._state[i] == DONE:
                continue
            missing = sum(1 for p in task.parents if self._state[p.order] != DONE)
            self._missing[i] = missing
            if missing == 0:
                self._state[i] = READY
                self._initial.append(task)

    @property
    def total(self) -> int:
        return len(self._state)

    @property
    def state(self) -> States:
        """Each task's State, by order (read-only)."""
        return States(self._state)

    def initial_ready(self) -> list[Task]:
        """Tasks ready at start (all parents DONE, from the rescue log or none)."""
        ready, self._initial = self._initial, []
        return ready

    def tries_of(self, task: Task) -> int:
        tries = task.spec.tries
        return tries if tries is not None else self.default_tries

    def start(self, task: Task) -> int:
        """Mark an attempt started; return its number (1-based)."""
        i = task.order
        if self._state[i] != READY:
            raise RuntimeError(f"task {task.name} started in state {State(self._state[i]).name}")
        self._state[i] = RUNNING
        self.attempts[i] += 1
        self.running += 1
        self.submitted += 1
        return self.attempts[i]

    def follow_on(self, task: Task, parent: Task) -> bool:
        """Whether ``task`` becomes ready exactly when ``parent`` succeeds (its only parent not done)."""
        i = task.order
        return self._state[i] == WAITING and self._missing[i] == 1 and self._state[parent.order] == RUNNING

    def start_after(self, task: Task) -> int:
        """Start an attempt sent ahead to run after its last parent succeeds (see ``Ahead.attach_child``)."""
        i = task.order
        if self._state[i] != WAITING:
            raise RuntimeError(f"task {task.name} sent ahead in state {State(self._state[i]).name}")
        self._state[i] = READY
        return self.start(task)

    def unstart(self, task: Task) -> None:
        """Undo ``start`` for an attempt that never ran (a recalled or dropped prefetch)."""
        i = task.order
        self._finish(i)
        self._state[i] = READY if self._missing[i] == 0 else WAITING
        self.attempts[i] -= 1
        self.submitted -= 1

    def succeeded(self, task: Task) -> list[Task]:
        """Record success; return the children that became ready."""
        i = task.order
        self._finish(i)
        self._state[i] = DONE
        self.done_count += 1
        self.succeeded_this_run += 1
        ready = []
        missing = self._missing
        for child in task.children:
            j = child.order
            missing[j] -= 1
            if missing[j] == 0 and self._state[j] == WAITING:
                self._state[j] = READY
                ready.append(child)
        return ready

    def is_ready(self, task: Task) -> bool:
        return self._state[task.order] == READY

    def failed(self, task: Task, retry: bool = True) -> bool:
        """Record a failed attempt; True when the task goes back to READY for another try."""
        i = task.order
        self._finish(i)
        if retry and not self.stopped and self.attempts[i] < self.tries_of(task):
            self._state[i] = READY
            return True
        self._state[i] = FAILED
        self.failed_count += 1
        if self.max_failures and self.failed_count >= self.max_failures:
            self.stop(f"{self.failed_count} task(s) failed permanently (-m {self.max_failures})")
        return False

    def stop(self, reason: str) -> None:
        """Release no more work (max failures, wall time, signal)."""
        if not self.stopped:
            self.stopped = True
            self.stop_reason = reason

    def _finish(self, i: int) -> None:
        if self._state[i] != RUNNING:
            raise RuntimeError(f"task #{i} finished in state {State(self._state[i]).name}")
        self.running -= 1

    @property
    def success(self) -> bool:
        return self.done_count == self.total

    def unfinished(self) -> list[str]:
        """Names of tasks that are not DONE, in DAG order."""
        return [t.name for t in self.dag.tasks.values() if self._state[t.order] != DONE]
