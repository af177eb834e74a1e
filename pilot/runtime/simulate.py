"""Simulated workers on a virtual clock, for tests, the scheduling benchmark and the planner's makespan estimate.

``SimCluster`` plays every worker rank behind an ``InProcTransport``: it
registers hosts, answers host setup, and runs tasks the way a real worker
does (one at a time per rank, prefetched tasks queued behind the running one,
recalls honoured, kills obeyed) but finishes them on a virtual clock instead
of spawning processes. Tests inspect the start order and the resources in
use at every start.

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
from dataclasses import dataclass, field
from typing import Callable

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
    running: tuple[RunTask, float] | None = None  # task, virtual start
    queue: collections.deque = field(default_factory=collections.deque)
    holding: bool = False  # after a failed task under -m, until Resume


class SimCluster:
    """Ranks 1..n spread over ``hosts``; ``duration(name)`` and ``status(name, attempt)`` script the tasks."""

    def __init__(
        self,
        hosts: list[SimHost],
        duration: Callable[[str], float] = lambda name: 1.0,
        status: Callable[[str, int], int] = lambda name, attempt: 0,
        hello_cpus: int | None = None,
        hold_on_failure: bool = False,
        timeouts: bool = False,
    ) -> None:
        self.hold_on_failure = hold_on_failure
        self.timeouts = timeouts
        self.ranks: list[SimRank] = []
        for host in hosts:
            for _ in range(host.slots):
                self.ranks.append(SimRank(len(self.ranks) + 1, host))
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
        self.transport.on_idle = self._advance
        for r in self.ranks:
            self.transport.deliver(
                r.rank,
                Hello(PROTOCOL_VERSION, r.rank, r.host.name, r.host.memory, hello_cpus or r.host.cpus, r.host.gpu_ids, 1000 + r.rank),
            )

    # -- worker behaviour ----------------------------------------------------
    def handle(self, r: SimRank, msg: Message, reply: Callable[[Message], None]) -> None:
        if isinstance(msg, HostSetup):
            if msg.script:
                reply(HostReady(r.host.name))
        elif isinstance(msg, RunTask):
            r.queue.append(msg)
            if r.running is None and not r.holding:
                self._start_next(r)
        elif isinstance(msg, Resume):
            r.holding = False
            self._start_next(r)
        elif isinstance(msg, Recall):
            for queued in r.queue:
                if queued.name == msg.name:
                    r.queue.remove(queued)
                    self.recalled.append(msg.name)
                    reply(Recalled(msg.name))
                    break
        elif isinstance(msg, KillTask):
            while r.queue:
                reply(Recalled(r.queue.popleft().name))
            if r.running is not None:
                task, start = r.running
                r.running = None
                self._use(r.host, task, -1)
                self.killed.append((task.name, self.clock - start))
                reply(TaskResult(task.name, -15, start, self.clock - start))
        elif isinstance(msg, Shutdown):
            while r.queue:
                reply(Recalled(r.queue.popleft().name))
            reply(Bye(r.rank))

    def _start_next(self, r: SimRank) -> None:
        if not r.queue:
            return
        task = r.queue.popleft()
        r.running = (task, self.clock)
        self.started.append((self.clock, task.name, r.rank))
        heapq.heappush(self.events, (self.clock + self.duration(task.name), next(self._tie), r.rank))
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
            r.running = None
            self._use(r.host, task, -1)
            status = self.status(task.name, task.attempt)
            self.transport.deliver(rank, TaskResult(task.name, status, start, end - start))
            last = task.name
            while status != 0 and r.queue and r.queue[0].after == last:
                last = r.queue[0].name
                self.transport.deliver(rank, Recalled(r.queue.popleft().name))
            if status != 0 and self.hold_on_failure:
                r.holding = True  # as a worker does, queue or not (see Worker._serve)
            else:
                self._start_next(r)
            return


class _Handler:
    def __init__(self, cluster: SimCluster, r: SimRank) -> None:
        self.cluster = cluster
        self.r = r

    def handle(self, msg: Message, reply: Callable[[Message], None]) -> None:
        self.cluster.handle(self.r, msg, reply)
