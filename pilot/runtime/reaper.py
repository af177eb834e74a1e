"""Find and end the processes a run's tasks started, by a mark in their environment.

Every task gets ``PILOT_TASK_MARK=<dag key>:<run id>:<worker token>`` in its
environment (the master makes the DAG key, ``startup.dag_key``, and the run
id), and whatever it starts inherits it, also processes that leave the task's
process group (``setsid``, daemons). So the processes of one
worker, of one run, or of any earlier run of the same DAG can be found in
``/proc/<pid>/environ`` (readable for our own processes) and ended:

- at the end of a run, what tasks left running in the background (unless
  --keep-task-processes);
- by the worker's watchdog, when the worker itself was killed;
- before the first task of a run, whatever an earlier run of the same DAG
  left running on this host, so a rerun never starts a second copy of a task
  beside one that still runs.

A process that empties its environment before it starts another escapes the
mark; the task's process group still catches those that stay in it.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

MARK_VAR = "PILOT_TASK_MARK"
_NEEDLE = MARK_VAR.encode() + b"="


def mark(key: str, run_id: str, token: str) -> str:
    return f"{key}:{run_id}:{token}"


def _mark_of(pid: str) -> str | None:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            env = fh.read()
    except OSError:  # gone, or not ours
        return None
    at = env.find(_NEEDLE)
    if at < 0 or (at > 0 and env[at - 1] != 0):
        return None
    end = env.find(b"\0", at)
    # As the worker's str was encoded into the task's environment: a DAG path that is not UTF-8 reads back equal.
    return env[at + len(_NEEDLE) : end if end >= 0 else len(env)].decode("utf-8", "surrogateescape")


def marked(match: Callable[[str], bool]) -> list[int]:
    """Pids of live processes whose mark satisfies ``match``."""
    me = os.getpid()
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != me:
            value = _mark_of(entry)
            if value is not None and match(value):
                found.append(int(entry))
    return found


def _signal_all(pids: list[int], signum: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, signum)
        except (ProcessLookupError, PermissionError):
            pass


def end_marked(match: Callable[[str], bool], grace: float = 1.0, limit: float = 4.0) -> int:
    """SIGTERM the matching processes, SIGKILL what is left after ``grace`` s; return how many there were.

    Scans again until none is left (a process may start another meanwhile),
    for at most ``limit`` s. Each process found in any scan counts: one in the
    middle of an exec can show no environment to the first scan.
    """
    pids = marked(match)
    if not pids:
        return 0
    seen = set(pids)
    deadline = time.monotonic() + limit
    kill_at = time.monotonic() + grace
    signum = signal.SIGTERM if grace > 0 else signal.SIGKILL
    pause = 0.005
    while pids and time.monotonic() < deadline:
        _signal_all(pids, signum)
        time.sleep(pause)
        pause = min(pause * 2, 0.1)
        _reap_children()
        if time.monotonic() >= kill_at:
            signum = signal.SIGKILL
        pids = marked(match)
        seen.update(pids)
    return len(seen)


def _reap_children() -> None:
    """Collect our own exited children (a task that was ours stays a zombie until then)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
