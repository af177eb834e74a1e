"""New complete lines of an append-only file, each read once.

``pilot submit`` follows a pilot's rescue log and jobstate.log with it, and a
pilot's master the ``DAG.lost`` file its workers' watchdogs append to: each
look reads only what was added since the last, so following a file costs its
new lines, not its whole history. A path that is not a regular file (a
directory, a FIFO) is a one-line ConfigError, never a hang.
"""

from __future__ import annotations

import os

from pilot.errors import ConfigError
from pilot.util.safeopen import open_regular_fd

READ_HINT = "pilot writes this file itself: move what is there out of the way"


class Tail:
    """New complete lines of an append-only file since the last call."""

    def __init__(self, path: str, from_end: bool = False) -> None:
        """``from_end``: what the file holds now is old (another run's): only lines added later count."""
        self.path = path
        self.offset = 0
        self.ino: int | None = None
        if from_end:
            try:
                st = os.stat(path)
                self.offset, self.ino = st.st_size, st.st_ino
            except OSError:
                pass

    def lines(self) -> tuple[bool, list[str]]:
        """(the file was replaced or truncated since last time, its new lines)."""
        try:
            with os.fdopen(open_regular_fd(self.path), "rb") as fh:
                st = os.fstat(fh.fileno())
                reset = (self.ino is not None and st.st_ino != self.ino) or st.st_size < self.offset
                if reset:
                    self.offset = 0
                self.ino = st.st_ino
                fh.seek(self.offset)
                data = fh.read()
        except FileNotFoundError:
            reset = self.offset > 0
            self.offset, self.ino = 0, None
            return reset, []
        except OSError as exc:  # a directory or FIFO where the file should be, a file that cannot be read
            raise ConfigError(f"{self.path}: cannot read: {exc.strerror}; {READ_HINT}") from None
        end = data.rfind(b"\n") + 1  # a line still being written waits for its newline
        self.offset += end
        return reset, data[:end].decode("utf-8", "surrogateescape").splitlines()
