"""``submit.lock``: one ``pilot submit`` per submit directory, and how ``pilot cancel`` stops it.

The driver holds an ``flock`` on the file for its whole life (the kernel
drops it when the process dies, even by SIGKILL) and writes its pid there, so
``pilot status`` can tell whether a driver is at work and ``pilot cancel`` can
ask it to stop before cancelling the jobs it submitted.
"""

from __future__ import annotations

import fcntl
import os
import signal

from pilot.errors import ConfigError
from pilot.util.flock import FileLock, held_elsewhere

LOCK_FILE = "submit.lock"


class SubmitLock:
    def __init__(self, submit_dir: str) -> None:
        self.path = os.path.join(submit_dir, LOCK_FILE)
        self._lock = FileLock(self.path, create=True)

    def acquire(self) -> None:
        self._lock.open()
        if not self._lock.try_lock():
            raise ConfigError(f"{os.path.dirname(self.path)}: another pilot submit drives this directory "
                              f"(pid {holder(os.path.dirname(self.path)) or '?'}; see pilot status; pilot cancel stops it)")
        os.ftruncate(self._lock.fd, 0)
        os.pwrite(self._lock.fd, f"{os.getpid()}\n".encode(), 0)

    def release(self) -> None:
        self._lock.release()


def holder(submit_dir: str) -> int | None:
    """The pid of the pilot submit that holds the lock (0 when it has not written it yet); None when no driver runs."""
    with held_elsewhere(os.path.join(submit_dir, LOCK_FILE)) as fd:
        return None if fd is None else _pid(fd)


def stop_holder(submit_dir: str) -> int | None:
    """SIGTERM the driver of ``submit_dir`` (it then submits nothing more) and wait until it let go."""
    with held_elsewhere(os.path.join(submit_dir, LOCK_FILE)) as fd:
        if fd is None:
            return None
        pid = _pid(fd)
        if pid:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        fcntl.flock(fd, fcntl.LOCK_SH)  # returns once the driver has exited
        return pid


def _pid(fd: int) -> int:
    text = os.pread(fd, 32, 0).decode(errors="replace").strip()
    return int(text) if text.isdigit() else 0
