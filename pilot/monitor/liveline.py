"""pilot run's one-line progress on a terminal: tasks done, running, failed, of the total, redrawn in place.

Drawn only where someone watches: rank 0's stderr is a terminal, or a pipe
that the MPI launcher forwards to its own stderr when that is a terminal
(mpiexec gives its ranks pipes, not the terminal; ``stderr_reaches_terminal``
follows them up). In a batch job, or with stderr sent to a file or to another
program (a script capturing the output), nothing is drawn and nothing is
added to the run.

Off the master's hot path: the status events of its loop only store four
numbers, and the line is drawn when the master flushes its logs (at most
twice a second). A log line the master writes meanwhile first clears the line
(``attach`` puts a filter on the log handler); the next flush draws it again.
"""

from __future__ import annotations

import logging
import os
import time
from typing import TextIO

from pilot.monitor.events import RunEvents

CLEAR = "\r\x1b[K"
MAX_HOPS = 4  # rank -> launcher proxy -> mpiexec: a longer chain of pipes is not a launcher's
MAX_FDS = 256
# Processes that copy their ranks' stderr to their own (names as /proc/PID/comm shows them: 15 characters at most).
LAUNCHERS = frozenset(
    {
        "mpiexec",
        "mpirun",
        "mpiexec.hydra",
        "hydra_pmi_proxy",
        "mpiexec.mpich",
        "mpirun.mpich",
        "mpiexec.openmpi",
        "mpirun.openmpi",
        "orted",
        "prted",
        "prterun",
        "mpiexec.gforker",
    }
)


def stderr_reaches_terminal() -> bool:
    """Whether this process's stderr ends on a terminal, directly or through the launcher's forwarding pipes.

    A pipe counts as forwarding when the parent process is an MPI launcher
    (``LAUNCHERS``) that holds it (it reads it and writes what it reads to its
    own stderr, as mpiexec and its proxies do); a pipe to any other process
    (``| less``, a script capturing the output) does not. Linux ``/proc``
    only; elsewhere only a direct terminal counts.
    """
    try:
        if os.isatty(2):
            return True
    except OSError:
        return False
    pid = os.getpid()
    for _ in range(MAX_HOPS):
        link = _link(pid, 2)
        parent = _parent(pid)
        if link is None or not link.startswith("pipe:") or parent is None or parent <= 1:
            return False
        if _name(parent) not in LAUNCHERS or link not in _links(parent):
            return False
        if _is_tty(parent):
            return True
        pid = parent
    return False


def _link(pid: int, fd: int | str) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/fd/{fd}")
    except OSError:
        return None


def _links(pid: int) -> set[str]:
    try:
        fds = os.listdir(f"/proc/{pid}/fd")[:MAX_FDS]
    except OSError:
        return set()
    return {link for link in (_link(pid, fd) for fd in fds) if link is not None}


def _name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as fh:
            return fh.read().strip()
    except OSError:
        return ""


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _is_tty(pid: int) -> bool:
    try:
        fd = os.open(f"/proc/{pid}/fd/2", os.O_WRONLY | os.O_NOCTTY)
    except OSError:
        return False
    try:
        return os.isatty(fd)
    finally:
        os.close(fd)


class LiveLine(RunEvents):
    """The progress line, written to ``stream`` (the master's stderr)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.total = 0
        self.counts = (0, 0, 0, 0)  # done, running (started or sent ahead), ready, failed
        self.start = time.monotonic()
        self.shown = False
        self.ended = False

    def attach(self, handler: logging.Handler) -> None:
        """Clear the line before each log record ``handler`` writes to the same stream."""
        handler.addFilter(self._before_log)

    def _before_log(self, record: logging.LogRecord) -> bool:  # noqa: ARG002 - a logging filter
        self.clear()
        return True

    def run_started(self, dag_path: str, total: int, workers: int) -> None:  # noqa: ARG002 - the run observer's signature
        self.total = total
        self.start = time.monotonic()

    def status(self, done: int, queued: int, ready: int, failed: int) -> None:
        self.counts = (done, queued, ready, failed)

    def text(self) -> str:
        done, running, ready, failed = self.counts
        spent = int(time.monotonic() - self.start)
        return (
            f"pilot: {done}/{self.total} done, {running} running, {failed} failed, {ready} ready "
            f"[{spent // 3600}:{spent // 60 % 60:02d}:{spent % 60:02d}]"
        )

    def drained(self) -> None:
        """The run's last counts stay on the terminal, on a line of their own before the report."""
        self.ended = True
        try:
            self.stream.write(CLEAR + self.text() + "\n")
            self.stream.flush()
        except (OSError, ValueError):
            pass
        self.shown = False

    def flush(self) -> None:
        if self.ended:
            return
        try:
            self.stream.write(CLEAR + self.text())
            self.stream.flush()
            self.shown = True
        except (OSError, ValueError):  # the terminal went away: the run goes on without the line
            self.shown = False

    def clear(self) -> None:
        if self.shown:
            self.shown = False
            try:
                self.stream.write(CLEAR)
                self.stream.flush()
            except (OSError, ValueError):
                pass

    def close(self) -> None:
        self.clear()
