"""The per-host script (--host-script / PMC_HOST_SCRIPT).

Started once per host, by the first worker on it, before any task: in its own
process group, stdout and stderr to the worker's stderr. It must exit 0
within the limit (60 s, as in PMC; PILOT_HOST_SCRIPT_TIMEOUT changes it);
otherwise it gets SIGALRM (PMC's behaviour), then its group SIGKILL, and the
run aborts. Whatever it left running (a service the tasks use) is stopped at
the end of the run: SIGTERM to its process group, SIGKILL a few seconds later.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

DEFAULT_TIMEOUT = 60.0
STOP_GRACE = 3.0


def _timeout() -> float:
    raw = os.environ.get("PILOT_HOST_SCRIPT_TIMEOUT")
    try:
        return float(raw) if raw else DEFAULT_TIMEOUT
    except ValueError:
        return DEFAULT_TIMEOUT


class HostScript:
    def __init__(self, path: str, rank: int) -> None:
        self.path = path
        self.rank = rank
        self.pgid: int | None = None

    def start_and_wait(self, interrupted: Callable[[], bool]) -> str | None:
        """Run the script; None when it exited 0, else why the run must abort."""
        env = dict(os.environ)
        try:
            pid = os.posix_spawnp(
                self.path,
                [self.path],
                env,
                file_actions=[(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0), (os.POSIX_SPAWN_DUP2, 2, 1)],
                setpgroup=0,
                setsigdef=(signal.SIGPIPE, signal.SIGXFSZ),
                setsigmask=(),
            )
        except OSError as exc:
            return f"Host script failed: cannot start {self.path}: {exc.strerror or exc}"
        self.pgid = pid
        limit = _timeout()
        deadline = time.monotonic() + limit
        pause = 0.001
        while True:
            done, wstatus = os.waitpid(pid, os.WNOHANG)
            if done:
                code = os.waitstatus_to_exitcode(wstatus)
                if code == 0:
                    return None
                what = f"with status {code}" if code > 0 else f"on signal {-code}"
                return f"Host script failed {what} ({self.path})"
            if interrupted():
                self.stop()
                return f"Host script failed: interrupted by a signal ({self.path})"
            if time.monotonic() >= deadline:
                try:
                    os.kill(pid, signal.SIGALRM)
                except ProcessLookupError:
                    pass
                self.stop()
                return f"Host script timed out after {limit:g} seconds ({self.path})"
            time.sleep(pause)
            pause = min(pause * 2, 0.05)

    def stop(self) -> None:
        """SIGTERM to the script's process group, SIGKILL after a grace period."""
        if self.pgid is None:
            return
        pgid, self.pgid = self.pgid, None
        if not _signal(pgid, signal.SIGTERM):
            _reap(pgid)
            return
        deadline = time.monotonic() + STOP_GRACE
        while time.monotonic() < deadline:
            _reap(pgid)
            if not _signal(pgid, 0):
                return
            time.sleep(0.02)
        _signal(pgid, signal.SIGKILL)
        _reap(pgid)


def _signal(pgid: int, signum: int) -> bool:
    try:
        os.killpg(pgid, signum)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return False


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
