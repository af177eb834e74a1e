"""Open the files pilot reads and writes as regular files only: never a FIFO, and written never through a link.

Reading (``open_regular_fd``): a FIFO would block until a writer came, a device
(``/dev/zero``) would fill memory, a directory says nothing; each is refused
with an OSError (``NotAFile``) that says what is there. ``read_at_most`` is
the one way pilot reads a file whose size it does not control (a user may
have put anything under a name pilot reads): its first bytes up to a cap.

Writing (``open_fd``, ``open_file``), for the files pilot names itself beside a DAG or in a submit directory:

pilot rewrites and appends to files it names itself (the rescue log, which a
run empties at its start, jobstate.log, dagman.out, the resource log, task
stdio, the crash records, submit.state.json's temporary file). A symbolic link
planted under one of those names would make pilot rewrite whatever it points to,
anywhere the user may write; a FIFO would block the writer until some reader
came. So the last component is opened with ``O_NOFOLLOW`` and without
blocking, and must be a regular file; either problem is an OSError whose
``strerror`` says what is there and what to do, for the caller's one-line
error. (The directories above are the user's choice, links or not.)
"""

from __future__ import annotations

import errno
import os
import stat
from typing import IO, Any


class NotAFile(OSError):
    """A directory, FIFO, device or socket where pilot reads a file."""


def file_kind(mode: int) -> str:
    """What a path that is not a regular file is, for a message."""
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a device"),
        (stat.S_ISBLK, "a device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a plain file"


def open_regular_fd(path: str) -> int:
    """A read-only descriptor of ``path``, which must be a regular file, else an OSError saying what it is; opened
    without blocking, so that a FIFO is refused at once rather than waited on."""
    return _regular(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC), path, "")


def read_at_most(path: str, max_bytes: int) -> bytes:
    """The first ``max_bytes`` of the regular file ``path`` (all of it when it is shorter); OSError as for
    ``open_regular_fd`` or the read. Whether a longer file is an error is the caller's to say: ask for one byte
    more than may be there."""
    with os.fdopen(open_regular_fd(path), "rb") as fh:
        return fh.read(max_bytes)


def _regular(fd: int, path: str, fix: str) -> int:
    """``fd`` made blocking again if it is a regular file; else closed, and an OSError saying what it is."""
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise NotAFile(errno.EINVAL, f"is {file_kind(mode)}, not a file{fix}", path)
    os.set_blocking(fd, True)
    return fd


LINK = (
    "is a symbolic link, which pilot does not write through (it would rewrite the file it points to): remove the link"
)


def open_fd(path: str, flags: int, mode: int = 0o644) -> int:
    """``os.open`` for writing, refusing a symbolic link or anything but a regular file at ``path``."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK) and os.path.islink(path):
            raise OSError(errno.ELOOP, LINK, path) from None
        if exc.errno == errno.ENXIO:  # a FIFO opened for writing without a reader
            raise OSError(errno.ENXIO, "is a FIFO, not a file: remove it", path) from None
        raise
    return _regular(fd, path, ": remove it")


_FLAGS = {"a": os.O_WRONLY | os.O_CREAT | os.O_APPEND, "w": os.O_WRONLY | os.O_CREAT | os.O_TRUNC}


def open_file(path: str, mode: str = "a", **kwargs: Any) -> IO[Any]:
    """``open(path, mode, ...)`` for ``a``/``w`` (``b`` for bytes), through ``open_fd``."""
    fd = open_fd(path, _FLAGS[mode.replace("b", "")])
    try:
        return os.fdopen(fd, mode, **kwargs)
    except BaseException:
        os.close(fd)
        raise


def make_dir(path: str) -> None:
    """``os.makedirs(path, exist_ok=True)``, refusing a symbolic link at ``path``: the files pilot writes into a
    directory it names itself would land wherever the link points."""
    os.makedirs(path, exist_ok=True)
    if os.path.islink(path):
        raise OSError(errno.ELOOP, LINK, path)
