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


@pytest.mark.parametrize("text", ["{", '{"reason": "eaten", "tasks": 1, "done": 0}', '{"reason": "done"}', "[]", "",
                                  '{"reason": "done", "tasks": Infinity, "done": 1}', '{"reason": "done", "tasks": 1e400, "done": 1}',
                                  '{"reason": "done", "tasks": 2.5, "done": 1}', '{"reason": "done", "tasks": "4", "done": 1}',
                                  '{"reason": "done", "tasks": 1, "done": 1, "unfinished": 7}', "[" * 100_000,
                                  "\udcff garbage"])
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
