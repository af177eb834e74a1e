"""The DAG lock as other processes see it: ``pilot run`` holds an ``flock`` on its DAG file for its whole run.

The runtime takes the lock (pilot.runtime.lock); the driver, pilot status and
pilot cancel only look at it, to tell a run that still goes on from one that
ended: a batch job's shell can end, or a driver die, while the run it started
goes on.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass

from pilot.util.flock import held_elsewhere, lock_owner


@dataclass(frozen=True)
class DagRun:
    """A pilot run that holds a DAG's lock, as another process sees it."""

    pid: int | None  # None: not on this host (another node of a shared file system)
    host: str | None

    def where(self) -> str:
        return f"pid {self.pid} on {self.host}" if self.pid is not None else "on another host"


def running(path: str, try_lock: bool = True) -> DagRun | None:
    """The pilot run that holds the DAG lock of ``path``, or None when none does.

    /proc/locks names a holder on this host without touching the lock; only
    when it names none, and ``try_lock``, is a shared lock tried without
    waiting and dropped at once (a holder on another node shows only so).
    That try could make a ``pilot run`` starting in the same instant find the
    DAG locked: try it only before starting a run of the DAG, or once nothing
    starts one (pilot cancel), never beside a driver at work (pilot status).
    """
    pid = lock_owner(path)
    if pid is not None:
        return DagRun(pid, socket.gethostname())
    if not try_lock:
        return None
    with held_elsewhere(path) as fd:
        return None if fd is None else DagRun(None, None)
