"""A file opened on another thread than the one writing it: what is written before it opens is kept, in order.

A long-lived pilot run takes many DAGs at once (a fan of clusters fed
together), and each of their first tasks waits for what comes before it. Its
monitoring files (jobstate.log, dagman.out, the resource log), its job stderr
and ``-o``/``-e`` are only written to while it runs, not read, so they need not
exist before its first task: creating them costs a file system some
milliseconds a run where creation is slow, and would make the median cluster of
the fan wait for the creations of all that came before it. A ``LateFile`` is
written to at once (each line with the time it happened, as before) and is
opened later by an opener thread; what was kept is written first, so the file
ends exactly as if it had been open from the start.

An opening that fails is kept, and raised by the next write, flush or close:
the writer's own error path (a monitoring file reported incomplete, the run
going on) says it, as for a write that fails later on.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import IO, Any, AnyStr, Generic


class LateFile(Generic[AnyStr]):
    """The ``write``/``flush``/``close``/``closed`` of a file that ``open`` opens, possibly on another thread."""

    def __init__(self, opener: Callable[[], IO[AnyStr]], name: str = "") -> None:
        self.name = name  # the file, for messages
        self._opener: Callable[[], IO[AnyStr]] | None = opener
        self._fh: IO[AnyStr] | None = None
        self._kept: list[AnyStr] = []
        self._error: OSError | None = None  # why it could not be opened, until raised once
        self._dead = False  # it could not be opened: what is written from then on goes nowhere
        self._flush = False  # a flush was asked for before it opened: what is kept is flushed as it opens
        self._closed = False
        self._lock = threading.Lock()  # what is kept and the publication of the file
        self._opening = threading.Lock()  # one opening at a time (the opener thread's, or a close's)

    def open(self) -> OSError | None:
        """Open the file (once; a file closed first stays closed) and write what was kept; why it could not be."""
        with self._opening:
            opener, self._opener = self._opener, None
            if opener is None:
                return self._error
            try:
                fh = opener()
            except OSError as exc:
                with self._lock:
                    self._error, self._dead = exc, True
                    self._kept.clear()
                return exc
            with self._lock:
                try:
                    for data in self._kept:
                        fh.write(data)
                    if self._flush:
                        fh.flush()
                except OSError as exc:  # the file is open: later writes say it again, as any failed write
                    self._error = exc
                self._kept.clear()
                self._fh = fh
            return self._error

    def write(self, data: AnyStr) -> int:
        fh = self._fh or self._unopened(lambda: self._keep(data))
        return len(data) if fh is None else fh.write(data)

    def _keep(self, data: AnyStr) -> None:
        if not self._dead:  # one that could not be opened keeps nothing
            self._kept.append(data)

    def flush(self) -> None:
        # Nothing on disk yet: what is kept is written, and flushed, as it opens.
        fh = self._fh or self._unopened(lambda: setattr(self, "_flush", True))
        if fh is not None:
            fh.flush()

    def _unopened(self, keep: Callable[[], object]) -> IO[AnyStr] | None:
        """The file, once open (the opener thread may publish it meanwhile); else ``keep()`` under the lock, after
        the opening's error is raised if there is one, and None."""
        with self._lock:
            fh = self._fh
            if fh is None:
                self._raise()
                keep()
            return fh

    def close(self) -> None:
        """Close it; a file not yet opened is opened first, so that it exists with all that was written."""
        if self._closed:
            return
        self.open()
        self._closed = True
        fh = self._fh
        if fh is not None:
            fh.close()
        self._raise()

    @property
    def closed(self) -> bool:
        return self._closed

    def _raise(self) -> None:
        """The opening's error, once: the writer reports it and leaves the file out from then on."""
        exc, self._error = self._error, None
        if exc is not None:
            raise exc


def opened_late(opener: Callable[[], IO[Any]], late: bool, name: str = "") -> Any:
    """The file ``opener`` opens: now, or (``late``) a ``LateFile`` (named ``name``) that its owner opens later."""
    return LateFile(opener, name) if late else opener()


def open_if_late(fh: Any) -> None:
    """Open ``fh`` where it is a ``LateFile`` (a file opened at once needs nothing)."""
    if isinstance(fh, LateFile):
        fh.open()
