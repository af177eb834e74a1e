"""pilot run on a full disk: the run says in one line what it could not write, exits 1, and a rerun completes it.

Two shapes: the task stdout file (-o) on ``/dev/full``, and a DAG directory on
a small tmpfs that fills up while the run writes jobstate.log (tests.smalldisk:
a file that fills it but for a few pages; removing it is "free space"; the test
is skipped, saying so, where no tmpfs can be mounted).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

from tests.conftest import DIAMOND_DAG
from tests.mpi.helpers import pilot_cmd, run_pilot
from tests.mpi.test_run import _master_pid as master_pid
from tests.smalldisk import fill, small_disk
from tests.waiting import wait_for

pytestmark = pytest.mark.mpi

FREE_AND_RERUN = "free space and rerun: the rescue log keeps what is done"


def last_error(stderr: str) -> str:
    return [line for line in stderr.splitlines() if line.startswith("[error]")][-1]


def test_task_stdout_to_a_full_disk_is_said_kept_and_merged_by_the_rerun(dagfile, tmp_path):
    dag = dagfile(DIAMOND_DAG)
    res = run_pilot(["-o", "/dev/full", dag])
    assert res.returncode == 1, res.stderr
    assert last_error(res.stderr) == (
        f"[error] All 4 tasks done, but the run could not write task stdout (/dev/full; kept in "
        f"{dag}.out.<rank> for the next run): {FREE_AND_RERUN}"
    )
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr
    assert res.stdout.startswith('[cluster-summary stat="ok", tasks=4')
    result = json.loads(Path(dag + ".result").read_text())
    assert (result["reason"], result["done"], result["exit"]) == ("error", 4, 1)
    assert sorted(p.name for p in tmp_path.glob("wf.dag.out.*"))  # the tasks' output, kept for the rerun
    rerun = run_pilot(["-o", str(tmp_path / "out.txt"), dag])
    assert rerun.returncode == 0, rerun.stderr
    assert "Rescue log" in rerun.stderr and "4 of 4 tasks already done" in rerun.stderr
    out = (tmp_path / "out.txt").read_text()
    assert all(out.count(f"I am {t}\n") == 1 for t in "ABCD"), out
    assert json.loads(Path(dag + ".result").read_text())["reason"] == "done"
    assert not list(tmp_path.glob("wf.dag.out.*"))


CHAIN = "TASK A /bin/echo a\nTASK B {b}\nTASK C /bin/echo c\nEDGE A B\nEDGE B C\n"


@pytest.mark.parametrize(
    "how, b, args, reason, why",
    [
        ("-m", "/bin/false", ["-m", "1"], "error", "Max failures reached"),
        (
            "wall time",
            "/bin/sleep 30",
            ["--max-wall-time", "0.05"],
            "walltime",
            "max wall time of 0.05 minutes reached",
        ),
    ],
)
def test_every_end_of_a_run_says_what_it_could_not_write(dagfile, how, b, args, reason, why):
    dag = dagfile(CHAIN.format(b=b))
    res = run_pilot([*args, "-o", "/dev/full", dag], n=2)
    assert res.returncode == 1, res.stderr
    assert why in res.stderr and "Workflow failed: 2 of 3 tasks not done (B, C)" in res.stderr
    assert last_error(res.stderr) == (
        f"[error] The run could not write task stdout (/dev/full; kept in {dag}.out.<rank> "
        f"for the next run): {FREE_AND_RERUN}"
    )
    assert res.stdout.startswith('[cluster-summary stat="failed", tasks=3')
    assert json.loads(Path(dag + ".result").read_text())["reason"] == reason  # a wall-time cut stays one
    assert Path(dag + ".rescue").read_text() == "DONE A\n"
    assert "a\n" in Path(dag + ".out.1").read_text()


def test_a_sigterm_end_says_what_it_could_not_write(dagfile):
    dag = dagfile(CHAIN.format(b="/bin/sleep 30"))
    proc = subprocess.Popen(
        pilot_cmd(["-o", "/dev/full", dag], n=2), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        rescue = Path(dag + ".rescue")
        wait_for(lambda: rescue.exists() and "DONE A" in rescue.read_text(), 60, "task A done")
        master = master_pid(dag)
        assert master is not None
        os.kill(master, signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1, err
    assert "SIGTERM received" in err
    assert last_error(err) == (
        f"[error] The run could not write task stdout (/dev/full; kept in {dag}.out.<rank> "
        f"for the next run): {FREE_AND_RERUN}"
    )
    assert out.startswith('[cluster-summary stat="failed"')
    assert json.loads(Path(dag + ".result").read_text())["reason"] == "signal"


@pytest.fixture
def disk(tmp_path):
    """A 512 KiB tmpfs."""
    with small_disk(tmp_path / "disk", 512) as where:
        yield where


TASKS = 300


def test_a_disk_that_fills_during_a_run_ends_it_in_one_line_and_the_rerun_completes_it(disk):
    dag = disk / "w.dag"
    dag.write_text("".join(f"TASK t{i} /bin/echo task {i}\n" for i in range(TASKS)))
    filler = fill(disk, 64)  # a few dozen tasks' logs and output
    res = run_pilot(["--jobstate-log", str(dag)])
    assert res.returncode == 1, res.stderr[-3000:]
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr
    line = last_error(res.stderr)
    done_before = Path(str(dag) + ".rescue").read_text().count("DONE ")
    assert line.startswith("[error] The run could not write ")
    assert re.search(rf"^\[error\] Workflow failed: \d+ of {TASKS} tasks not done \(", res.stderr, re.M)
    assert f"{disk / 'jobstate.log'}" in line and line.endswith(FREE_AND_RERUN), line
    assert 0 < done_before < TASKS
    filler.unlink()
    rerun = run_pilot(["--jobstate-log", str(dag)])
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert f"{done_before} of {TASKS} tasks already done" in rerun.stderr
    # Tasks done before are not run again: one record per task over both runs (what the first could not write out
    # before it ended was kept in its per-worker files, and the rerun writes it out first).
    assert res.stdout.count("[cluster-task ") + rerun.stdout.count("[cluster-task ") == TASKS
    assert rerun.stdout.count("[cluster-task ") >= TASKS - done_before
    assert json.loads(Path(str(dag) + ".result").read_text())["reason"] == "done"
    # Every task's output came, and nothing torn: an attempt cut short by the full disk left nothing of itself.
    assert set(map(int, re.findall(r"task (\d+)\n", res.stdout + rerun.stdout))) == set(range(TASKS))
    for text in (res.stdout, rerun.stdout):
        torn = [line for line in text.splitlines() if not re.fullmatch(r"task \d+|\[cluster-(task|summary) .*\]", line)]
        assert not torn, torn[:5]
