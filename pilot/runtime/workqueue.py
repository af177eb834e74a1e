"""What a worker holds of the master's work, and which of it may still run.

The master sends work ahead of need (see ``pilot.runtime.ahead``): prefetched
tasks, and follow-on children that run only if the task before them on the
worker succeeds (``RunTask.after``). Messages take time, so a follow-on can
arrive after the task it follows has already ended. If that task succeeded,
the master counts the follow-on as started the moment it reads the result, and
the worker runs it; if it failed, the master expects the follow-on back
unstarted (``Recalled``), so the worker must remember which tasks failed until
their follow-on arrives. Running such a child after its parent failed would
break the DAG, and its result would reach a master that holds nothing running
on that rank.

One class decides this for the real worker and for the simulated workers that
test the master (``pilot.runtime.simulate``), so the protocol the tests check
is the one that runs.
"""

from __future__ import annotations

import collections

from pilot.runtime.protocol import RunTask


class WorkQueue:
    """The tasks a worker was sent and has not started, in the order they were sent."""

    def __init__(self, hold_on_failure: bool) -> None:
        # Under -m a worker waits after a failed task (for Resume or recalls) before it starts another:
        # that failure may be the one that stops the run.
        self.hold_on_failure = hold_on_failure
        self.tasks: collections.deque[RunTask] = collections.deque()
        self.holding = False
        self.broken = False  # the worker reported a fatal error: it starts nothing more
        # Tasks that ended without success (or were given back) whose follow-on child may still be on its way.
        # Only tasks with children (RunTask.urgent) can have one, and an entry goes when its follow-on comes.
        self._no_follow_on: set[str] = set()

    def __bool__(self) -> bool:
        return bool(self.tasks)

    def take(self, msg: RunTask) -> bool:
        """A task arrived: queue it (True), or False when it must be given back unstarted.

        It goes back when the worker is broken, or when it follows a task that did not succeed.
        """
        after = msg.after
        if after is not None and after in self._no_follow_on:
            self._no_follow_on.discard(after)
            if msg.urgent:
                self._no_follow_on.add(msg.name)  # its own follow-on must come back too
            return False
        if self.broken:
            return False
        # A new attempt of a task that failed before: a follow-on from now on follows this attempt
        # (one that followed the failed attempt was sent, and so arrived, before it).
        self._no_follow_on.discard(msg.name)
        self.tasks.append(msg)
        return True

    def next(self) -> RunTask | None:
        """The task to start now, if the worker may start one."""
        if self.tasks and not self.holding and not self.broken:
            return self.tasks.popleft()
        return None

    def ended(self, task: RunTask, status: int) -> list[RunTask]:
        """``task`` ended with ``status``: the queued follow-ons that must not run (give them back)."""
        if status == 0:
            return []
        dropped = []
        last = task
        while self.tasks and self.tasks[0].after == last.name:
            last = self.tasks.popleft()
            dropped.append(last)
        if last.urgent:
            self._no_follow_on.add(last.name)  # a follow-on of it not yet arrived goes back when it does
        if self.hold_on_failure:
            self.holding = True  # as well with nothing queued: tasks sent before the master saw the failure may come
        return dropped

    def resume(self) -> None:
        self.holding = False

    def recall(self, name: str) -> bool:
        """The master asks ``name`` back: True if it was still queued (now removed)."""
        for queued in self.tasks:
            if queued.name == name:
                self.tasks.remove(queued)
                return True
        return False

    def drop_all(self) -> list[RunTask]:
        """Every queued task, removed (they go back unstarted)."""
        dropped = list(self.tasks)
        self.tasks.clear()
        self._no_follow_on.update(task.name for task in dropped if task.urgent)
        return dropped
