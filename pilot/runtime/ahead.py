"""Work the master sends ahead of need: prefetched tasks and follow-on children.

Both spare a worker the round trip to the master between two short tasks:
a prefetched task waits in the worker's queue behind the running one (see
``Slots``); a follow-on child is sent with the task it depends on and starts
the moment that task succeeds. Neither ever passes over a ready task of
higher priority, and under a wall-time limit neither sends a task that could
not finish in the time left once the work ahead of it on that worker has run
(by the runtimes of the running and queued tasks, taken whole).

``Ahead`` keeps the recent mean task time, which decides all of it: whether
work is sent ahead at all, how deep each worker's queue may be, and how long
the master may sleep while the queues are full. The master owns one, tells
it each task's duration, and calls it from its dispatch; it sends each task
through the master's own ``send`` (which starts the attempt in the engine).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from pilot.dag.model import Task
from pilot.runtime.engine import Engine
from pilot.runtime.protocol import Recall, Recalled
from pilot.runtime.slotmatch import Allocation, Matcher
from pilot.runtime.slots import Slots
from pilot.runtime.transport import Transport

log = logging.getLogger("pilot.master")

# Send work ahead (prefetch, follow-on children) only while recent tasks are this
# short: that is where a round trip to the master costs a noticeable share.
SHORT_BELOW = 0.25
# How much work (in seconds of recent mean task time) to queue behind each
# running task, and the most tasks that may wait on one worker.
PREFETCH_SECONDS = 0.008
PREFETCH_MAX = 8
# The most follow-on children sent ahead of a running task, one under the other.
FOLLOW_ON_DEPTH = 2
# While every worker has prefetched work waiting, the master need not look at
# its messages more often than this: each look is a wakeup taken from tasks.
MAX_PATIENCE = 2e-3

# How the master sends one attempt: (task, allocation, the task it runs after or None).
Send = Callable[[Task, Allocation, Task | None], None]


class Ahead:
    """Prefetching, follow-on children, recalls, and the mean task time that sizes them (see the module doc)."""

    def __init__(
        self,
        engine: Engine,
        matcher: Matcher,
        slots: Slots,
        transport: Transport,
        send: Send,
        time_left: Callable[[], float | None],
    ) -> None:
        self.engine = engine
        self.matcher = matcher
        self.slots = slots
        self.t = transport
        self.send = send
        self.time_left = time_left  # seconds a task started now may run, None without the time-left rule
        # The recent mean task time (also what the master's hot wait reads); unknown until a task ends.
        self.mean_duration = float("inf")
        self.short = False  # the mean is below SHORT_BELOW: work is sent ahead

    def observe(self, duration: float) -> None:
        """A task ran ``duration`` seconds: move the mean, and size the queues to PREFETCH_SECONDS of it."""
        if self.mean_duration == float("inf"):
            self.mean_duration = duration
        else:
            self.mean_duration += (duration - self.mean_duration) * 0.1
        self.short = self.mean_duration < SHORT_BELOW
        self.slots.depth = max(1, min(PREFETCH_MAX, int(PREFETCH_SECONDS / max(self.mean_duration, 1e-6))))

    def attach_child(self, rank: int, task: Task, alloc: Allocation) -> None:
        """Send ``task``'s child ahead, to run on the same worker the moment ``task`` succeeds.

        Only while tasks are short and nothing else is ready (the child would be
        the next task anyway), for a child whose other parents are all done and
        that fits the allocation; then its own child the same way, up to
        FOLLOW_ON_DEPTH tasks ahead of the running one, so a master that is slow
        to answer (a busy machine) does not stall the chain. The worker starts
        each without waiting for the master, so a chain of short tasks costs one
        spawn per step, not a spawn plus a round trip. If a task fails the worker
        gives back what was to follow it, unstarted. Not after tasks with I/O
        forwarding: the master can still fail those after a zero exit.
        """
        engine = self.engine
        if not self.short or engine.stopped or self.matcher.ready_count:
            return
        slots = self.slots
        queue = slots.queued.get(rank)
        if queue and rank not in slots.conditional:
            return  # prefetched work waits there
        parent = queue[-1] if queue else task
        depth = len(queue) if queue else 0
        gpus = len(alloc.gpu_ids)
        left = self.time_left()
        if left is not None:
            left -= self._work_ahead(rank)
        while depth < FOLLOW_ON_DEPTH and not parent.spec.pipe_forwards and not parent.spec.file_forwards:
            child = next(
                (
                    c
                    for c in parent.children
                    if engine.follow_on(c, parent)
                    and c.spec.cpus <= alloc.cpus
                    and c.spec.memory <= alloc.memory
                    and c.spec.gpus <= gpus
                    and (left is None or not self.matcher.too_long(c, left))
                ),
                None,
            )
            if child is None:
                return
            if left is not None:
                left -= child.runtime or 0.0
            self.send(child, alloc, parent)
            slots.add_conditional(rank, child)
            parent = child
            depth += 1

    def prefetch(self) -> None:
        """Queue ready tasks behind running ones that have room (see ``Slots``), best priority first.

        The master calls it while tasks are ready and ``short`` holds."""
        left = self.time_left()
        for rank, alloc in self.slots.with_room():
            task = self.matcher.pick_within(alloc, None if left is None else left - self._work_ahead(rank))
            if task is not None:
                self.send(task, alloc, None)
                self.slots.add(rank, task)
            if not self.matcher.ready_count:
                return

    def recall(self) -> None:
        """Take back prefetched tasks for slots that fell idle with nothing ready (see ``Slots.to_recall``)."""
        for rank, task in self.slots.to_recall(self.matcher.fits_now, self.matcher.has_idle_slot):
            self.t.send(rank, Recall(task.name))

    def recall_all(self) -> None:
        """The run releases no more work: every prefetched task is taken back before it starts."""
        for rank, task in self.slots.recall_all():
            self.t.send(rank, Recall(task.name))

    def recalled(self, source: int, msg: Recalled) -> None:
        """A worker gave a task back unstarted: it is ready again (unless a parent failed meanwhile)."""
        task = self.slots.recalled(source, msg.name)
        if task is None:
            log.error("worker %d gave back %s, which it did not hold", source, msg.name)
            return
        engine = self.engine
        engine.unstart(task)
        if not engine.stopped and engine.is_ready(task):
            self.matcher.push(task)

    def patience(self) -> float:
        """How long the master may sleep before looking at results.

        0 unless every slot is busy, every worker has a task queued behind its
        running one and the queues are half full on average: a worker then has
        about depth/2 mean task times of work left, and the master sleeps a
        quarter of that (at most MAX_PATIENCE) before it refills them.
        """
        slots = self.slots
        if slots.dry or slots.queued_total * 2 < len(slots.running) * slots.depth or self.matcher.has_idle_slot():
            return 0.0
        return min(MAX_PATIENCE, slots.depth * self.mean_duration / 4)

    def _work_ahead(self, rank: int) -> float:
        """Seconds of known runtime before a task sent now to ``rank`` would start: its running and queued tasks."""
        running = self.slots.running.get(rank)
        total = (running[0].runtime or 0.0) if running is not None else 0.0
        return total + sum(t.runtime or 0.0 for t in self.slots.queued.get(rank, ()))
