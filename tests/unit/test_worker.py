"""A worker rank without MPI: the master's end is a scripted transport, the tasks are real processes."""

from __future__ import annotations

import collections

import pytest

from pilot.runtime import taskexec
from pilot.runtime.options import RunOptions
from pilot.runtime.protocol import Recall, Recalled, Resume, RunTask, Shutdown, TaskResult
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


class _LateMaster:
    """Sends 'a' alone; on 'a''s result, 'b' (prefetched before the master saw the failure), then Resume or
    Recall('b'); Shutdown once a Resume's 'b' has run."""

    rank = 1
    size = 2

    def __init__(self, resume: bool) -> None:
        self.script = collections.deque([RunTask("a", ["/bin/false"], 1)])
        self.resume = resume
        self.sent: list[object] = []

    def send(self, dest, msg, ring=True) -> None:
        self.sent.append(msg)
        if isinstance(msg, TaskResult) and msg.name == "a":
            self.script.extend([RunTask("b", ["/bin/true"], 1), Resume() if self.resume else Recall("b")])

    def recv(self, timeout=None, wake=None, patience=0.0, hot=0.0):
        if self.script:
            return 0, self.script.popleft()
        done = {m.name for m in self.sent if isinstance(m, TaskResult)}
        return (0, Shutdown()) if "a" in done and (not self.resume or "b" in done) else None


@pytest.mark.parametrize("resume", [True, False])
def test_under_max_failures_a_failed_task_holds_even_prefetches_that_arrive_after_it(tmp_path, resume):
    # The master stops the run or says Resume after every failure under -m; a prefetched
    # task that reaches the worker only after the failure must wait for that word too.
    master = _LateMaster(resume)
    worker = Worker(RunOptions(dag=str(tmp_path / "wf.dag"), max_failures=1), master)
    worker._waker = taskexec.ChildWaker()
    try:
        worker._serve()
    finally:
        worker.cleanup()
    results = [(m.name, m.status) for m in master.sent if isinstance(m, TaskResult)]
    if resume:
        assert results == [("a", 1), ("b", 0)]
    else:
        assert results == [("a", 1)]  # b was taken back unstarted
        assert [m.name for m in master.sent if isinstance(m, Recalled)] == ["b"]
