"""pilot cancel's last step: a pilot run that outlived its cancelled job is found by its DAG lock and ended."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

from pilot.contracts.daglock import running
from pilot.runtime.lock import DagLock
from pilot.runtime.reaper import MARK_VAR
from pilot.runtime.startup import dag_key
from pilot.submit.endruns import end_runs
from tests.waiting import alive, wait_for

# A stand-in for a pilot run that ignores SIGTERM: it holds the DAG lock as DagLock takes it, and its task, in a
# process group of its own (out of reach of a signal to the run's group), carries the DAG's mark as a real task does.
HOLDER = textwrap.dedent("""
    import os, signal, subprocess, sys, time
    from pilot.runtime.lock import DagLock
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    DagLock(sys.argv[1]).acquire()
    task = subprocess.Popen(["sleep", "300"], start_new_session=True, env={**os.environ, sys.argv[2]: sys.argv[3]})
    print(task.pid, flush=True)
    time.sleep(300)
""")


@contextlib.contextmanager
def holding(tmp_path, name: str) -> Iterator[tuple[Path, subprocess.Popen, int]]:
    """A DAG whose lock the stand-in run holds, as a script called ``name`` (what pilot cancel sees of a process is
    its command line): yields (the DAG, the stand-in, its task's pid); whatever is left of them goes at the end."""
    dag = tmp_path / "c.dag"
    dag.write_text("TASK a /bin/true\n")
    script = tmp_path / name
    script.write_text(HOLDER)
    holder = subprocess.Popen(
        [sys.executable, str(script), str(dag), MARK_VAR, f"{dag_key(str(dag))}:run:0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    task = None
    try:
        task = int(holder.stdout.readline())
        wait_for(lambda: running(str(dag)), timeout=30, what="the stand-in holds the DAG lock")
        yield dag, holder, task
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()
        if task is not None and alive(task):
            os.kill(task, signal.SIGKILL)


def test_a_run_holding_the_dag_lock_is_ended_with_its_tasks(tmp_path):
    with holding(tmp_path, "pilot") as (dag, holder, task):
        run = running(str(dag))
        assert run is not None and run.pid == holder.pid  # found in /proc/locks, without taking the lock
        out = end_runs({"c": str(dag)}, waits=(0.2, 0.5, 5.0))
        assert out.left == {} and out.ended == [
            f"cluster c: ended its pilot run ({run.where()}) and 1 task process(es)"
        ]
        assert not alive(holder.pid) and not alive(task)  # (the sweep of marked tasks reaps our own children too)
        assert running(str(dag)) is None


def test_a_process_that_is_no_pilot_run_is_named_not_signalled(tmp_path):
    with holding(tmp_path, "editor") as (dag, holder, task):
        out = end_runs({"c": str(dag)}, waits=(0.1, 0.1, 0.1))
        assert out.ended == [] and out.left == {
            "c": f"cluster c: pid {holder.pid} on {socket.gethostname()} holds "
            f"{dag} and is not a pilot run: not signalled; see what it is "
            f"(ps -p {holder.pid} -o args)"
        }
        assert alive(holder.pid) and alive(task)


def test_a_free_dag_lock_ends_nothing_and_is_not_taken(tmp_path):
    dag = tmp_path / "c.dag"
    dag.write_text("TASK a /bin/true\n")
    assert running(str(dag)) is None
    assert end_runs({"c": str(dag)}, waits=(0.1, 0.1, 0.1)).ended == []
    lock = DagLock(str(dag))
    lock.acquire()  # nothing of the look was left holding it
    lock.release()
    assert not os.path.exists(str(dag) + ".lock")


def test_a_free_dag_lock_is_told_by_the_lock_alone_and_a_held_one_names_its_holder(tmp_path, monkeypatch):
    """/proc/locks lists every lock of the machine (milliseconds to read where there are many); a driver asks
    once per ready cluster, and nearly every DAG it asks about is free: the lock tried alone tells it so."""
    import pilot.contracts.daglock as daglock

    dag = tmp_path / "c.dag"
    dag.write_text("TASK a /bin/true\n")
    owner = daglock.lock_owner
    read: list[str] = []
    monkeypatch.setattr(daglock, "lock_owner", lambda path: read.append(path) or owner(path))
    assert running(str(dag)) is None
    assert read == []
    lock = DagLock(str(dag))
    lock.acquire()
    try:
        for try_lock in (True, False):
            run = running(str(dag), try_lock=try_lock)
            assert run is not None and run.pid == os.getpid() and run.host == socket.gethostname()
    finally:
        lock.release()
    assert read == [str(dag), str(dag)]
    assert running(str(dag), try_lock=False) is None
