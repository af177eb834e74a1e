"""The pilot's result file: how a run ended, as pilot submit reads it."""

from __future__ import annotations

import os

import pytest

from pilot.contracts.result import ResultError, RunOutcome, RunResult, read_result, result_path, write_result
from pilot.errors import RunAborted
from pilot.runtime.master import Master
from pilot.runtime.options import RunOptions
from pilot.runtime.protocol import HostSetup
from pilot.runtime.simulate import SimCluster, SimHost
from tests.conftest import DIAMOND_DAG


def test_round_trip_and_missing(tmp_path):
    dag = str(tmp_path / "x.dag")
    assert read_result(dag) is None  # no file: the job vanished before the pilot wrote one
    written = RunResult(RunOutcome.WALLTIME, 4, 2, ["C", "D"], 1, end=1_790_000_000.5)
    write_result(result_path(dag), written)
    r = read_result(dag)
    assert r == written and not r.ok


def test_tasks_stopped_at_max_crashes_round_trip_and_decide_whether_a_retry_helps(tmp_path):
    dag = str(tmp_path / "x.dag")
    written = RunResult(RunOutcome.FAILED, 4, 2, ["B", "D"], 1, end=1_790_000_000.5, failed=1, crashed={"B": 2})
    write_result(result_path(dag), written)
    r = read_result(dag)
    assert r == written and r.only_crashes  # D is under B: a rerun would fail B at once and leave D again
    assert not r._replace(failed=2).only_crashes  # another task failed on its own: a rerun may do better
    assert not r._replace(aborted=True).only_crashes  # -m stopped it: a rerun runs what it had not started
    assert not RunResult(RunOutcome.FAILED, 4, 2, ["B", "D"], 1).only_crashes  # a result that does not say


def test_the_run_reports_the_failed_tasks_its_crash_record_stopped(tmp_path):
    from pilot.dag import parse_dag
    from pilot.runtime.crashes import log_path
    from pilot.runtime.engine import Engine
    from pilot.runtime.report import RunReport

    dag = str(tmp_path / "x.dag")
    engine = Engine(parse_dag(["TASK A /bin/true", "TASK B /bin/true", "TASK C /bin/true", "EDGE A C"], dag))
    a, b = engine.dag.tasks["A"], engine.dag.tasks["B"]
    for task in (a, b):
        engine.start(task)
        engine.failed(task, retry=False)
    # A crashed its worker twice (a torn last line says nothing); B crashed once and then failed on its own
    with open(log_path(dag), "w") as fh:
        fh.write("SUSPECT A\nALONE A\nCRASH A\nALONE A\nCRASH A\nCRASH B\nCRASH")
    report = RunReport(RunOptions(dag=dag, max_crashes=2), "app", [1], None, None, None)
    report.write_outcome(engine, RunOutcome.FAILED, 1)
    r = read_result(dag)
    assert (r.failed, r.aborted, r.crashed, r.only_crashes) == (2, False, {"A": 2}, False)


@pytest.mark.parametrize(
    "text",
    [
        "{",
        '{"reason": "eaten", "tasks": 1, "done": 0}',
        '{"reason": "done"}',
        "[]",
        "",
        '{"reason": "done", "tasks": Infinity, "done": 1}',
        '{"reason": "done", "tasks": 1e400, "done": 1}',
        '{"reason": "done", "tasks": 2.5, "done": 1}',
        '{"reason": "done", "tasks": "4", "done": 1}',
        '{"reason": "done", "tasks": 1, "done": 1, "unfinished": 7}',
        "[" * 100_000,
        '{"reason": "failed", "tasks": 1, "done": 0, "crashed": {"A": -1}}',
        '{"reason": "failed", "tasks": 1, "done": 0, "crashed": ["A"]}',
        '{"reason": "failed", "tasks": 1, "done": 0, "aborted": 1}',
        "\udcff garbage",
    ],
)
def test_an_unreadable_result_is_an_error(tmp_path, text):
    dag = str(tmp_path / "x.dag")
    with open(result_path(dag), "w", errors="surrogateescape") as fh:
        fh.write(text)
    with pytest.raises(ResultError, match=r"x\.dag\.result: not a pilot result \((?!not a pilot)") as err:
        read_result(dag)
    assert "\n" not in str(err.value)


def test_a_result_that_is_a_directory_or_a_fifo_is_an_error(tmp_path):
    dag = str(tmp_path / "x.dag")
    os.mkdir(result_path(dag))
    with pytest.raises(ResultError, match=r"x\.dag\.result: not a pilot result \(is a directory, not a file\)"):
        read_result(dag)
    os.rmdir(result_path(dag))
    os.mkfifo(result_path(dag))  # opened without blocking: refused at once, never waited on
    with pytest.raises(ResultError, match=r"x\.dag\.result: not a pilot result \(is a FIFO, not a file\)"):
        read_result(dag)


class HostScriptsNeverReady(SimCluster):
    def handle(self, r, msg, reply):
        if isinstance(msg, HostSetup) and msg.script:
            return  # the host script outlives the wall time
        super().handle(r, msg, reply)


def test_wall_time_during_start_up_is_walltime(dagfile):
    dag = dagfile(DIAMOND_DAG)
    cluster = HostScriptsNeverReady([SimHost("h1", cpus=2, slots=2)])
    master = Master(RunOptions(dag=dag, host_script="/bin/true", max_wall_time=0.001), cluster.transport, None)
    with pytest.raises(RunAborted, match="max wall time reached during host scripts"):
        master.run()
    result = read_result(dag)
    assert result is not None and result.outcome is RunOutcome.WALLTIME  # resubmitted, not failed
