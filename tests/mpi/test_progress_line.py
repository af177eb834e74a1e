"""pilot run's progress line: drawn when mpiexec's stderr is a terminal (a pty here), never otherwise."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import time

import pytest

from tests.mpi.helpers import pilot_cmd, run_pilot

pytestmark = pytest.mark.mpi

DAG = "".join(f"TASK t{i} /bin/sleep 0.7\n" for i in range(4))


def run_on_a_terminal(cmd: list[str], timeout: float = 60) -> tuple[int, str]:
    """Run ``cmd`` with a pseudo-terminal as stdin, stdout and stderr; return its status and everything it wrote."""
    main, sub = pty.openpty()
    proc = subprocess.Popen(cmd, stdin=sub, stdout=sub, stderr=sub, start_new_session=True)
    os.close(sub)
    out = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([main], [], [], 0.2)
            if ready:
                try:
                    data = os.read(main, 65536)
                except OSError:  # EIO: every writer closed the terminal
                    break
                if not data:
                    break
                out += data
            elif proc.poll() is not None:
                break
        rc = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        os.close(main)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return rc, out.decode("utf-8", "replace")


def test_progress_line_on_a_terminal(dagfile):
    dag = dagfile(DAG)
    rc, out = run_on_a_terminal(pilot_cmd([dag]))
    assert rc == 0, out
    assert "\r\x1b[Kpilot: 0/4 done, " in out  # drawn in place from the start
    assert "\r\x1b[Kpilot: 4/4 done, 0 running, 0 failed, 0 ready [" in out  # the last counts stay, on their own line
    last = out.rindex("pilot: 4/4 done")
    assert "\n" in out[last : out.index("[cluster-summary", last)]


def test_no_progress_line_when_not_a_terminal(dagfile):
    res = run_pilot([dagfile(DAG)])
    assert res.returncode == 0, res.stderr
    assert "pilot: " not in res.stderr and "\x1b[" not in res.stderr and "\r" not in res.stderr
