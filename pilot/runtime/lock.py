"""The DAG lock: one pilot per DAG at a time, held for the whole run.

PMC takes the lock and drops it right after parsing, so a second job on the
same DAG can start while the first still runs and both append to the rescue
log. Here the lock is an ``flock`` on the DAG file (pilot.util.flock) kept
until the process exits, also when it is killed.
"""

from __future__ import annotations

from pilot.errors import DagError, LockError
from pilot.util.flock import FileLock


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
            raise LockError(
                f"{self.path}: cannot lock the DAG ({exc.strerror}); pass -n/--nolock to run without the lock"
            ) from None
        if not locked:
            raise LockError(
                f"{self.path}: locked by another pilot run of this DAG; wait for it to end, "
                "or pass -n/--nolock if you are sure no other run uses it"
            )

    def release(self) -> None:
        self._lock.release()
