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

LOCK_FILE = "submit.lock"


class SubmitLock:
    def __init__(self, submit_dir: str) -> None:
        self.path = os.path.join(submit_dir, LOCK_FILE)
        self._fd = -1

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ConfigError(f"{os.path.dirname(self.path)}: another pilot submit drives this directory "
                              f"(pid {holder(os.path.dirname(self.path)) or '?'}; see pilot status; pilot cancel stops it)") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def holder(submit_dir: str) -> int | None:
    """The pid of the pilot submit that holds the lock; None when no driver runs."""
    path = os.path.join(submit_dir, LOCK_FILE)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return None  # nobody holds it
    except BlockingIOError:
        text = os.pread(fd, 32, 0).decode(errors="replace").strip()
        return int(text) if text.isdigit() else 0
    finally:
        os.close(fd)


def stop_holder(submit_dir: str) -> int | None:
    """SIGTERM the driver of ``submit_dir`` (it then submits nothing more) and wait until it let go."""
    path = os.path.join(submit_dir, LOCK_FILE)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return None
        except BlockingIOError:
            pass
        text = os.pread(fd, 32, 0).decode(errors="replace").strip()
        pid = int(text) if text.isdigit() else 0
        if pid:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        fcntl.flock(fd, fcntl.LOCK_SH)  # returns once the driver has exited
        return pid
    finally:
        os.close(fd)
