"""The master's run events, fanned out to the monitoring writers.

Each writer (jobstate.log, dagman.out, ...) implements the hooks it needs;
the master calls one ``Fanout`` and never knows which files are written.
"""

from __future__ import annotations

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


class Fanout(RunEvents):
    def __init__(self, sinks: list[RunEvents]) -> None:
        self.sinks = sinks

    def run_started(self, dag_path: str, total: int, workers: int) -> None:
        for s in self.sinks:
            s.run_started(dag_path, total, workers)

    def task_queued(self, task: Task, seq: int) -> None:
        for s in self.sinks:
            s.task_queued(task, seq)

    def task_dispatched(self, task: Task, seq: int, rank: int, hostname: str) -> None:
        for s in self.sinks:
            s.task_dispatched(task, seq, rank, hostname)

    def task_ended(self, task: Task, seq: int, status: int, will_retry: bool) -> None:
        for s in self.sinks:
            s.task_ended(task, seq, status, will_retry)

    def status(self, done: int, queued: int, ready: int, failed: int) -> None:
        for s in self.sinks:
            s.status(done, queued, ready, failed)

    def drained(self) -> None:
        for s in self.sinks:
            s.drained()

    def run_finished(self, ok: bool, counts: dict[str, int]) -> None:
        for s in self.sinks:
            s.run_finished(ok, counts)

    def flush(self) -> None:
        for s in self.sinks:
            s.flush()

    def close(self) -> None:
        for s in self.sinks:
            s.close()
