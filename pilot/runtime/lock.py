"""The DAG lock: one pilot per DAG at a time, held for the whole run.

PMC takes the lock and drops it right after parsing, so a second job on the
same DAG can start while the first still runs and both append to the rescue
log. Here the lock is an ``flock`` on the DAG file kept until the process
exits (also when it is killed: the kernel releases it). ``flock`` binds to
the open file, so reading the DAG again does not drop it as ``fcntl`` locks
would. On NFS, Linux maps flock to byte-range locks, which lockd shares
between nodes.
"""

from __future__ import annotations

import fcntl
import os

from pilot.errors import DagError, LockError


class DagLock:
    def __init__(self, path: str) -> None:
        self.path = path
        self._fd = -1

    def acquire(self) -> None:
        try:
            self._fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            raise DagError(self.path, None, f"cannot open DAG: {exc.strerror}") from exc
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._fd)
            self._fd = -1
            raise LockError(
                f"{self.path}: locked by another pilot run of this DAG; wait for it to end, "
                "or pass -n/--nolock if you are sure no other run uses it"
            ) from None
        except OSError as exc:
            # Some file systems refuse locks altogether; say so and go on unlocked.
            os.close(self._fd)
            self._fd = -1
            raise LockError(f"{self.path}: cannot lock the DAG ({exc.strerror}); pass -n/--nolock to run without the lock") from None

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
