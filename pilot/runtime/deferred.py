"""Work of a long-lived pilot run that no task waits for, held back while fed DAGs wait to start.

Two things a fed run does off the dispatch path cost this interpreter and
the disk milliseconds each: closing the record of a run that ended (its
summary, the merge of its stdio, the fsyncs of its rescue log, result and
done file) and opening the files a run just taken only writes (creating its
jobstate.log, dagman.out, job stderr, ``-o``/``-e`` and resource log). Of a
fan of clusters fed at once, the last ones' first tasks would wait behind
the earlier ones' (on two cores, measured: a fifth of the fan's gap). So
each is held while some fed DAG waits to be taken or to start its first
task, and done at once when none does, but never held longer than a bound:
a closed run's done file lets the driver start its children, and a file not
yet opened is not yet there for a monitor to read.
"""

from __future__ import annotations

from typing import Generic, TypeVar

T = TypeVar("T")


class Deferred(Generic[T]):
    """Items held until nothing waits, or ``bound`` seconds after the first of them came."""

    def __init__(self, bound: float) -> None:
        self.bound = bound
        self._items: list[T] = []
        self._since = 0.0  # when the first item held came

    def __bool__(self) -> bool:
        return bool(self._items)

    def add(self, item: T, now: float) -> None:
        if not self._items:
            self._since = now
        self._items.append(item)

    def discard(self, item: T) -> None:
        """Hold ``item`` no longer (what it was held for is done another way)."""
        if item in self._items:
            self._items.remove(item)

    def due(self, now: float, waiting: bool) -> bool:
        """Whether to do them now (all of them): ``waiting``, whether some fed DAG waits to start."""
        return bool(self._items) and (not waiting or now - self._since >= self.bound)

    def take(self) -> list[T]:
        """Every item held, to be done now."""
        items, self._items = self._items, []
        return items
