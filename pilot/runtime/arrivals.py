"""The DAGs a long-lived pilot run has read from its inbox and not yet taken, their files opened ahead.

A fed DAG's run needs its lock, DAG and rescue log before its first task
(``DagRun.open_files``), and opens its job stderr, ``-o``/``-e``, jobstate.log
and resource log just after (``DagRun.open_later``). Creating a file took 0.1
to 20 ms where file creation is slow (a VM's disk; a shared file system's
metadata server is no quicker), and a fan of clusters fed at once would wait
for each other's: so each run's files are opened on a thread of its own as
soon as its request is read, in the order the requests came, while the master
dispatches, and the master takes the first one once they are open
(``DagRun.begin``, some 0.1 ms). The files a run opens later are handed to
that thread once the fed DAGs started their first tasks (the agent holds
them: ``pilot.runtime.deferred``), and wait there until no request read waits
for its first ones. That thread touches nothing the runs share (both openings
are only the run's own files).
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Collection, Iterator
from concurrent.futures import Future, ThreadPoolExecutor

from pilot.contracts.inbox import Request
from pilot.errors import PilotError
from pilot.runtime.dagrun import DagRun

log = logging.getLogger("pilot.master")


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
        # What the opening thread does next (one step submitted for each): the first files of the runs read, in
        # that order, before any run's later files.
        self._first: collections.deque[tuple[DagRun, Future[None]]] = collections.deque()
        self._later: collections.deque[DagRun] = collections.deque()

    def __len__(self) -> int:
        return len(self._queue)

    def __iter__(self) -> Iterator[Arrival]:
        """The requests waiting, the first read first."""
        return iter(self._queue)

    def add(self, req: Request, run: DagRun | PilotError | None) -> None:
        """``req`` read, with its run to open, why its options were refused, or nothing (see ``Arrival``)."""
        if isinstance(run, DagRun):
            opening: Future[None] = Future()
            self._first.append((run, opening))
            self._queue.append(Arrival(req, run, opening, None))
            self._opener.submit(self._step)
        else:
            self._queue.append(Arrival(req, None, None, run))

    def first_ready(self) -> bool:
        """Whether the first request read can be taken without waiting for its files."""
        opening = self._queue[0].opening
        return opening is None or opening.done()

    def open_later(self, run: DagRun) -> None:
        """Open the files of a run just taken that its first tasks did not wait for (``DagRun.open_later``), after
        the first files of every request read: those runs' first tasks wait for them."""
        self._later.append(run)
        self._opener.submit(self._step)

    def _step(self) -> None:
        """On the opening thread: the first files of the next run read, else the later files of the next run
        taken."""
        if self._first:
            run, opening = self._first.popleft()
            opening.set_running_or_notify_cancel()
            try:
                run.open_files()
            except BaseException as exc:  # noqa: BLE001 - the take raises it, on the master's thread
                opening.set_exception(exc)
            else:
                opening.set_result(None)
            return
        run = self._later.popleft()
        try:
            run.open_later()
        except Exception as exc:  # noqa: BLE001 - its files are said unwritten at its end; the others go on
            log.error("%s: opening its files failed: %s", run.id, exc, exc_info=log.isEnabledFor(logging.DEBUG))

    def pop(self) -> Arrival:
        return self._queue.popleft()

    def holds_any(self, ids: Collection[str]) -> bool:
        return any(a.req.id in ids for a in self._queue)

    def end(self) -> None:
        """Let every request not taken go (see ``Arrival.let_go``), and the opening thread end."""
        while self._queue:
            self._queue.popleft().let_go()
        self._opener.shutdown(wait=True)
