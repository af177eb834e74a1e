"""``submit.lock``: one ``pilot submit`` per submit directory, and how ``pilot cancel`` stops it.

The driver holds an ``flock`` on the file for its whole life (the kernel
drops it when the process dies, even by SIGKILL) and writes its pid there, so
``pilot status`` can tell whether a driver is at work and ``pilot cancel`` can
ask it to stop before cancelling the jobs it submitted. It removes the file
as it ends; a driver that finds the file it locked removed (its holder ended
meanwhile) locks the new one instead, so two drivers never hold two files.
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
        for _ in range(10):
            try:
                self._lock.open()
            except OSError as exc:  # a read-only directory, a lock path that is a directory or FIFO
                raise ConfigError(
                    f"{self.path}: cannot create the lock file ({exc.strerror}): pilot submit keeps its "
                    f"lock, state and logs in the submit directory; make it writable (or move what is "
                    f"there out of the way)"
                ) from None
            if not self._lock.try_lock():
                raise ConfigError(
                    f"{os.path.dirname(self.path)}: another pilot submit drives this directory "
                    f"(pid {holder(os.path.dirname(self.path)) or '?'}; see pilot status; pilot cancel stops it)"
                )
            if self._is_the_file():
                break
            self._lock.release()  # a driver that ended removed the file we opened: lock the one there now
        os.ftruncate(self._lock.fd, 0)
        os.pwrite(self._lock.fd, f"{os.getpid()}\n".encode(), 0)

    def _is_the_file(self) -> bool:
        try:
            return os.stat(self.path).st_ino == os.fstat(self._lock.fd).st_ino
        except FileNotFoundError:
            return False

    def release(self) -> None:
        """Remove the file while still holding it, then let go: a finished run leaves no lock file behind (one a
        SIGKILL left is harmless: the kernel dropped its lock, and the next driver takes it over)."""
        if self._lock.fd >= 0:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
        self._lock.release()


def holder(submit_dir: str) -> int | None:
    """The pid of the pilot submit that holds the lock (0 when it has not written it yet); None when no driver runs."""
    with held_elsewhere(os.path.join(submit_dir, LOCK_FILE)) as fd:
        return None if fd is None else _pid(fd)


# What pilot cancel sends the driver, as condor_rm sends DAGMan: it stops as on SIGTERM, knowing that its
# batch jobs are being cancelled (so it does not say they keep running).
CANCEL_SIGNAL = signal.SIGUSR1


def stop_holder(submit_dir: str) -> int | None:
    """Stop the driver of ``submit_dir`` with CANCEL_SIGNAL (it then submits nothing more) and wait until it let go."""
    with held_elsewhere(os.path.join(submit_dir, LOCK_FILE)) as fd:
        if fd is None:
            return None
        pid = _pid(fd)
        if pid:
            try:
                os.kill(pid, CANCEL_SIGNAL)
            except ProcessLookupError:
                pass
        fcntl.flock(fd, fcntl.LOCK_SH)  # returns once the driver has exited
        return pid


def _pid(fd: int) -> int:
    text = os.pread(fd, 32, 0).decode(errors="replace").strip()
    return int(text) if text.isdigit() else 0
