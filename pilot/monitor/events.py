"""The master's run events, fanned out to the monitoring writers.

Each writer (jobstate.log, dagman.out, ...) implements the hooks it needs;
the master calls one ``Fanout`` and never knows which files are written.
"""

from __future__ import annotations

from collections.abc import Callable

from pilot.dag.model import Task


class RunEvents:
    """No-op base: override the hooks a writer cares about."""

    def run_started(self, dag_path: str, total: int, workers: int) -> None: ...

    def task_queued(self, task: Task, seq: int) -> None:
        """The attempt ``seq`` of ``task`` became ready (queued for a slot), as PMC numbers and logs it."""

    def task_dispatched(self, task: Task, seq: int, rank: int, hostname: str) -> None: ...

    def task_ended(self, task: Task, seq: int, status: int, will_retry: bool) -> None: ...

    def status(self, done: int, queued: int, ready: int, failed: int) -> None:
        """Node counts after a batch of changes (queued = started or prefetched)."""

    def drained(self) -> None:
        """Nothing more starts or runs: the end-of-run output follows."""

    def run_finished(self, ok: bool, counts: dict[str, int]) -> None: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...

    def open_late(self) -> None:
        """Open a file made to be opened later (pilot.util.latefile), on whichever thread calls this."""


class Fanout(RunEvents):
    """Every hook to every writer. A writer that cannot write (a full disk) is reported to ``on_error`` once,
    with what it writes, and left out from then on: the tasks go on, and the run ends saying which file is
    incomplete instead of losing its rescue log, result and task output to a monitoring file."""

    def __init__(self, sinks: list[RunEvents], on_error: Callable[[str, OSError], None] | None = None) -> None:
        self.sinks = sinks
        self.on_error = on_error
        self._broken: list[RunEvents] = []  # left out after an error; still closed at the end

    def _failed(self, sink: RunEvents, exc: OSError) -> None:
        self.sinks = [s for s in self.sinks if s is not sink]  # a new list: the loop that failed goes on over the old
        self._broken.append(sink)
        if self.on_error is None:
            raise exc
        self.on_error(written_to(sink), exc)

    def run_started(self, dag_path: str, total: int, workers: int) -> None:
        for s in self.sinks:
            try:
                s.run_started(dag_path, total, workers)
            except OSError as exc:
                self._failed(s, exc)

    def task_queued(self, task: Task, seq: int) -> None:
        for s in self.sinks:
            try:
                s.task_queued(task, seq)
            except OSError as exc:
                self._failed(s, exc)

    def task_dispatched(self, task: Task, seq: int, rank: int, hostname: str) -> None:
        for s in self.sinks:
            try:
                s.task_dispatched(task, seq, rank, hostname)
            except OSError as exc:
                self._failed(s, exc)

    def task_ended(self, task: Task, seq: int, status: int, will_retry: bool) -> None:
        for s in self.sinks:
            try:
                s.task_ended(task, seq, status, will_retry)
            except OSError as exc:
                self._failed(s, exc)

    def status(self, done: int, queued: int, ready: int, failed: int) -> None:
        for s in self.sinks:
            try:
                s.status(done, queued, ready, failed)
            except OSError as exc:
                self._failed(s, exc)

    def drained(self) -> None:
        for s in self.sinks:
            try:
                s.drained()
            except OSError as exc:
                self._failed(s, exc)

    def run_finished(self, ok: bool, counts: dict[str, int]) -> None:
        for s in self.sinks:
            try:
                s.run_finished(ok, counts)
            except OSError as exc:
                self._failed(s, exc)

    def flush(self) -> None:
        for s in self.sinks:
            try:
                s.flush()
            except OSError as exc:
                self._failed(s, exc)

    def open_late(self) -> None:
        """Every writer's file opened (an opening's error is raised by the writer's next write or close)."""
        for s in list(self.sinks):
            s.open_late()

    def close(self) -> None:
        for s in self.sinks:
            try:
                s.close()
            except OSError as exc:
                self._failed(s, exc)
        for s in self._broken:  # its descriptor, whatever it still buffers
            try:
                s.close()
            except OSError:
                pass


def written_to(writer: object) -> str:
    """The file a writer (a monitoring writer, an open file) writes, for a message."""
    return str(getattr(writer, "path", None) or getattr(writer, "name", None) or type(writer).__name__)
