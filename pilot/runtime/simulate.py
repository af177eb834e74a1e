"""Simulated workers on a virtual clock, for tests, the scheduling benchmark and the planner's makespan estimate.

``SimCluster`` plays every worker rank behind an ``InProcTransport``: it
registers hosts, answers host setup, and runs tasks the way a real worker
does (one at a time per rank, prefetched tasks queued behind the running one,
recalls honoured, kills obeyed; what may run is decided by the real worker's
``WorkQueue``) but finishes them on a virtual clock instead of spawning
processes. Tests inspect the start order and the resources in use at every
start.

Messages normally reach a simulated worker the moment the master sends them.
Given ``choose``, they travel instead, as over MPI: each direction between the
master and a rank is a FIFO wire, and whenever the master waits, ``choose(n)``
picks the next of the n things that can happen (a message arrives at a worker,
a worker's message arrives at the master, a running task ends, in any order
across ranks). A property-based test draws those choices to try the
interleavings a real run can meet.

A master given ``clock=cluster.now`` reads the virtual clock for its
wall-time limit. By default a waiting master jumps straight to the next task's
end (fast for long runs); with ``timeouts=True`` the clock stops at the end of
the master's wait instead, as real time would, so a wall-time limit strikes
while tasks still run and they are killed.
"""

from __future__ import annotations

import collections
import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

from pilot.runtime.protocol import (
    PROTOCOL_VERSION,
    Bye,
    Hello,
    HostReady,
    HostSetup,
    KillTask,
    Message,
    Recall,
    Recalled,
    Resume,
    RunTask,
    Shutdown,
    TaskResult,
)
from pilot.runtime.transport import InProcTransport
from pilot.runtime.workqueue import WorkQueue

# With ``choose``: a master that waits this many times in a row with nothing in flight waits forever (virtual
# time runs on; its longest legitimate wait, the grace after killing tasks, is a few of them).
STALL_LIMIT = 1000


@dataclass
class SimHost:
    name: str
    cpus: int = 4
    memory: int = 4096
    gpu_ids: tuple[str, ...] = ()
    slots: int = 4


@dataclass
class SimRank:
    rank: int
    host: SimHost
    queue: WorkQueue
    running: tuple[RunTask, float] | None = None  # task, virtual start
    end: float = 0.0  # when the running task ends (with ``choose``)
    to_worker: collections.deque[Message] = field(
        default_factory=collections.deque
    )  # sent by the master, not yet arrived
    to_master: collections.deque[Message] = field(
        default_factory=collections.deque
    )  # sent by the worker, not yet arrived


class SimCluster:
    """Ranks 1..n spread over ``hosts``; ``duration(name)`` and ``status(name, attempt)`` script the tasks."""

    def __init__(
        self,
        hosts: list[SimHost],
        duration: Callable[[str], float] = lambda name: 1.0,  # noqa: ARG005 - the callback's signature: the same for every task
        status: Callable[[str, int], int] = lambda name, attempt: 0,  # noqa: ARG005 - the callback's signature: the same for every task
        hello_cpus: int | None = None,
        hold_on_failure: bool = False,
        timeouts: bool = False,
        choose: Callable[[int], int] | None = None,
    ) -> None:
        self.hold_on_failure = hold_on_failure
        self.timeouts = timeouts
        self.choose = choose
        self._stalled = 0  # the master's waits in a row in which nothing could happen (with ``choose``)
        self.ranks: list[SimRank] = []
        for host in hosts:
            for _ in range(host.slots):
                self.ranks.append(SimRank(len(self.ranks) + 1, host, WorkQueue(hold_on_failure)))
        self.duration = duration
        self.status = status
        self.clock = 0.0
        self.events: list[tuple[float, int, int]] = []  # (end time, tiebreak, rank)
        self._tie = itertools.count()
        self.started: list[tuple[float, str, int]] = []  # (time, task, rank)
        self.killed: list[tuple[str, float]] = []  # (task, seconds it had run)
        self.peak: dict[str, tuple[int, int, int]] = {}
        self.recalled: list[str] = []
        self.used: dict[str, tuple[int, int, int]] = {}
        self.transport = InProcTransport([_Handler(self, r) for r in self.ranks])
        self.transport.on_idle = self._advance if choose is None else self._interleave
        for r in self.ranks:
            self.transport.deliver(
                r.rank,
                Hello(
                    PROTOCOL_VERSION,
                    r.rank,
                    r.host.name,
                    r.host.memory,
                    hello_cpus or r.host.cpus,
                    r.host.gpu_ids,
                    1000 + r.rank,
                ),
            )

    # -- worker behaviour ----------------------------------------------------
    def handle(self, r: SimRank, msg: Message | _Arrived, reply: Callable[[Message], None]) -> None:
        if self.choose is not None and not isinstance(msg, _Arrived):
            r.to_worker.append(msg)  # on its way (see _interleave)
            return
        msg = msg.msg if isinstance(msg, _Arrived) else msg
        if isinstance(msg, HostSetup):
            if msg.script:
                reply(HostReady(r.host.name))
        elif isinstance(msg, RunTask):
            if not r.queue.take(msg):
                reply(Recalled(msg.name))
            elif r.running is None:
                self._start_next(r)
        elif isinstance(msg, Resume):
            r.queue.resume()
            if r.running is None:
                self._start_next(r)
        elif isinstance(msg, Recall):
            if r.queue.recall(msg.name):
                self.recalled.append(msg.name)
                reply(Recalled(msg.name))
        elif isinstance(msg, KillTask):
            for task in r.queue.drop_all():
                reply(Recalled(task.name))
            if r.running is not None:
                task, start = r.running
                r.running = None
                self._use(r.host, task, -1)
                self.killed.append((task.name, self.clock - start))
                reply(TaskResult(task.name, -15, start, self.clock - start))
        elif isinstance(msg, Shutdown):
            for task in r.queue.drop_all():
                reply(Recalled(task.name))
            reply(Bye(r.rank))

    def _start_next(self, r: SimRank) -> None:
        task = r.queue.next()
        if task is None:
            return
        r.running = (task, self.clock)
        self.started.append((self.clock, task.name, r.rank))
        r.end = self.clock + self.duration(task.name)
        if self.choose is None:
            heapq.heappush(self.events, (r.end, next(self._tie), r.rank))
        self._use(r.host, task, +1)

    def _use(self, host: SimHost, task: RunTask, sign: int) -> None:
        """Track what a host's running tasks use, and its peak."""
        used = self.used.get(host.name, (0, 0, 0))
        used = (used[0] + sign * task.cpus, used[1] + sign * task.memory, used[2] + sign * len(task.gpu_ids))
        self.used[host.name] = used
        old = self.peak.get(host.name, (0, 0, 0))
        self.peak[host.name] = (max(old[0], used[0]), max(old[1], used[1]), max(old[2], used[2]))

    def now(self) -> float:
        return self.clock

    def _advance(self, timeout: float | None) -> None:
        """The master waits: finish the running task that ends first (with ``timeouts``, if it ends within ``timeout``)."""
        while self.events:
            end, tie, rank = heapq.heappop(self.events)
            r = self.ranks[rank - 1]
            if r.running is None:
                continue  # killed earlier
            task, start = r.running
            if end < self.clock:
                continue
            if self.timeouts and timeout is not None and end > self.clock + timeout:
                heapq.heappush(self.events, (end, tie, rank))
                self.clock += timeout
                return
            self.clock = end

            def deliver(msg: Message, rank: int = rank) -> None:
                self.transport.deliver(rank, msg)

            self._end_task(r, deliver)
            return

    def _end_task(self, r: SimRank, reply: Callable[[Message], None]) -> None:
        """The running task of ``r`` ends: its result, the follow-ons that go back, the next task (as Worker._serve)."""
        assert r.running is not None
        task, start = r.running
        r.running = None
        self._use(r.host, task, -1)
        status = self.status(task.name, task.attempt)
        dropped = r.queue.ended(task, status)
        reply(TaskResult(task.name, status, start, self.clock - start))
        for gone in dropped:
            reply(Recalled(gone.name))
        self._start_next(r)

    def _interleave(self, timeout: float | None) -> None:
        """The master waits (with ``choose``): let chosen things happen until a message reaches it."""
        inbox, choose = self.transport.inbox, self.choose
        assert choose is not None  # called only with choose
        while not inbox:
            moves: list[tuple[int, SimRank]] = []
            for r in self.ranks:
                if r.to_worker:
                    moves.append((0, r))
                if r.to_master:
                    moves.append((1, r))
                if r.running is not None:
                    moves.append((2, r))
            if not moves:
                if timeout is not None:
                    self.clock += timeout  # nothing can happen: the master's wait runs out
                    self._stalled += 1
                    if self._stalled > STALL_LIMIT:
                        raise RuntimeError(
                            "in-process pilot deadlocked: the master keeps waiting with no message in "
                            "flight and no task running"
                        )
                return
            self._stalled = 0
            kind, r = moves[choose(len(moves)) if len(moves) > 1 else 0]
            if kind == 0:
                self.handle(r, _Arrived(r.to_worker.popleft()), r.to_master.append)
            elif kind == 1:
                self.transport.deliver(r.rank, r.to_master.popleft())
            else:
                self.clock = max(self.clock, r.end)
                self._end_task(r, r.to_master.append)


class _Arrived(NamedTuple):
    """A message from the master that has reached its worker (with ``choose``)."""

    msg: Message


class _Handler:
    def __init__(self, cluster: SimCluster, r: SimRank) -> None:
        self.cluster = cluster
        self.r = r

    def handle(self, msg: Message, reply: Callable[[Message], None]) -> None:
        self.cluster.handle(self.r, msg, reply)
