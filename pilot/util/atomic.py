"""Replace a file atomically and durably: readers see the old or the new content, never a mix.

The content goes to a temporary file in the same directory, which is
flushed and fsynced, renamed over the target (atomic on POSIX), and then the
directory is fsynced so that the rename itself survives a power loss. Without
the last step a crash can leave the old file, or none, after the writer
believed the new one safe. On any error the temporary file is removed; the
temporary file is ``<path>.tmp.<pid>``, so a leftover of a killed writer can be
told from a live writer's (pilot.contracts.rescue removes such leftovers).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import IO

from pilot.util.safeopen import open_file


@contextlib.contextmanager
def atomic_file(path: str, errors: str = "strict", durable: bool = True) -> Iterator[IO[str]]:
    """Open a temporary UTF-8 text file; on a clean exit it replaces ``path`` (file and directory fsynced).

    ``errors`` is open()'s: ``surrogateescape`` writes back bytes that were read that way. ``durable=False``
    skips both fsyncs: the file is still whole or absent to any reader, but an operating system crash may
    lose it, for messages between live processes that a restart sends again (a pilot job's inbox), where
    two fsyncs would cost more than the rest of the exchange.
    """
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        with open_file(tmp, "w", encoding="utf-8", errors=errors) as fh:  # never through a link planted there
            yield fh
            fh.flush()
            if durable:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if durable:
        fsync_dir(os.path.dirname(path) or ".")


def write_atomic(path: str, text: str, durable: bool = True) -> None:
    """Replace ``path`` by ``text`` (UTF-8) as ``atomic_file`` does."""
    with atomic_file(path, durable=durable) as fh:
        fh.write(text)


def fsync_dir(path: str) -> None:
    """Make the directory's entries (a rename, a new file) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
