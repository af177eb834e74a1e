"""pilot run under mpiexec with --max-wall-time and runtimes in the DAG: nothing started that the limit would kill."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pilot.contracts.result import RunOutcome, read_result
from tests.mpi.helpers import run_pilot

pytestmark = pytest.mark.mpi

STATUS = re.compile(r"\[cluster-task name=(\S+), .*?status=(-?\d+)")


@pytest.mark.timing
def test_a_task_that_cannot_finish_is_left_for_the_resubmitted_run(dagfile):
    # 9 s limit: "first" ends after 3 s, when "long" (7 s) no longer fits but "quick" does
    dag = dagfile(
        "#pilot runtime=3\nTASK first /bin/sleep 3\n#pilot runtime=7\nTASK long /bin/sleep 7\n"
        "#pilot runtime=0.5\nTASK quick /bin/sleep 0.5\nEDGE first long\nEDGE first quick\n"
    )
    res = run_pilot(["--jobstate-log", "--max-wall-time", "0.15", dag])
    assert res.returncode == 1, res.stderr
    ran = dict(STATUS.findall(res.stdout))
    assert ran == {"first": "0", "quick": "0"}  # long never started, nothing was killed
    assert "1 task(s) left for the next run: their runtime exceeds the" in res.stderr and "(long: 7 s)" in res.stderr
    assert "max wall time" not in res.stderr  # it ended before the limit, with nothing left to do
    assert Path(dag + ".rescue").read_text() == "DONE first\nDONE quick\n"
    result = read_result(dag)
    assert result is not None and result.outcome is RunOutcome.WALLTIME and result.unfinished == ["long"]
    again = run_pilot(
        ["--jobstate-log", "--max-wall-time", "0.25", dag]
    )  # the resubmission resumes from the rescue log
    assert again.returncode == 0, again.stderr
    assert dict(STATUS.findall(again.stdout)) == {"long": "0"}
    result = read_result(dag)
    assert result is not None and result.outcome is RunOutcome.DONE
