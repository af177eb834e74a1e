"""Work the master sends ahead of need: prefetched tasks and follow-on children.

Both spare a worker the round trip to the master between two short tasks:
a prefetched task waits in the worker's queue behind the running one (see
``Slots``); a follow-on child is sent with the task it depends on and starts
the moment that task succeeds. Neither ever passes over a ready task of
higher priority, and under a wall-time limit neither sends a task that could
not finish in the time left once the work ahead of it on that worker has run
(by the runtimes of the running and queued tasks, taken whole).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from pilot.dag.model import Task
from pilot.runtime.policy import Allocation
from pilot.runtime.protocol import Recall

if TYPE_CHECKING:
    from pilot.runtime.master import Master

log = logging.getLogger("pilot.master")

# Send a follow-on child only while recent tasks are this short (as prefetching).
FOLLOW_ON_BELOW = 0.25
FOLLOW_ON_DEPTH = 2


def attach_child(master: Master, rank: int, task: Task, alloc: Allocation) -> None:
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
    engine = master.engine
    assert engine is not None
    if master.mean_duration >= FOLLOW_ON_BELOW or engine.stopped or master.matcher.ready_count:
        return
    queue = master.slots.queued.get(rank)
    if queue and rank not in master.slots.conditional:
        return  # prefetched work waits there
    parent = queue[-1] if queue else task
    depth = len(queue) if queue else 0
    gpus = len(alloc.gpu_ids)
    left = master.time_left()
    if left is not None:
        left -= _work_ahead(master, rank)
    while depth < FOLLOW_ON_DEPTH and not parent.spec.pipe_forwards and not parent.spec.file_forwards:
        child = next((c for c in parent.children if engine.follow_on(c, parent) and c.spec.cpus <= alloc.cpus
                      and c.spec.memory <= alloc.memory and c.spec.gpus <= gpus
                      and (left is None or not master.matcher.too_long(c, left))), None)
        if child is None:
            return
        if left is not None:
            left -= child.runtime or 0.0
        master._send_task(child, alloc, after=parent)
        master.slots.add_conditional(rank, child)
        parent = child
        depth += 1


def prefetch(master: Master) -> None:
    """Queue ready tasks behind running ones that have room (see ``Slots``), best priority first."""
    left = master.time_left()
    for rank, alloc in master.slots.with_room():
        task = master.matcher.pick_within(alloc, None if left is None else left - _work_ahead(master, rank))
        if task is not None:
            master._send_task(task, alloc)
            master.slots.add(rank, task)
        if not master.matcher.ready_count:
            return


def recall(master: Master) -> None:
    """Take back prefetched tasks for slots that fell idle with nothing ready (see ``Slots.to_recall``)."""
    for rank, task in master.slots.to_recall(master.matcher.fits_now, master.matcher.has_idle_slot):
        master.t.send(rank, Recall(task.name))


def recalled(master: Master, source: int, name: str) -> None:
    """A worker gave ``name`` back unstarted: it is ready again (unless a parent failed meanwhile)."""
    engine = master.engine
    assert engine is not None
    task = master.slots.recalled(source, name)
    if task is None:
        log.error("worker %d gave back %s, which it did not hold", source, name)
        return
    engine.unstart(task)
    if not engine.stopped and engine.is_ready(task):
        master.matcher.push(task)


def _work_ahead(master: Master, rank: int) -> float:
    """Seconds of known runtime before a task sent now to ``rank`` would start: its running and queued tasks."""
    running = master.slots.running.get(rank)
    total = (running[0].runtime or 0.0) if running is not None else 0.0
    return total + sum(t.runtime or 0.0 for t in master.slots.queued.get(rank, ()))


# While every worker has prefetched work waiting, the master need not look at
# its messages more often than this: each look is a wakeup taken from tasks.
MAX_PATIENCE = 2e-3


def patience(master: Master) -> float:
    """How long the master may sleep before looking at results.

    0 unless every slot is busy, every worker has a task queued behind its
    running one and the queues are half full on average: a worker then has
    about depth/2 mean task times of work left, and the master sleeps a
    quarter of that (at most MAX_PATIENCE) before it refills them.
    """
    slots = master.slots
    if slots.dry or slots.queued_total * 2 < len(slots.running) * slots.depth or master.matcher.has_idle_slot():
        return 0.0
    return min(MAX_PATIENCE, slots.depth * master.mean_duration / 4)
