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

    With ``try_lock``, a shared lock is tried without waiting and dropped at
    once (a holder on another node of a shared file system shows only so);
    only when it is held is /proc/locks read, to name the holder when it runs
    on this host. Reading /proc/locks can cost milliseconds (the kernel lists
    every lock of the machine), which a driver would pay once per ready cluster.
    The try could make a ``pilot run`` starting in the same instant find the
    DAG locked: try it only before starting a run of the DAG, or once nothing
    starts one (pilot cancel), never beside a driver at work (pilot status),
    which passes ``try_lock=False`` and reads /proc/locks only, touching no lock.
    """
    if try_lock:
        with held_elsewhere(path) as fd:
            if fd is None:
                return None
    pid = lock_owner(path)
    if pid is not None:
        return DagRun(pid, socket.gethostname())
    return DagRun(None, None) if try_lock else None
