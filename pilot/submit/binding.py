"""Late binding's choice: which pilot job (block) a ready cluster is bound to, or none yet.

Kept apart from launching (pilot.submit.pilots) so that the choice is a
function of what the blocks offer and what the cluster needs, nothing else:

- a block is a candidate only while it runs, has room for the cluster now,
  has more than its end margin left, and is not one the cluster already ran
  out of time in (it would have even less there now);
- among the candidates, those with the wall time left for the cluster's
  estimated makespan (plus the margin) come first, and of them the least
  loaded (fed: the fewest clusters; else the fewest free slots, to pack),
  then the one with the most time left;
- when none has that time, the cluster waits while a fresh block may still
  come (one may be added, or one is pending at the site): a fresh one has its
  whole wall time; with none coming, it goes to the one with the most time
  left, and resumes elsewhere from its rescue log if that block ends first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Offer:
    """What one block of the cluster's site offers it now."""

    label: str
    running: bool  # its worker pool is up (fed: its pilot run too); a pending one is a block still coming
    room: bool  # it has the nodes (or slots) the cluster needs free now
    time_left: float  # seconds of wall time it has left
    margin: float  # seconds of its end no cluster starts in
    load: int  # what it holds already (fed: its clusters; else its free slots): the smallest first
    spent: bool = False  # the cluster ran out of its time in this block before


def choose(offers: Sequence[Offer], makespan: float, may_add: bool) -> str | None:
    """The label of the block to bind a cluster of estimated ``makespan`` seconds to, or None to wait.
    ``may_add``: whether another block may still be submitted at the site."""
    usable = [o for o in offers if o.running and o.room and not o.spent and o.time_left > o.margin]
    if not usable:
        return None
    fits = [o for o in usable if o.time_left >= makespan + o.margin]
    if fits:
        return min(fits, key=lambda o: (o.load, -o.time_left)).label
    if may_add or any(not o.running for o in offers):
        return None  # a fresh block will fit it better than what is left of these
    return max(usable, key=lambda o: o.time_left).label
