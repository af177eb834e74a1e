"""A worker's watchdog: ends the worker's task processes if the worker dies.

When a rank is killed (SIGKILL of a worker, or the launcher ending every
rank after the master or mpiexec was killed), its tasks would run on as
orphans, and a rerun would start second copies beside them. So each worker
forks, before MPI starts, a small process in a session of its own that waits
on a pipe whose only writer is the worker. A clean worker writes ``D`` first
(it has ended what its tasks left, or was asked to keep it); end of file
without that means the worker is gone: the watchdog appends the worker's rank
to ``DAG.lost`` for the master, then ends every process marked with the
worker's token (see ``reaper``), within a second or two.

Forking before ``MPI_Init`` keeps the child clear of the MPI library (fork
after it is unsafe with some network stacks) and costs no interpreter start.
The watchdog closes every inherited descriptor, so the launcher sees the
rank's stdout and stderr close when the rank ends.
"""

from __future__ import annotations

import os
import resource
import signal

from pilot.runtime import reaper
from pilot.util.safeopen import open_fd


class Watchdog:
    def __init__(self, token: str, wfd: int, pid: int) -> None:
        self.token = token
        self._wfd = wfd
        self.pid = pid

    def release(self) -> None:
        """The worker ended cleanly: the watchdog leaves without ending anything."""
        if self._wfd < 0:
            return
        try:
            os.write(self._wfd, b"D")
        except OSError:
            pass
        os.close(self._wfd)
        self._wfd = -1
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass


def lost_path(dag: str) -> str:
    """Where watchdogs append the ranks of workers that died (read by the master, pilot.runtime.crashes)."""
    return dag + ".lost"


def start(token: str, lost: str | None = None, rank: int = -1, end_tasks: bool = True) -> Watchdog | None:
    """Fork the watchdog for the worker that will mark its tasks with ``token``; None if fork fails.
    ``lost``: the file it appends ``rank`` to when the worker dies, for the master (pilot.runtime.crashes);
    ``end_tasks`` False (--keep-task-processes): it only does that."""
    rfd, wfd = os.pipe()  # both close-on-exec: no task inherits the worker's end
    try:
        pid = os.fork()
    except OSError:
        os.close(rfd)
        os.close(wfd)
        return None
    if pid == 0:  # pragma: no cover - runs in the child, checked by the orphan tests under mpiexec
        try:
            os.close(wfd)
            _watch(rfd, token, lost, rank, end_tasks)
        finally:
            os._exit(0)
    os.close(rfd)
    return Watchdog(token, wfd, pid)


def _watch(rfd: int, token: str, lost: str | None, rank: int, end_tasks: bool) -> None:  # pragma: no cover - child
    os.setsid()  # out of the rank's process group and session: signals aimed at the rank miss it
    for signum in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM, signal.SIGPIPE):
        signal.signal(signum, signal.SIG_IGN)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    limit = 65536 if limit == resource.RLIM_INFINITY else limit
    os.closerange(3, rfd)
    os.closerange(rfd + 1, max(rfd + 2, limit))
    while True:
        try:
            data = os.read(rfd, 1)
        except InterruptedError:
            continue
        break
    if data == b"D":
        return
    if lost is not None:  # first: the master goes on without this worker once it reads the line
        try:
            fd = open_fd(lost, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            os.write(fd, f"{rank}\n".encode())
            os.close(fd)
        except OSError:
            pass
    if end_tasks:
        suffix = ":" + token
        reaper.end_marked(lambda value: value.endswith(suffix), grace=1.0, limit=3.0)
