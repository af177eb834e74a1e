"""Pause the cyclic garbage collector while a large structure that lives on is built.

Reading a DAG, a workflow or planning a million jobs makes millions of
objects that all survive; the collector would scan them again and again for
nothing (a third of a 10^6-task parse, a fifth of a 10^6-job plan). Reference
counting still frees what dies; the collector is back on afterwards (if it was
on before), also when the body raises.

When it is back on, what was built is moved to the oldest generation first
(``gc.freeze`` and ``gc.unfreeze`` move every object there without scanning it),
where it would arrive anyway after two collections. Otherwise the first
allocation after the pause starts a collection of the youngest generation that
scans all of it: some 3% of a plan of a million jobs, and as much again when it
moves on to the middle generation. A cycle among these objects is still found
by the next full collection.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.freeze()
            gc.unfreeze()
            gc.enable()
