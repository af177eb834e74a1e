"""The DAG lock: one pilot per DAG at a time, held for the whole run.

PMC takes the lock and drops it right after parsing, so a second job on the
same DAG can start while the first still runs and both append to the rescue
log. Here the lock is an ``flock`` on the DAG file (pilot.util.flock) kept
until the process exits, also when it is killed.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass

from pilot.errors import DagError, LockError
from pilot.util.flock import FileLock, held_elsewhere, lock_owner


class DagLock:
    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = FileLock(path)

    def acquire(self) -> None:
        try:
            self._lock.open()
        except OSError as exc:
            raise DagError(self.path, None, f"cannot open DAG: {exc.strerror}") from exc
        try:
            locked = self._lock.try_lock()
        except OSError as exc:  # some file systems refuse locks altogether
            raise LockError(f"{self.path}: cannot lock the DAG ({exc.strerror}); pass -n/--nolock to run without the lock") from None
        if not locked:
            raise LockError(
                f"{self.path}: locked by another pilot run of this DAG; wait for it to end, "
                "or pass -n/--nolock if you are sure no other run uses it"
            )

    def release(self) -> None:
        self._lock.release()


@dataclass(frozen=True)
class DagRun:
    """A pilot run that holds a DAG's lock, as another process sees it."""

    pid: int | None  # None: not on this host (another node of a shared file system)
    host: str | None

    def where(self) -> str:
        return f"pid {self.pid} on {self.host}" if self.pid is not None else "on another host"


def running(path: str, try_lock: bool = True) -> DagRun | None:
    """The pilot run that holds the DAG lock of ``path``, or None when none does.

    /proc/locks names a holder on this host without touching the lock; only
    when it names none, and ``try_lock``, is a shared lock tried without
    waiting and dropped at once (a holder on another node shows only so).
    That try could make a ``pilot run`` starting in the same instant find the
    DAG locked: try it only before starting a run of the DAG, or once nothing
    starts one (pilot cancel), never beside a driver at work (pilot status).
    """
    pid = lock_owner(path)
    if pid is not None:
        return DagRun(pid, socket.gethostname())
    if not try_lock:
        return None
    with held_elsewhere(path) as fd:
        return None if fd is None else DagRun(None, None)
