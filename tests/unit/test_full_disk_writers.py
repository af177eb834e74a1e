"""The master's writers on a disk that is full: what they could not write is said, nothing else is lost.

The merge of per-worker task stdio deletes a per-worker file only once its
target has taken it all, so a rerun merges what a full -o file could not take;
a monitoring writer that fails (jobstate.log, DAG.resource) is said once and
left out while the run goes on; a master whose own stdout is full ends saying
the summary record was not written. ``/dev/full`` is the full target: a file
opened on it under a real writer stands for a disk that fills.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import pytest

from pilot.contracts.jobstate import Event
from pilot.contracts.rescue import RescueLog
from pilot.contracts.result import result_path
from pilot.dag import read_dag
from pilot.errors import OutOfSpace
from pilot.monitor import stdio
from pilot.monitor.events import Fanout
from pilot.monitor.jobstate import JobstateLog
from pilot.monitor.resource_log import ResourceLog
from tests.conftest import simulate
from tests.smalldisk import fill, small_disk


@contextlib.contextmanager
def full_file() -> Iterator[BinaryIO]:
    """A -o file on a full disk; its close fails too (what it still buffers), as the master's close meets it."""
    fh = open("/dev/full", "ab")  # noqa: SIM115 - closed below
    try:
        yield fh
    finally:
        with contextlib.suppress(OSError):
            fh.close()


def worker_files(dag: Path, outputs: dict[int, tuple[bytes, bytes]]) -> None:
    for rank, (out, err) in outputs.items():
        Path(f"{dag}.out.{rank}").write_bytes(out)
        Path(f"{dag}.err.{rank}").write_bytes(err)


def test_a_full_stdout_target_keeps_its_files_and_the_other_stream_is_merged(tmp_path):
    dag = tmp_path / "w.dag"
    worker_files(dag, {1: (b"out 1\n", b"err 1\n"), 2: (b"out 2\n", b"err 2\n")})
    err_target = tmp_path / "err.txt"
    with full_file() as full, open(err_target, "ab") as err:
        with pytest.raises(stdio.MergeError) as caught:
            stdio.merge_worker_files(str(dag), [1, 2], full, err, delete=True)
    assert caught.value.stream == "stdout" and caught.value.error.errno == errno.ENOSPC
    assert caught.value.kept == [f"{dag}.out.1", f"{dag}.out.2"]
    # nothing of stdout deleted: the next run merges it whole; stderr went where it should and is gone
    assert Path(f"{dag}.out.1").read_bytes() == b"out 1\n" and Path(f"{dag}.out.2").read_bytes() == b"out 2\n"
    assert err_target.read_bytes() == b"err 1\nerr 2\n"
    assert not Path(f"{dag}.err.1").exists() and not Path(f"{dag}.err.2").exists()
    assert not Path(stdio.merged_path(str(dag))).exists()
    # the rerun, with room: everything that was not merged comes
    out_target = tmp_path / "out.txt"
    with open(out_target, "ab") as out, open(err_target, "ab") as err:
        assert (
            stdio.merge_worker_files(str(dag), [1, 2], out, err, delete=True, offsets=stdio.merged_offsets(str(dag)))
            == []
        )
    assert out_target.read_bytes() == b"out 1\nout 2\n"


def test_a_failed_run_that_cannot_merge_keeps_the_record_of_what_an_earlier_run_merged(tmp_path):
    dag = tmp_path / "w.dag"
    worker_files(dag, {1: (b"old\nnew\n", b"")})
    Path(stdio.merged_path(str(dag))).write_text(f"4 {dag}.out.1\n")  # an earlier run merged "old\n"
    offsets = stdio.merged_offsets(str(dag))
    with full_file() as full, open(tmp_path / "err.txt", "ab") as err:
        with pytest.raises(stdio.MergeError):
            stdio.merge_worker_files(str(dag), [1], full, err, delete=False, offsets=offsets)
    assert stdio.merged_offsets(str(dag))[str(dag) + ".out.1"] == 4
    out_target = tmp_path / "out.txt"
    with open(out_target, "ab") as out, open(tmp_path / "err.txt", "ab") as err:
        stdio.merge_worker_files(str(dag), [1], out, err, delete=True, offsets=stdio.merged_offsets(str(dag)))
    assert out_target.read_bytes() == b"new\n"


def on_full_disk(writer) -> None:
    """The writer's open file replaced by one on /dev/full, opened as the writer opened its own: the disk fills
    under the open file (its next flush fails with ENOSPC, from the kernel)."""
    old = writer._fh
    writer._fh = open("/dev/full", "a", encoding="utf-8", buffering=1 << 16)  # noqa: SIM115 - the writer closes it
    old.close()


def test_a_monitoring_file_that_cannot_be_written_is_said_once_and_left_out(tmp_path):
    said = []
    full = JobstateLog(str(tmp_path / "jobstate.log"))
    on_full_disk(full)
    fine = JobstateLog(str(tmp_path / "other.log"))
    fan = Fanout([full, fine], on_error=lambda what, exc: said.append((what, exc.errno)))
    dag = tmp_path / "w.dag"
    dag.write_text("TASK a /bin/true\n")
    task = read_dag(str(dag)).tasks["a"]
    for seq in (1, 2):
        fan.task_queued(task, seq)
        fan.flush()
    fan.close()
    assert said == [(str(tmp_path / "jobstate.log"), errno.ENOSPC)]
    assert [line.split()[2] for line in (tmp_path / "other.log").read_text().splitlines()] == [Event.SUBMIT.value] * 2


def test_without_a_handler_the_error_is_raised(tmp_path):
    log = JobstateLog(str(tmp_path / "jobstate.log"))
    on_full_disk(log)
    with pytest.raises(OSError):
        Fanout([log]).run_started("w.dag", 1, 1)
    with contextlib.suppress(OSError):
        log.close()


def test_a_resource_log_that_cannot_be_written_is_said_once(tmp_path):
    said = []
    log = ResourceLog(str(tmp_path / "w.dag.resource"), flush_interval=0, on_error=lambda what, exc: said.append(what))
    on_full_disk(log)
    log.record(1, 1, 100, "h")
    log.record(1, 1, 100, "h")
    log.flush()
    log.close()
    assert said == [str(tmp_path / "w.dag.resource")]


def test_a_master_whose_stdout_is_full_says_the_summary_was_not_written(dagfile, monkeypatch, caplog):
    """``pilot run > FILE`` on a full disk: every task done, the summary record lost, exit 1, result 'error'."""
    dag = dagfile("TASK A x\nTASK B x\nEDGE A B\n")
    full = open("/dev/full", "w")  # noqa: SIM115 - the run points it at /dev/null once its write failed
    monkeypatch.setattr(sys, "stdout", full)
    with caplog.at_level(logging.INFO, logger="pilot"):
        code, _, _ = simulate(dag)
    monkeypatch.undo()
    full.close()  # the run pointed it at /dev/null: nothing fails any more
    assert code == 1
    assert caplog.records[-1].getMessage() == (
        "All 2 tasks done, but the run could not write the [cluster-summary] record (standard output): free space "
        "and rerun: the rescue log keeps what is done"
    )
    assert json.loads(Path(result_path(dag)).read_text())["reason"] == "error"
    assert Path(dag + ".rescue").read_text() == "DONE A\nDONE B\n"
    code, _, _ = simulate(dag)  # the rerun, with room: nothing to run again, the summary written
    assert code == 0 and json.loads(Path(result_path(dag)).read_text())["reason"] == "done"


def test_a_rescue_log_that_cannot_be_rewritten_at_the_start_is_exit_1_and_stays_whole(tmp_path):
    with small_disk(tmp_path / "disk", 64) as disk:
        log = disk / "w.dag.rescue"
        log.write_text("DONE a\nDONE b\n")
        fill(disk, 0)
        with pytest.raises(OutOfSpace) as caught:
            RescueLog(str(log), ["a", "b"])
        assert caught.value.exit_code == 1
        assert str(caught.value) == (
            f"{log}: cannot write the rescue log: No space left on device; free space and "
            "rerun: the log keeps what is done"
        )
        assert log.read_text() == "DONE a\nDONE b\n" and sorted(p.name for p in disk.iterdir()) == [
            "filler",
            "w.dag.rescue",
        ]
