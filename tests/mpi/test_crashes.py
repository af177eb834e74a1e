"""A task that kills its worker takes the job down; the next runs find it, run the suspects alone, and stop it."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests.mpi.helpers import pilot_cmd, run_pilot
from tests.waiting import wait_for

pytestmark = pytest.mark.mpi

KILLER = 'TASK bad /bin/sh -c "sleep 0.5; kill -9 $PPID"\n'
EXAMPLE = "TASK a /bin/true\n" + KILLER + "TASK c /bin/sleep 1\nTASK d /bin/true\nEDGE c d\n"


def reruns(dag: str, limit: int, *args: str, n: int = 3) -> list[subprocess.CompletedProcess]:
    """Run the DAG again while its job dies (rc 9: the launcher's SIGKILL), at most ``limit`` times."""
    runs = []
    while len(runs) < limit:
        runs.append(run_pilot([*args, dag], n=n))
        if runs[-1].returncode != 9:
            break
    return runs


def done(dag: str) -> list[str]:
    return sorted(line.split()[1] for line in Path(dag + ".rescue").read_text().splitlines() if line.startswith("DONE"))


def test_the_task_that_kills_its_worker_is_named_and_failed_and_the_rest_runs(dagfile):
    dag = dagfile(EXAMPLE)
    runs = reruns(dag, 6, "--tries", "2", "--jobstate-log")
    assert len(runs) == 4 and [r.returncode for r in runs] == [9, 9, 9, 1]  # max crashes 2: N + 2 runs
    assert "task bad was running when its worker died 2 times: not started again (--max-crashes 2)" in runs[-1].stderr
    assert done(dag) == ["a", "c", "d"]
    crashes = Path(dag + ".crashes").read_text().split("\n")
    assert crashes.count("CRASH bad") == 2 and "CRASH c" not in crashes and "CLEAR c" in crashes
    failure = [
        line.split()
        for line in (Path(dag).parent / "jobstate.log").read_text().splitlines()
        if line.split()[1:3] == ["bad", "JOB_FAILURE"]
    ]
    assert failure and failure[-1][3] == "-9"  # the signal that ended its worker, as pegasus-analyzer shows it
    again = run_pilot([dag])
    assert again.returncode == 1 and "not started again" in again.stderr
    assert "[cluster-task name=c" not in again.stdout and "[cluster-task name=d" not in again.stdout  # nothing ran
    assert not list(Path(dag).parent.glob("*.running.*"))  # a clean end leaves no slot files


def test_a_long_task_beside_the_killer_is_never_the_one_stopped(dagfile):
    dag = dagfile(KILLER + "TASK long /bin/sleep 3\n")
    runs = reruns(dag, 6, "--max-crashes", "1")
    assert [r.returncode for r in runs] == [9, 9, 1]  # suspects bad and long; bad crashes alone; long runs alone
    assert done(dag) == ["long"]
    assert "task bad was running when its worker died 1 times" in runs[-1].stderr


def test_a_worker_killed_from_outside_blames_no_task(dagfile, tmp_path):
    """The suspect runs alone, ends, is cleared: killing a worker is not the task's fault."""
    flag = tmp_path / "started"
    dag = dagfile(f"TASK slow /bin/sh -c 'touch {flag}; sleep 2'\nTASK other /bin/true\nEDGE slow other\n")
    proc = subprocess.Popen(pilot_cmd([dag], n=2), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(flag.exists, 30, "the task to start")
    worker = next(int(p) for p in os.listdir("/proc") if p.isdigit() and _is_worker(int(p), dag))
    os.kill(worker, signal.SIGKILL)
    proc.communicate(timeout=60)
    again = run_pilot([dag], n=2)
    assert again.returncode == 0, again.stderr
    assert "1 task(s) were running when the job died (slow)" in again.stderr
    assert Path(dag + ".crashes").read_text() == "SUSPECT slow\nALONE slow\nCLEAR slow\n"


def _is_worker(pid: int, dag: str) -> bool:
    """A rank of this DAG's pilot other than the master (PMI_RANK is 0 for the master)."""
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False
    return (
        dag.encode() in cmd
        and b"run" in cmd
        and b"PMI_RANK=0" not in env
        and any(e.startswith(b"PMI_RANK=") for e in env)
    )


def test_the_crash_count_survives_a_sigkill_of_the_whole_job(dagfile):
    """The record is written line by line: a job SIGKILLed as the suspect starts alone still counts that crash."""
    dag = dagfile(KILLER + "TASK c /bin/true\n")
    assert [r.returncode for r in reruns(dag, 1)] == [9]  # the job died with bad running
    proc = subprocess.Popen(
        pilot_cmd([dag]), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    log = Path(dag + ".crashes")
    wait_for(lambda: log.exists() and "ALONE bad" in log.read_text(), 30, "bad to start alone")
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    runs = reruns(dag, 4)
    assert [r.returncode for r in runs] == [9, 1]  # one more crash alone makes two: bad is stopped
    assert "died 2 times" in runs[-1].stderr and done(dag) == ["c"]
    assert log.read_text().split("\n").count("CRASH bad") == 2
