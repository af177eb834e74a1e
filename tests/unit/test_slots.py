"""Slots: prefetch depth and recalls, the bookkeeping the master relies on for ordering."""

from __future__ import annotations

from pilot.dag.model import Task
from pilot.runtime.slotmatch import Allocation
from pilot.runtime.slots import Slots


def _alloc(rank: int) -> Allocation:
    return Allocation(rank, None, 1, 0, ())  # type: ignore[arg-type]  # the host is not looked at here


def _busy(depth: int) -> tuple[Slots, list[Task]]:
    slots = Slots(depth)
    tasks = [Task(f"t{i}", ["/bin/true"]) for i in range(6)]
    slots.start(1, tasks[0], _alloc(1), 1)
    return slots, tasks


def test_with_room_stops_at_depth():
    slots, tasks = _busy(depth=3)
    added = 0
    for rank, _ in slots.with_room():
        slots.add(rank, tasks[1 + added])
        added += 1
        if added == 5:
            break
    assert added == 3 and slots.queued_total == 3 and not slots.dry


def test_recall_all_takes_back_every_queued_task_in_order():
    slots, tasks = _busy(depth=4)
    for task in tasks[1:4]:
        slots.add(1, task)
    assert not slots.dry
    picked = slots.recall_all()
    assert [t.name for _, t in picked] == ["t1", "t2", "t3"] and slots.queued_total == 0 and slots.dry == {1}
    # t0 ended and the worker started t1 before the recalls reached it: its result comes
    # first, then it gives back the others in the order they were asked for.
    done, alloc, _, went_on_to = slots.finish(1)
    assert done is tasks[0] and went_on_to is tasks[1]
    slots.start(1, went_on_to, alloc, 2)
    assert slots.recalled(1, "t2") is tasks[2] and slots.recalled(1, "t3") is tasks[3]
    assert not slots.recalling and slots.dry == {1}


def test_finish_after_recall_without_start_goes_on_to_nothing():
    slots, tasks = _busy(depth=2)
    slots.add(1, tasks[1])
    slots.recall_all()
    assert slots.recalled(1, "t1") is tasks[1]
    assert slots.finish(1)[3] is None and not slots.recalling and 1 not in slots.running and not slots.dry
