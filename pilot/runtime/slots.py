"""What each worker rank holds: the running attempt, tasks prefetched behind it, a recall.

Prefetching (a window of queued tasks per worker): while recent tasks are
short, the master sends a busy worker up to ``depth`` more tasks that fit in
the resources it already holds (the master sizes ``depth`` to a few
milliseconds of recent work); the worker starts the next one the moment the
running one ends, without a round trip. The worker answers in order, so a
result from a rank also says which queued task it went on to. When a worker
falls idle with nothing ready, the last task queued on some other worker is
recalled: the worker gives it back (``Recalled``) unless it already started it.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterator

from pilot.dag.model import Task
from pilot.runtime.slotmatch import Allocation


class Slots:
    def __init__(self, depth: int = 2) -> None:
        self.depth = depth
        self.running: dict[int, tuple[Task, Allocation, int]] = {}
        self.queued: dict[int, collections.deque[Task]] = {}
        # Tasks asked back and not yet given back, in the worker's queue order
        # (always the tail of what it was sent).
        self.recalling: dict[int, collections.deque[Task]] = {}
        self.queued_total = 0
        self.dry: set[int] = set()  # busy ranks with nothing queued behind their task
        # Ranks whose queue holds a task that runs only if the running one succeeds: nothing is
        # queued behind it, and it is never recalled to run elsewhere (it is not ready yet).
        self.conditional: dict[int, int] = {}  # rank -> how many such tasks it holds (its whole queue)
        self._prefetchable: list[int] = []
        self._listed: set[int] = set()  # ranks in _prefetchable, so it holds each at most once

    def start(self, rank: int, task: Task, alloc: Allocation, seq: int) -> None:
        self.running[rank] = (task, alloc, seq)
        if self.queued.get(rank):
            self.dry.discard(rank)
        else:
            self.dry.add(rank)
        self._offer(rank)

    def _offer(self, rank: int) -> None:
        if rank not in self._listed:
            self._listed.add(rank)
            self._prefetchable.append(rank)

    def finish(self, rank: int, went_on: bool = True) -> tuple[Task, Allocation, int, Task | None]:
        """The running attempt on ``rank`` ended; also return the task the worker went on to.

        ``went_on`` False: the worker holds its queue (a failed task under -m)
        until ``resume`` or a recall.
        """
        task, alloc, seq = self.running.pop(rank)
        self.dry.discard(rank)  # start() files the rank again if it went on to a queued task
        if not went_on:
            return task, alloc, seq, None
        queue = self.queued.get(rank)
        if queue:
            self.queued_total -= 1
            self._unconditional(rank)
            return task, alloc, seq, queue.popleft()
        recalling = self.recalling.get(rank)
        if recalling:  # it started one before the recall reached it
            nxt = recalling.popleft()
            if not recalling:
                del self.recalling[rank]
            self._unconditional(rank)
            return task, alloc, seq, nxt
        return task, alloc, seq, None

    def _unconditional(self, rank: int) -> None:
        """One task sent to run only after its parent left the rank's queue (started or given back)."""
        count = self.conditional.get(rank)
        if count is not None:
            if count > 1:
                self.conditional[rank] = count - 1
            else:
                del self.conditional[rank]

    def resume(self, rank: int) -> Task:
        """A holding worker was told to go on: the first task of its queue starts."""
        self.queued_total -= 1
        return self.queued[rank].popleft()

    def with_room(self) -> Iterator[tuple[int, Allocation]]:
        """Busy ranks that can take one more prefetched task (call ``add`` for each taken)."""
        while self._prefetchable:
            rank = self._prefetchable.pop()
            self._listed.discard(rank)
            entry = self.running.get(rank)
            if (
                entry is None
                or rank in self.recalling
                or rank in self.conditional
                or len(self.queued.get(rank, ())) >= self.depth
            ):
                continue
            yield rank, entry[1]

    def add_conditional(self, rank: int, task: Task) -> None:
        """Queue ``task`` to run on ``rank`` only if its running task succeeds."""
        self.add(rank, task)
        self.conditional[rank] = self.conditional.get(rank, 0) + 1

    def add(self, rank: int, task: Task) -> None:
        self.queued.setdefault(rank, collections.deque()).append(task)
        self.queued_total += 1
        self.dry.discard(rank)
        self._offer(rank)

    def to_recall(self, fits: Callable[[Task], bool], idle: Callable[[int], bool]) -> list[tuple[int, Task]]:
        """Pick queued tasks to take back while ``idle(recalls so far)`` says slots wait."""
        picked: list[tuple[int, Task]] = []
        for rank, queue in self.queued.items():
            if not queue or rank in self.recalling or rank in self.conditional or not fits(queue[-1]):
                continue
            task = queue.pop()
            self.queued_total -= 1
            self._emptied(rank, queue)
            self.recalling[rank] = collections.deque((task,))
            picked.append((rank, task))
            if not idle(len(self.recalling)):
                break
        return picked

    def given_back(self, rank: int) -> None:
        """The rank's running task failed with tasks queued to run only after it: the worker gives them all back
        unasked. Until they come back they are being recalled, not a queue: nothing is chained or queued behind
        them, and a result of the rank never went on to one of them."""
        self._recalling_all(rank)

    def recall_all(self) -> list[tuple[int, Task]]:
        """Every queued task, marked as being recalled (the run stops releasing work)."""
        picked: list[tuple[int, Task]] = []
        for rank in self.queued:
            picked.extend((rank, task) for task in self._recalling_all(rank))
        return picked

    def _recalling_all(self, rank: int) -> list[Task]:
        """The rank's whole queue, moved ahead of what it is already giving back (its queue order); that queue."""
        queue = self.queued.get(rank)
        if not queue:
            return []
        moved = list(queue)
        self.queued_total -= len(queue)
        self.recalling[rank] = collections.deque([*queue, *self.recalling.get(rank, ())])
        queue.clear()
        self._emptied(rank, queue)
        return moved

    def lose(self, rank: int) -> tuple[tuple[Task, Allocation, int] | None, list[Task]]:
        """A worker is gone: its running attempt (None if idle) and every task it held, queued or recalled."""
        entry = self.running.pop(rank, None)
        queue = self.queued.pop(rank, None) or collections.deque()
        self.queued_total -= len(queue)
        held = [*queue, *self.recalling.pop(rank, ())]
        self.conditional.pop(rank, None)
        self.dry.discard(rank)
        return entry, held

    def recalled(self, rank: int, name: str) -> Task | None:
        """The worker gave ``name`` back unstarted; return it (None if it was not held)."""
        recalling = self.recalling.get(rank) or collections.deque()
        for task in recalling:
            if task.name == name:
                recalling.remove(task)
                if not recalling:
                    del self.recalling[rank]
                self._unconditional(rank)
                return task
        queue = self.queued.get(rank) or collections.deque()
        for task in queue:
            if task.name == name:
                queue.remove(task)
                self.queued_total -= 1
                self._emptied(rank, queue)
                self._unconditional(rank)
                return task
        return None

    def _emptied(self, rank: int, queue: collections.deque[Task]) -> None:
        if not queue and rank in self.running:
            self.dry.add(rank)
