"""``jobstate.log``: job events, one line each, as pegasus-monitord reads DAGMan's.

Two writers: ``pilot run --jobstate-log`` next to a cluster's DAG, one job per
task attempt (pilot.monitor.jobstate), and ``pilot submit`` in the submit
directory, one job per cluster attempt (pilot.monitor.root). Readers besides
pegasus-monitord: ``pilot submit`` follows a running cluster's
(``JobstateTail``, pilot.submit.pilotfiles) and ``pilot report`` reads the runs
it frames (``read_jobstate``, pilot.report.runs).

A line is ``<epoch> <job> <EVENT> <info> <site> - <seq>``: ``info`` is the
attempt's scheduler id (``<seq>.0``, or a cluster's batch job id at SUBMIT) or,
for JOB_SUCCESS/JOB_FAILURE, its status. PMC writes the raw wait status there
(768 for exit 3); this writes what DAGMan writes, the exit code (minus the
signal number for a signal). ``<epoch> INTERNAL *** <MARKER> [<code>] ***``
lines frame a run. The file is appended to, buffered, and flushed at most once
a second, at every INTERNAL line and at close.
"""

from __future__ import annotations

import enum
import math
import os
import time
from collections.abc import Iterator
from typing import NamedTuple

from pilot.util.latefile import open_if_late, opened_late
from pilot.util.safeopen import open_file, open_regular_fd
from pilot.util.tail import Tail

JOBSTATE_FILE = "jobstate.log"
INTERNAL = "INTERNAL"  # the job of a marker line


class Event(str, enum.Enum):
    """What happened to one attempt of a job (a task, or a cluster's batch job)."""

    SUBMIT = "SUBMIT"  # a task became ready; a cluster's batch job was queued
    EXECUTE = "EXECUTE"
    JOB_TERMINATED = "JOB_TERMINATED"
    JOB_SUCCESS = "JOB_SUCCESS"
    JOB_FAILURE = "JOB_FAILURE"
    JOB_ABORTED = "JOB_ABORTED"  # pilot cancel removed a cluster's batch job
    POST_SCRIPT_STARTED = "POST_SCRIPT_STARTED"  # pilot submit settling a cluster's attempt, as DAGMan's POST script
    POST_SCRIPT_TERMINATED = "POST_SCRIPT_TERMINATED"
    POST_SCRIPT_SUCCESS = "POST_SCRIPT_SUCCESS"
    POST_SCRIPT_FAILURE = "POST_SCRIPT_FAILURE"


class Marker(str, enum.Enum):
    """The INTERNAL lines around a run."""

    PMC_STARTED = "PMC_STARTED"  # a pilot run began
    PMC_FINISHED = "PMC_FINISHED"  # and ended: code 0 all tasks done, else 1
    DAGMAN_STARTED = "DAGMAN_STARTED"  # a pilot submit began (code 0)
    DAGMAN_FINISHED = "DAGMAN_FINISHED"  # and stopped with this exit code


def jobstate_path(directory: str) -> str:
    """The jobstate.log of a cluster's directory (next to its DAG) or of a submit directory."""
    return os.path.join(directory, JOBSTATE_FILE)


class JobstateWriter:
    """Appends lines to one jobstate.log (never through a link: pilot.util.safeopen)."""

    def __init__(self, path: str, flush_interval: float = 1.0, late: bool = False) -> None:
        """``late``: opened by ``open_late`` (pilot.util.latefile), what is written before kept."""
        self.path = path
        self._fh = opened_late(
            lambda: open_file(path, "a", encoding="utf-8", errors="surrogateescape", buffering=1 << 16), late
        )
        self._interval = flush_interval
        self._last = time.monotonic()

    def open_late(self) -> None:
        open_if_late(self._fh)

    def _line(self, text: str) -> None:
        self._fh.write(f"{time.time():.6f} {text}\n")
        now = time.monotonic()
        if now - self._last >= self._interval:
            self._fh.flush()
            self._last = now

    def event(self, job: str, event: Event, info: str, seq: int, site: str = "-") -> None:
        """One line ``<epoch> <job> <EVENT> <info> <site> - <seq>``."""
        self._line(f"{job} {event.value} {info} {site} - {seq}")

    def internal(self, marker: Marker, code: int | None = None) -> None:
        """``INTERNAL *** <MARKER> [<code>] ***``, flushed at once."""
        self._line(f"{INTERNAL} *** {marker.value}{'' if code is None else f' {code}'} ***")
        self.flush()

    def flush(self) -> None:
        if not self._fh.closed:
            self._fh.flush()

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.close()


class JobstateLine(NamedTuple):
    """One line as read back."""

    time: float
    job: str  # INTERNAL for a marker line
    event: str  # an Event's or a Marker's value; a word this pilot does not write is kept as it is
    info: str  # the attempt's scheduler id or status; a marker's code ("" when none)


def parse_line(line: str) -> JobstateLine | None:
    """A line of jobstate.log; None for one that is not a line of this format (no finite time, too few words)."""
    parts = line.split()
    if len(parts) < 3:
        return None
    try:
        stamp = float(parts[0])
    except ValueError:
        return None
    if not math.isfinite(stamp):
        return None
    if parts[1] == INTERNAL:
        words = parts[3:-1] if parts[2] == "***" and parts[-1] == "***" else []
        if not words:
            return None
        return JobstateLine(stamp, INTERNAL, words[0], " ".join(words[1:]))
    return JobstateLine(stamp, parts[1], parts[2], parts[3] if len(parts) > 3 else "")


def read_jobstate(path: str) -> Iterator[JobstateLine]:
    """The lines of a whole jobstate.log, in order, lines of no pilot's skipped. OSError (FileNotFoundError when
    there is none) as it is read; a FIFO or a directory there is an OSError, never a wait."""
    with open(open_regular_fd(path), encoding="utf-8", errors="surrogateescape") as fh:
        for text in fh:
            line = parse_line(text)
            if line is not None:
                yield line


class JobstateTail:
    """The lines a running pilot appends, each read once."""

    def __init__(self, path: str) -> None:
        self._tail = Tail(path)

    def lines(self) -> tuple[bool, list[JobstateLine]]:
        """(the file was replaced or truncated since the last call: start over, its new complete lines)."""
        reset, texts = self._tail.lines()
        return reset, [line for line in map(parse_line, texts) if line is not None]
