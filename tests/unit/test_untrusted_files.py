"""Paths that are not what pilot expects (a FIFO, a device, a directory, a symbolic link, a read-only directory),
numbers past any sense, and bytes that are not UTF-8: one line each, or, where the input is legitimate, it works.

The same classes through the real command line: tests/unit/test_no_internal_error.py.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from pilot.contracts.rescue import RescueLog, read_rescue
from pilot.contracts.submitdir import _q
from pilot.dag import format_dag, parse_dag, read_dag
from pilot.errors import ConfigError, DagError
from pilot.monitor.jobstate import JobstateLog
from pilot.siteschema import parse_walltime
from pilot.submit.lock import SubmitLock, holder
from pilot.util.argtypes import positive_seconds, whole_number
from pilot.util.atomic import write_atomic
from pilot.util.safeopen import open_file
from pilot.util.tail import Tail


def one_line(exc: pytest.ExceptionInfo, *pieces: str) -> None:
    text = str(exc.value)
    assert "\n" not in text and len(text) < 600, text
    for piece in pieces:
        assert piece in text, text


# -- 2. a DAG that is not a file, or not a DAG ----------------------------------------------------------


@pytest.mark.parametrize(
    "make, says",
    [
        (lambda p: os.mkfifo(p), "is a FIFO, not a file"),  # opened without blocking: refused, never waited on
        (lambda p: p.mkdir(), "is a directory, not a file"),
        (lambda p: p.write_bytes(b"\0" * (5 << 20)), ":1: line longer than 4,194,304 characters"),  # not read whole
    ],
)
def test_a_dag_that_is_not_a_dag_file(tmp_path, make, says):
    path = tmp_path / "wf.dag"
    make(path)
    with pytest.raises(DagError) as exc:
        read_dag(str(path))
    one_line(exc, "wf.dag", says)


def test_a_device_as_the_dag():
    with pytest.raises(DagError) as exc:
        read_dag("/dev/zero")
    one_line(exc, "/dev/zero: cannot read DAG: is a device, not a file")


def test_a_rescue_log_that_is_a_fifo_is_refused_not_waited_on(tmp_path):
    os.mkfifo(tmp_path / "wf.dag.rescue")
    with pytest.raises(DagError) as exc:
        read_rescue(str(tmp_path / "wf.dag.rescue"))
    one_line(exc, "is a FIFO, not a file")


# -- 3. numbers -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["inf", "1e400", "nan", "-1", "0", "99999999999"])
def test_walltime_is_a_finite_time(text):
    with pytest.raises(ConfigError) as exc:
        parse_walltime(text, "--set")
    one_line(exc, f"--set: walltime {text!r}")


@pytest.mark.parametrize("text", ["nan", "inf", "-inf", "1e400", "0", "-2", "100000"])
def test_poll_is_a_finite_positive_time(text):
    with pytest.raises(argparse.ArgumentTypeError):
        positive_seconds(text)
    assert positive_seconds("0.5") == 0.5


def test_retry_counts_are_short_numbers():
    count = whole_number(0, 999999)  # pilot submit's --retry
    with pytest.raises(argparse.ArgumentTypeError):
        count("9" * 5000)  # int() would raise its own ValueError past 4,300 digits
    assert count("3") == 3


@pytest.mark.parametrize(
    "option, says",
    [
        ("-c 1e300", "more than 4294967295"),
        ("-m 1e300", "more than 4294967295"),
        ("-g 5e9", "more than 4294967295"),
        ("-c inf", "not a finite number"),
        ("-t " + "9" * 5000, "out of range"),
        ("-p -99999999999", "out of range"),
    ],
)
def test_task_requests_fit_what_pmc_reads(option, says):
    with pytest.raises(DagError) as exc:
        parse_dag([f"TASK a {option} /bin/true\n"], "t.dag")
    one_line(exc, "t.dag:1: task 'a':", says)


# -- 4. a submit directory that cannot be written -------------------------------------------------------


def test_submit_lock_that_cannot_be_created_is_one_line(tmp_path):
    (tmp_path / "submit.lock").mkdir()  # what a read-only directory does to root too: the lock cannot be opened
    with pytest.raises(ConfigError) as exc:
        SubmitLock(str(tmp_path)).acquire()
    one_line(exc, "submit.lock: cannot create the lock file", "make it writable")


def test_read_only_submit_directory(tmp_path, monkeypatch):
    if os.geteuid() == 0:  # root writes to a read-only directory: have open() answer as it does for a user

        def refuse(path, *args, **kwargs):
            raise PermissionError(13, "Permission denied", path)

        monkeypatch.setattr("pilot.util.flock.os.open", refuse)
    tmp_path.chmod(0o555)
    try:
        with pytest.raises(ConfigError) as exc:
            SubmitLock(str(tmp_path)).acquire()
        one_line(exc, "cannot create the lock file (Permission denied)")
    finally:
        tmp_path.chmod(0o755)


def test_a_lock_that_is_a_fifo_is_held_by_nobody(tmp_path):
    os.mkfifo(tmp_path / "submit.lock")
    assert holder(str(tmp_path)) is None  # pilot status does not wait on it


# -- 5. a file pilot follows that is a directory --------------------------------------------------------


@pytest.mark.parametrize("make", [lambda p: p.mkdir(), lambda p: os.mkfifo(p)])
def test_a_followed_file_that_is_not_a_file(tmp_path, make):
    make(tmp_path / "jobstate.log")
    with pytest.raises(ConfigError) as exc:
        Tail(str(tmp_path / "jobstate.log")).lines()
    one_line(exc, "jobstate.log: cannot read: is a")


# -- 6. never written through a symbolic link -----------------------------------------------------------


@pytest.fixture
def planted(tmp_path: Path) -> tuple[Path, Path]:
    """A file elsewhere, and a directory where pilot writes."""
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("precious\n")
    here = tmp_path / "run"
    here.mkdir()
    return elsewhere, here


def test_a_rescue_log_that_is_a_link_is_not_written_through(planted):
    elsewhere, here = planted
    (here / "wf.dag.rescue").symlink_to(elsewhere)
    with pytest.raises(DagError) as exc:
        RescueLog(str(here / "wf.dag.rescue"))
    one_line(exc, "wf.dag.rescue: cannot write the rescue log: is a symbolic link", "remove the link")
    assert elsewhere.read_text() == "precious\n"


def test_monitoring_files_and_temporary_files_are_not_written_through_links(planted):
    elsewhere, here = planted
    (here / "jobstate.log").symlink_to(elsewhere)
    with pytest.raises(OSError, match="is a symbolic link"):
        JobstateLog(str(here / "jobstate.log"))
    (here / f"x.result.tmp.{os.getpid()}").symlink_to(elsewhere)
    with pytest.raises(OSError, match="is a symbolic link"):
        write_atomic(str(here / "x.result"), "{}")
    assert elsewhere.read_text() == "precious\n"


def test_a_fifo_where_pilot_writes_is_refused_not_waited_on(tmp_path):
    os.mkfifo(tmp_path / "dagman.out")
    with pytest.raises(OSError, match="is a FIFO"):
        open_file(str(tmp_path / "dagman.out"), "a")


# -- 7. bytes that are not UTF-8 ------------------------------------------------------------------------


def test_arguments_keep_their_bytes_and_task_ids_must_be_text(tmp_path):
    path = tmp_path / "u.dag"
    path.write_bytes(b"TASK a /bin/echo caf\xe9\n")
    dag = read_dag(str(path))
    assert format_dag(dag).encode("utf-8", "surrogateescape") == b"TASK a /bin/echo caf\xe9\n"  # as PMC passes it
    assert _q(dag.tasks["a"].argv[1]) == '"caf\ufffd"'  # monitoring files are UTF-8 text for people to read
    path.write_bytes(b"TASK caf\xe9 /bin/echo hi\n")
    with pytest.raises(DagError) as exc:
        format_dag(read_dag(str(path)))
    one_line(exc, "u.dag:1: task id 'caf\\udce9' has bytes that are not UTF-8", "rename it")
