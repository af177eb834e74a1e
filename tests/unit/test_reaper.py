"""Task marks, the reaper, the worker's watchdog and same-host doorbells, with real processes (no MPI)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid

import pytest

from pilot.errors import DagError
from pilot.runtime import outputs, reaper, startup, watchdog
from pilot.runtime.doorbell import Doorbell
from pilot.runtime.options import RunOptions
from tests.waiting import wait_for


def _marked_sleeper(value: str) -> subprocess.Popen:
    env = dict(os.environ, **{reaper.MARK_VAR: value})
    # The shell leaves a grandchild in a session of its own: only the mark finds it.
    return subprocess.Popen(["/bin/sh", "-c", "setsid sleep 300 & exec sleep 300"], env=env)


def test_end_marked_finds_processes_outside_the_group():
    token = uuid.uuid4().hex
    proc = _marked_sleeper(f"k:run:{token}")
    try:
        wait_for(lambda: len(reaper.marked(lambda v: v.endswith(token))) == 2, 10, "both marked processes", every=0.02)
        assert reaper.end_marked(lambda v: v.endswith(token), grace=0.2) == 2
        assert reaper.marked(lambda v: v.endswith(token)) == []
    finally:
        proc.kill()
        proc.wait()


def test_a_process_found_after_the_first_scan_is_counted(tmp_path):
    """The count of ended processes is of all those found, not of the first scan's: here the one found first
    starts another when asked to end (as a process caught in an exec shows up only in a later scan)."""
    token = uuid.uuid4().hex
    ready = tmp_path / "ready"
    # Once: the reaper asks again until the grace is over, and may ask while the first answer is still starting
    # its process (so the handler ignores SIGTERM before it starts one, not after).
    script = (
        "import signal, subprocess, sys, time\n"
        "def on_term(*_):\n"
        "    signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "    subprocess.Popen(['sleep', '300'])\n"
        "signal.signal(signal.SIGTERM, on_term)\n"
        f"open({str(ready)!r}, 'w').close()\n"
        "while True: time.sleep(1)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], env=dict(os.environ, **{reaper.MARK_VAR: f"k:run:{token}"}))
    try:
        wait_for(ready.exists, 10, "the process to be ready", every=0.02)
        assert reaper.end_marked(lambda v: v.endswith(token), grace=0.3) == 2
        assert reaper.marked(lambda v: v.endswith(token)) == []
    finally:
        proc.kill()
        proc.wait()


def test_watchdog_ends_the_tasks_of_a_vanished_worker_and_leaves_those_of_a_clean_one():
    token = uuid.uuid4().hex
    guard = watchdog.start(token)
    assert guard is not None
    proc = _marked_sleeper(f"k:run:{token}")
    try:
        wait_for(lambda: len(reaper.marked(lambda v: v.endswith(token))) == 2, 10, "both marked processes", every=0.02)
        os.close(guard._wfd)  # what the kernel does when the worker is killed
        wait_for(lambda: not reaper.marked(lambda v: v.endswith(token)), 5, "no marked process left", every=0.02)
        os.waitpid(guard.pid, 0)
    finally:
        proc.kill()
        proc.wait()
    clean = watchdog.start(token)
    assert clean is not None
    kept = _marked_sleeper(f"k:run:{token}")
    try:
        clean.release()  # a clean worker: the watchdog leaves without ending anything
        time.sleep(0.2)
        assert len(reaper.marked(lambda v: v.endswith(token))) == 2
    finally:
        reaper.end_marked(lambda v: v.endswith(token), grace=0)
        kept.wait()


def test_dag_key_is_the_same_for_every_spelling_of_the_path(tmp_path):
    dag = tmp_path / "wf.dag"
    dag.write_text("")
    assert startup.dag_key(str(dag)) == startup.dag_key(str(tmp_path / "." / "wf.dag"))


def test_dag_keys_of_different_dags_never_match_each_others_marks(tmp_path):
    # ':' separates a mark's parts: a DAG whose path goes on after a ':' must not pass for the shorter one.
    keys = [startup.dag_key(str(tmp_path / name)) for name in ("wf.dag", "wf.dag:x", "wf.dag%3Ax", "a:b", "a%3Ab")]
    assert len(set(keys)) == len(keys) and not any(":" in key for key in keys)
    assert not [(a, b) for a in keys for b in keys if a != b and f"{b}:run:tok".startswith(a + ":")]


def test_a_dag_path_that_is_not_utf8_reads_back_from_a_task_environment_as_its_key(tmp_path):
    where = os.fsdecode(os.path.join(os.fsencode(str(tmp_path)), b"d\xff"))
    key = startup.dag_key(os.path.join(where, "wf.dag"))
    token = uuid.uuid4().hex
    proc = _marked_sleeper(f"{key}:run:{token}")
    try:
        wait_for(
            lambda: len(reaper.marked(lambda v: v.startswith(key + ":"))) == 2, 10, "both marked processes", every=0.02
        )
    finally:
        reaper.end_marked(lambda v: v.endswith(token), grace=0.2)
        proc.wait(timeout=10)


@pytest.mark.timing
def test_doorbell_wakes_a_waiting_peer():
    a, b = Doorbell(), Doorbell()
    try:
        table = [("host", a.address), ("host", b.address), ("other", b"\0nowhere")]
        a.introduce(table, 0)
        b.introduce(table, 1)
        assert a.peers == {1: b.address} and not a.serves_all(3)
        assert not b.wait(0.01)
        a.ring(1)
        a.ring(2)  # another host: no ring, no error
        start = time.monotonic()
        assert b.wait(5.0) and time.monotonic() - start < 1.0
        assert not b.wait(0.0)  # the rings were consumed
    finally:
        a.close()
        b.close()


def test_outputs_are_checked_before_any_task(tmp_path):
    opts = RunOptions(dag=str(tmp_path / "wf.dag"), stdout="/nonexistent/x")
    with pytest.raises(DagError, match=r"^/nonexistent/x: cannot open the task stdout file \(-o\): No such file"):
        outputs.open_task_output(opts)
    same = str(tmp_path / "both")
    out, err = outputs.open_task_output(RunOptions(dag=opts.dag, stdout=same, stderr=same))
    assert out is err
    out.close()
    outputs.check_dag_dir(opts)
    with pytest.raises(DagError, match="cannot write next to the DAG"):
        outputs.check_dag_dir(RunOptions(dag="/nonexistent/wf.dag"))


def test_worker_takes_the_dag_key_from_the_master_and_ends_only_that_dags_stale_copies(tmp_path):
    from pilot.runtime.protocol import HostSetup
    from pilot.runtime.worker import Worker

    class _Master:
        rank, size = 1, 2

        def send(self, dest, msg, ring=True) -> None:
            pass

    key, other = startup.dag_key(str(tmp_path / "wf.dag")), startup.dag_key(str(tmp_path / "other.dag"))
    stale = _marked_sleeper(f"{key}:oldrun:{uuid.uuid4().hex}")
    foreign = _marked_sleeper(f"{other}:oldrun:{uuid.uuid4().hex}")
    try:
        wait_for(
            lambda: len(reaper.marked(lambda v: v.startswith(key + ":"))) == 2, 10, "both marked processes", every=0.02
        )
        worker = Worker(RunOptions(dag=str(tmp_path / "wf.dag")), _Master(), token="t0")
        worker.setup_host(HostSetup(None, 0, "r0", True))  # no key: nothing can be told stale
        assert len(reaper.marked(lambda v: v.startswith(key + ":"))) == 2
        worker.setup_host(HostSetup(None, 0, "newrun", True, key))
        assert worker.mark == f"{key}:newrun:t0"
        assert reaper.marked(lambda v: v.startswith(key + ":")) == []
        assert len(reaper.marked(lambda v: v.startswith(other + ":"))) == 2
    finally:
        reaper.end_marked(lambda v: v.startswith((key + ":", other + ":")), grace=0.2)
        for proc in (stale, foreign):
            proc.wait(timeout=10)
