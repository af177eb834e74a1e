"""What a worker appends to a task's stdout after each attempt, for the tools that read it afterwards.

Every attempt ends with its ``[cluster-task]`` record (pilot.contracts.taskrecord), which pilot report,
pegasus-exitcode and pegasus-monitord parse. With --invocation-records a kickstart invocation record (XML, with
the attempt's stderr) comes before it, which pegasus-monitord reads as it reads kickstart's own; with
--monitord-hack and --per-task-stdio a YAML one, unless the task wrote one itself. Both go out in one write, so
a reader never sees half of them. The worker runs the task; this says what it did, and needs no more of the
worker than its host's name, its rank and the run's options.
"""

from __future__ import annotations

import os

from pilot.contracts import taskrecord
from pilot.runtime.options import RunOptions
from pilot.runtime.protocol import RunTask


def file_size(fd: int) -> int:
    """The size of an open file (0 where it cannot be told): where an attempt's output begins in it."""
    try:
        return os.fstat(fd).st_size
    except OSError:
        return 0


class TaskRecords:
    """The records of one worker's attempts."""

    def __init__(self, opts: RunOptions, hostname: str, rank: int) -> None:
        self.opts = opts
        self.hostname = hostname
        self.rank = rank
        if opts.invocation_records:
            from pilot.monitor import kickstart  # noqa: PLC0415 - imported before the first task, only when asked for

            self._kickstart = kickstart

    def append(
        self, msg: RunTask, out_fd: int, start: float, duration: float, status: int, err_fd: int, err_start: int
    ) -> None:
        """Append the [cluster-task] record (and, for monitord, an invocation record) in one write; ``err_start``:
        where the attempt's stderr begins in ``err_fd`` (read only for an invocation record)."""
        text = taskrecord.cluster_task(
            msg.name,
            start,
            duration,
            status,
            msg.argv[0],
            self.hostname,
            self.rank,
            msg.cpus,
            msg.memory,
            msg.pegasus_id,
        )
        if self.opts.invocation_records:
            kickstart = self._kickstart
            stderr = kickstart.tail(err_fd, err_start, file_size(err_fd)) if status != 0 else ""
            text = (
                "\n"
                + kickstart.xml_invocation(
                    msg.transformation or msg.name,
                    msg.dax_id or msg.name,
                    start,
                    duration,
                    status,
                    msg.argv,
                    self.hostname,
                    stderr,
                    msg.cwd,
                )
                + text
            )
        elif self.opts.monitord_hack and self.opts.per_task_stdio:
            from pilot.monitor import kickstart  # noqa: PLC0415 - json and getpass only when asked for

            if not kickstart.has_record(out_fd):
                text += kickstart.invocation(
                    msg.transformation or msg.name,
                    msg.dax_id or msg.name,
                    start,
                    duration,
                    status,
                    msg.argv[0],
                    self.hostname,
                )
        data = text.encode("utf-8", "surrogateescape")
        written = os.write(out_fd, data)
        while written < len(data):  # a short write: the disk filled in the middle (the next one raises ENOSPC)
            written += os.write(out_fd, data[written:])
