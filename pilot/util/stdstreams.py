"""Standard streams and files that can no longer be written: a reader that closed its pipe, a full disk.

A command whose stdout is piped into ``head`` meets a closed pipe as soon as
``head`` has what it wants, and a disk fills whoever writes to it. Both are
the user's situation, not a bug of pilot: the CLI wrapper (pilot.cli.common)
and the end of a ``pilot run`` (pilot.runtime.report) use these helpers to
tell them apart from other errors and to end quietly or with one line.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable
from typing import IO, Any

# The errors of a write that only more room can cure: the disk, the user's quota, the file size limit.
NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def is_no_space(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in NO_SPACE


class Watched:
    """A text stream (sys.stdout) that remembers the error of its last failed write: a full disk or a closed pipe
    met by ``print`` carries no file name, and this tells it from the same error on a file the command writes."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.error: OSError | None = None

    def write(self, text: str) -> int:
        try:
            return self.stream.write(text)
        except OSError as exc:
            self.error = exc
            raise

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self.stream.flush()
        except OSError as exc:
            self.error = exc
            raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def discard(stream: IO[Any]) -> None:
    """Point ``stream``'s descriptor at /dev/null, so that what it still buffers, and the interpreter's own flush
    at exit, go nowhere instead of failing again (which Python reports as "Exception ignored" and exit status 120)."""
    try:
        fd = stream.fileno()
    except (OSError, ValueError):
        return
    null = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.dup2(null, fd)
    finally:
        os.close(null)
