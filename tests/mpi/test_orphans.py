"""No task process outlives its run: SIGKILL of the master, a worker or mpiexec, leftovers, reruns.

Processes are counted by the mark every task process carries in its
environment (PILOT_TASK_MARK) together with a value unique to the test.
"""

from __future__ import annotations

import os
import signal
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.mpi.helpers import pilot_cmd, run_pilot
from tests.waiting import wait_for

pytestmark = pytest.mark.mpi


def _environ(pid: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return b""


def tasks_of(tag: str) -> list[int]:
    """Live task processes (not ranks, not zombies) started under the test's tag."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        env = _environ(pid)
        if f"ORPHAN_TEST={tag}".encode() in env and b"PILOT_TASK_MARK=" in env:
            found.append(int(pid))
    return found


def ranks_of(tag: str, rank: int) -> list[int]:
    """The MPI rank's process (not the watchdog it forked, which shares its environment)."""
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            env = _environ(pid)
            if (
                f"ORPHAN_TEST={tag}".encode() in env
                and f"PMI_RANK={rank}\0".encode() in env
                and b"PILOT_TASK_MARK=" not in env
            ):
                found.append(int(pid))
    return [pid for pid in found if _parent(pid) not in found]


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


# A task that leaves a background sleeper in its own session, then sleeps itself.
STUBBORN = "/bin/sh -c 'setsid sleep 300 & sleep 300'"


def start(dag: str, tag: str) -> subprocess.Popen:
    env = dict(os.environ, ORPHAN_TEST=tag)
    return subprocess.Popen(pilot_cmd([dag]), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@pytest.mark.parametrize("victim", ["master", "worker", "mpiexec"])
def test_sigkill_leaves_no_task_behind(dagfile, victim):
    tag = uuid.uuid4().hex
    dag = dagfile(f"TASK a {STUBBORN}\nTASK b {STUBBORN}\n")
    proc = start(dag, tag)
    try:
        wait_for(lambda: len(tasks_of(tag)) >= 6, 30, "the tasks to start", every=0.05)  # sh + 2 sleeps, twice
        if victim == "mpiexec":
            pid = proc.pid
        else:
            pids = ranks_of(tag, 0 if victim == "master" else 1)
            assert len(pids) == 1
            pid = pids[0]
        os.kill(pid, signal.SIGKILL)
        wait_for(
            lambda: not tasks_of(tag),
            5,
            "no task left behind",
            every=0.05,
            detail=lambda: f"left behind: {tasks_of(tag)}",
        )
    finally:
        for pid in tasks_of(tag):
            os.kill(pid, signal.SIGKILL)
        proc.kill()
        proc.wait(timeout=30)


def test_background_processes_end_with_the_run_unless_kept(dagfile):
    tag = uuid.uuid4().hex
    dag = dagfile("TASK a /bin/sh -c 'sleep 300 & setsid sleep 300 & echo started'\n")
    res = run_pilot([dag], env={"ORPHAN_TEST": tag})
    assert res.returncode == 0, res.stderr
    assert tasks_of(tag) == []
    assert "ended 2 process(es) that tasks left running" in res.stderr
    kept = run_pilot(["-s", "--keep-task-processes", dag], env={"ORPHAN_TEST": tag})
    try:
        assert kept.returncode == 0, kept.stderr
        assert len(tasks_of(tag)) == 2
    finally:
        for pid in tasks_of(tag):
            os.kill(pid, signal.SIGKILL)


def test_rerun_ends_the_previous_copy_first(dagfile, tmp_path):
    """After the master is killed, a rerun never runs a task beside its still-running earlier copy."""
    tag = uuid.uuid4().hex
    log = tmp_path / "starts"
    dag = dagfile(f"TASK a /bin/sh -c 'echo start >> {log}; exec sleep 300'\n")
    first = subprocess.Popen(
        pilot_cmd(["--keep-task-processes", dag]),
        env=dict(os.environ, ORPHAN_TEST=tag),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: len(tasks_of(tag)) == 1, 30, "the task to start", every=0.05)
        old = tasks_of(tag)[0]
        os.kill(ranks_of(tag, 0)[0], signal.SIGKILL)
        first.wait(timeout=30)
        # --keep-task-processes: the watchdog only reports the death, so the old copy still runs here
        assert tasks_of(tag) == [old]
        second = subprocess.Popen(
            pilot_cmd([dag]),
            env=dict(os.environ, ORPHAN_TEST=tag),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for(lambda: log.read_text().count("start") == 2, 30, "the second start", every=0.05)
        assert old not in tasks_of(tag)  # ended before the new copy started
        second.kill()
        second.wait(timeout=30)
    finally:
        for pid in tasks_of(tag):
            os.kill(pid, signal.SIGKILL)
