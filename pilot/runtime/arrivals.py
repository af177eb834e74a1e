"""The DAGs a long-lived pilot run has read from its inbox and not yet taken, their files opened ahead.

A fed DAG's run opens its lock, DAG, rescue log, job stderr, ``-o``/``-e``,
jobstate.log and resource log before its first task (``DagRun.open_files``).
Creating those files took 1 to 20 ms a run where file creation is slow (a
VM's disk; a shared file system's metadata server is no quicker), and a fan
of clusters fed at once would wait for each other's: so each run is opened on
a thread of its own as soon as its request is read, in the order the requests
came, while the master dispatches, and the master takes the first one once
its files are open (``DagRun.begin``, some 0.1 ms). That thread touches
nothing the runs share (``open_files`` is only the run's own files).
"""

from __future__ import annotations

import collections
from collections.abc import Collection, Iterator
from concurrent.futures import Future, ThreadPoolExecutor

from pilot.contracts.inbox import Request
from pilot.errors import PilotError
from pilot.runtime.dagrun import DagRun


class Arrival:
    """A request read: its run and the opening of its files; or why its options were refused (the take says it,
    in the order of takes); or neither (read while its pilot run stops: never taken)."""

    __slots__ = ("opening", "refused", "req", "run")

    def __init__(
        self, req: Request, run: DagRun | None, opening: Future[None] | None, refused: PilotError | None
    ) -> None:
        self.req = req
        self.run = run
        self.opening = opening
        self.refused = refused

    def let_go(self) -> None:
        """Never to be taken (its pilot run stops): what was opened is closed, its lock released, nothing
        recorded, so that it resumes elsewhere as it is."""
        if self.run is None or self.opening is None:
            return
        try:
            self.opening.result()
        except Exception:  # noqa: BLE001 - what it could not open is not held; the rest is let go below
            pass
        self.run.discard()


class Arrivals:
    """The requests read and not yet taken, first come first taken, each run's files opened ahead in that order."""

    def __init__(self) -> None:
        self._queue: collections.deque[Arrival] = collections.deque()
        self._opener = ThreadPoolExecutor(1, thread_name_prefix="pilot-open")

    def __len__(self) -> int:
        return len(self._queue)

    def __iter__(self) -> Iterator[Arrival]:
        """The requests waiting, the first read first."""
        return iter(self._queue)

    def add(self, req: Request, run: DagRun | PilotError | None) -> None:
        """``req`` read, with its run to open, why its options were refused, or nothing (see ``Arrival``)."""
        if isinstance(run, DagRun):
            self._queue.append(Arrival(req, run, self._opener.submit(run.open_files), None))
        else:
            self._queue.append(Arrival(req, None, None, run))

    def first_ready(self) -> bool:
        """Whether the first request read can be taken without waiting for its files."""
        opening = self._queue[0].opening
        return opening is None or opening.done()

    def pop(self) -> Arrival:
        return self._queue.popleft()

    def holds_any(self, ids: Collection[str]) -> bool:
        return any(a.req.id in ids for a in self._queue)

    def end(self) -> None:
        """Let every request not taken go (see ``Arrival.let_go``), and the opening thread end."""
        while self._queue:
            self._queue.popleft().let_go()
        self._opener.shutdown(wait=True)
