"""pilot run on a full disk: the run says in one line what it could not write, exits 1, and a rerun completes it.

Two shapes: the task stdout file (-o) on ``/dev/full``, and a DAG directory on
a small tmpfs that fills up while the run writes jobstate.log (tests.smalldisk:
a file that fills it but for a few pages; removing it is "free space"; the test
is skipped, saying so, where no tmpfs can be mounted).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import DIAMOND_DAG
from tests.mpi.helpers import run_pilot
from tests.smalldisk import fill, small_disk

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
        f"{dag}.out.<rank> for the next run): {FREE_AND_RERUN}")
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
    assert rerun.stdout.count("[cluster-task ") == TASKS - done_before  # tasks done before are not run again
    assert json.loads(Path(str(dag) + ".result").read_text())["reason"] == "done"
    # Every task's output came (a failed task's torn last line may run into the next file's first line).
    assert set(map(int, re.findall(r"task (\d+)\n", res.stdout + rerun.stdout))) == set(range(TASKS))
