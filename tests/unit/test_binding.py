"""Late binding's choice alone (pilot.submit.binding): which pilot job a ready cluster goes to, given what each
block offers, the cluster's estimated makespan and whether another block may come."""

from __future__ import annotations

from pilot.submit.binding import Offer, choose


def offer(label: str, time_left: float = 3600.0, load: int = 0, **kw) -> Offer:
    return Offer(label, kw.pop("running", True), kw.pop("room", True), time_left, kw.pop("margin", 60.0), load, **kw)


def test_of_the_blocks_with_time_for_the_makespan_the_least_loaded_then_the_longest_left_takes_it():
    blocks = [offer("busy", 3600, load=2), offer("short", 1000, load=0), offer("long", 3000, load=0)]
    assert choose(blocks, makespan=600, may_add=False) == "long"
    assert choose(blocks, makespan=2000, may_add=False) == "long"  # "short" lacks the time, "busy" is busier
    assert choose(blocks, makespan=3200, may_add=False) == "busy"  # the only one with the time


def test_a_block_without_room_pending_spent_or_in_its_end_margin_is_never_chosen():
    assert choose([offer("full", room=False)], 10, may_add=False) is None
    assert choose([offer("pending", running=False)], 10, may_add=False) is None
    assert choose([offer("spent", spent=True)], 10, may_add=False) is None
    assert choose([offer("ending", time_left=50, margin=60)], 10, may_add=False) is None
    assert choose([offer("full", room=False), offer("ok", time_left=100, margin=10)], 10, may_add=False) == "ok"
    assert choose([], 10, may_add=True) is None


def test_without_enough_time_anywhere_it_waits_for_a_fresh_block_while_one_may_come_else_takes_the_longest():
    short = [offer("a", 700), offer("b", 900)]
    assert choose(short, makespan=3000, may_add=True) is None  # a fresh block has its whole wall time
    assert choose([*short, offer("coming", running=False)], makespan=3000, may_add=False) is None
    assert choose(short, makespan=3000, may_add=False) == "b"  # none comes: the most time left, resumed if cut


def test_an_unknown_makespan_fits_any_block_with_room_beyond_its_margin():
    assert choose([offer("a", 61, margin=60, load=1), offer("b", 70, margin=60, load=3)], 0.0, may_add=True) == "a"
