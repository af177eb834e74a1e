"""Whole-file ``flock`` locks held for a process's life: the DAG lock of ``pilot run`` and the
submit directory lock of ``pilot submit``.

``flock`` binds to the open file, so reading the locked file again does not
drop the lock as ``fcntl`` record locks would, and the kernel releases it when
the process ends, even by SIGKILL: a crashed holder never leaves a stale lock.
On NFS, Linux maps flock to byte-range locks, which lockd shares between nodes.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
from collections.abc import Iterator

from pilot.util.safeopen import LINK, file_kind


class FileLock:
    """An exclusive lock on ``path``: ``open()`` then ``try_lock()``; ``release()`` or process exit ends it."""

    def __init__(self, path: str, create: bool = False) -> None:
        self.path = path
        self.create = create
        self.fd = -1

    def open(self) -> None:
        """Open the file (created when ``create``); OSError when it cannot be, or is not a regular file (opened
        without blocking: a FIFO there would otherwise wait for a writer forever). A file opened to be written
        (``create``) is never a symbolic link: the holder writes its pid there, which would rewrite the file the
        link points to."""
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW if self.create else os.O_RDONLY
        try:
            fd = os.open(self.path, flags | os.O_CLOEXEC | os.O_NONBLOCK, 0o644)
        except OSError as exc:
            if exc.errno == errno.ELOOP and self.create and os.path.islink(self.path):
                raise OSError(errno.ELOOP, LINK, self.path) from None
            raise
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            os.close(fd)
            raise OSError(errno.EINVAL, f"is {file_kind(mode)}, not a file", self.path)
        os.set_blocking(fd, True)
        self.fd = fd

    def try_lock(self) -> bool:
        """Take the lock without waiting: True when taken, False when another process holds it.

        Any other OSError (a file system that refuses locks) is raised; the file
        is closed in every case but success.
        """
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            self.release()
            return False
        except OSError:
            self.release()
            raise

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


@contextlib.contextmanager
def held_elsewhere(path: str) -> Iterator[int | None]:
    """The file's open descriptor while another process holds its lock; None when nobody does or there is no file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)  # a FIFO: nobody holds it, never a wait
    except OSError:
        yield None
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            yield fd
        else:
            yield None
    finally:
        os.close(fd)


def lock_owner(path: str) -> int | None:
    """The pid of the process on this host that holds a ``flock`` on ``path``, read from /proc/locks (which
    names the file by device and inode): nothing is locked to ask, so a run starting meanwhile never finds
    its lock taken by the question. None when no process here holds one (a holder on another node of a
    shared file system shows only to a lock attempt), or the table cannot be read."""
    try:
        st = os.stat(path)
        with open("/proc/locks", encoding="ascii", errors="replace") as fh:
            table = fh.read()
    except OSError:
        return None
    where = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    for line in table.splitlines():
        fields = line.split()  # "1: FLOCK  ADVISORY  WRITE 6812 fe:00:2148708 0 EOF"; a waiter's has "->" too
        # A holder in a pid namespace this one cannot see shows as pid 0 (or -1): not a process to name here.
        if (
            len(fields) >= 6
            and fields[1] == "FLOCK"
            and fields[5] == where
            and fields[4].isdigit()
            and int(fields[4]) > 0
        ):
            return int(fields[4])
    return None
