"""A worker rank without MPI: the master's end is a scripted transport, the tasks are real processes."""

from __future__ import annotations

import collections

import pytest

from pilot.runtime import taskexec
from pilot.runtime.options import RunOptions
from pilot.runtime.protocol import RunTask, Shutdown, TaskResult
from pilot.runtime.worker import Worker


class _Master:
    """Hands the worker its tasks one per look, then Shutdown once every task's result came back."""

    rank = 1
    size = 2

    def __init__(self, tasks: list[RunTask]) -> None:
        self.tasks = collections.deque(tasks)
        self.names = {t.name for t in tasks}
        self.sent: list[tuple[object, bool]] = []

    def send(self, dest, msg, ring=True) -> None:
        self.sent.append((msg, ring))

    def recv(self, timeout=None, wake=None, patience=0.0, hot=0.0):
        if self.tasks:
            return 0, self.tasks.popleft()
        done = {m.name for m, _ in self.sent if isinstance(m, TaskResult)}
        return (0, Shutdown()) if done == self.names else None


@pytest.mark.parametrize("urgent", [True, False])
def test_result_sent_after_the_next_spawn_rings_only_when_others_wait_for_it(tmp_path, urgent):
    # a arrives alone; b arrives while a runs, so the worker goes on to b and sends a's
    # result after b started. Only a result that other tasks wait for must wake the
    # master; b's, sent with nothing left to run, always does (the worker needs work).
    master = _Master([RunTask("a", ["/bin/true"], 1, urgent=urgent), RunTask("b", ["/bin/true"], 1, urgent=False)])
    worker = Worker(RunOptions(dag=str(tmp_path / "wf.dag")), master)
    worker._waker = taskexec.ChildWaker()
    try:
        worker._serve()
    finally:
        worker.cleanup()
    results = [(m.name, m.status, ring) for m, ring in master.sent if isinstance(m, TaskResult)]
    assert results == [("a", 0, urgent), ("b", 0, True)]
