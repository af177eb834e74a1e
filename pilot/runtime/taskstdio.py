"""Where a worker's tasks write their stdout and stderr.

A task writes into its worker's pair of files (``<dag>.out.<rank>`` and
``.err.<rank>``, merged at the end of the run), kept open for the whole run,
or with ``--per-task-stdio`` into files of its own. In a run fed several DAGs
(``pilot run --inbox``) a task's worker files are those of its own DAG,
opened for that task alone, since the DAG's record is merged when its last
task ends, while the worker goes on.
"""

from __future__ import annotations

import os

from pilot.monitor import stdio
from pilot.runtime.options import RunOptions
from pilot.runtime.protocol import RunTask


class TaskStdio:
    """The files one worker's tasks write to, and the pair it keeps open."""

    __slots__ = ("opts", "rank", "_out_fd", "_err_fd")

    def __init__(self, opts: RunOptions, rank: int) -> None:
        self.opts = opts
        self.rank = rank
        self._out_fd = -1
        self._err_fd = -1

    def open(self, msg: RunTask) -> tuple[int, int, bool, str | None, str | None]:
        """(stdout fd, stderr fd, whether the caller closes them, and the per-task files' paths)."""
        if self.opts.per_task_stdio:
            out, err, out_path, err_path = stdio.open_task_stdio(msg.dag or self.opts.dag, msg.name, msg.attempt - 1)
            return out, err, True, out_path, err_path
        if msg.dag is not None:
            return (*self._open_pair(msg.dag), True, None, None)
        if self._out_fd < 0:
            self._out_fd, self._err_fd = self._open_pair(self.opts.dag)
        return self._out_fd, self._err_fd, False, None, None

    def _open_pair(self, dag: str) -> tuple[int, int]:
        out_path, err_path = stdio.worker_paths(dag, self.rank)
        out_fd = stdio.open_append(out_path)
        try:
            return out_fd, stdio.open_append(err_path, readable=self.opts.invocation_records)
        except OSError:
            os.close(out_fd)
            raise

    def close(self) -> None:
        for fd in (self._out_fd, self._err_fd):
            if fd >= 0:
                os.close(fd)
        self._out_fd = self._err_fd = -1
