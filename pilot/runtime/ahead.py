"""Work the master sends ahead of need: prefetched tasks and follow-on children.

Both spare a worker the round trip to the master between two short tasks:
a prefetched task waits in the worker's queue behind the running one (see
``Slots``); a follow-on child is sent with the task it depends on and starts
the moment that task succeeds. Neither ever passes over a ready task of
higher priority.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from pilot.dag.model import Task
from pilot.runtime.policy import Allocation

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
    while depth < FOLLOW_ON_DEPTH and not parent.pipe_forwards and not parent.file_forwards:
        child = next((c for c in parent.children if engine.follow_on(c, parent) and c.cpus <= alloc.cpus
                      and c.memory <= alloc.memory and c.gpus <= gpus), None)
        if child is None:
            return
        if master.trace:
            log.log(5, "Scheduling task %s", child.name)
        master._send_task(child, alloc, after=parent)
        master.slots.add_conditional(rank, child)
        parent = child
        depth += 1


def prefetch(master: Master) -> None:
    """Queue ready tasks behind running ones that have room (see ``Slots``), best priority first."""
    for rank, alloc in master.slots.with_room():
        task = master.matcher.pick_within(alloc)
        if task is not None:
            if master.trace:
                log.log(5, "Scheduling task %s", task.name)
            master._send_task(task, alloc)
            master.slots.add(rank, task)
        if not master.matcher.ready_count:
            return
