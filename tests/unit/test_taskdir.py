"""A task's own directory (pilot.runtime.taskdir) and the pilot run options that place it."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from pilot.cli.run import parse_run_args
from pilot.errors import UsageError
from pilot.runtime import taskdir
from pilot.runtime.taskdir import TaskDirs


def test_local_scratch_reads_the_nodes_variables_and_refuses_what_it_cannot_place():
    env = {"SLURM_JOB_ID": "42"}
    assert parse_run_args(["--local-scratch", "/local/$SLURM_JOB_ID", "x.dag"], env).local_scratch == "/local/42"
    assert parse_run_args(["x.dag"], env).local_scratch is None
    with pytest.raises(
        UsageError,
        match=r"--local-scratch '/l/\$JOBDIR': \$JOBDIR is not set in this job's " r"environment on this node",
    ):
        parse_run_args(["--local-scratch", "/l/$JOBDIR", "x.dag"], env)
    with pytest.raises(UsageError, match="is not an absolute path"):
        parse_run_args(["--local-scratch", "scratch", "x.dag"], env)
    assert taskdir.local_scratch(None, {"TMPDIR": "/fast"}) == "/fast"
    assert taskdir.local_scratch(None, {}) == "/tmp"


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[TaskDirs, Path, Path]:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "in").write_text("payload")
    return TaskDirs(str(tmp_path / "local")), shared, tmp_path


def test_a_task_that_wrote_its_outputs(dirs):
    tds, shared, tmp = dirs
    path = Path(tds.prepare("t", "/dag", str(shared), (("in",), ("sub/out",), ())))
    assert (path / "in").read_text() == "payload" and os.readlink(path / "in") == str(shared / "in")
    (path / "sub").mkdir()
    (path / "sub" / "out").write_text("result")
    (path / "scratch.tmp").write_text("x")
    err = tmp / "err"
    with open(err, "wb") as fh:
        assert tds.finish("t", str(path), str(shared), (("in",), ("sub/out",), ()), 0, fh.fileno()) == 0
    assert (shared / "sub" / "out").read_text() == "result" and not (shared / "scratch.tmp").exists()
    assert not path.exists() and err.read_text() == ""


def test_a_missing_output_fails_the_task_and_nothing_reaches_the_shared_scratch(dirs):
    tds, shared, tmp = dirs
    files = ((), ("a", "b"), ())
    path = Path(tds.prepare("t", "/dag", str(shared), files))
    (path / "a").write_text("half")
    with open(tmp / "err", "wb") as fh:
        assert tds.finish("t", str(path), str(shared), files, 0, fh.fileno()) == 1
    assert (tmp / "err").read_text().startswith("Task t: declared output b was not written")
    assert not (shared / "a").exists() and not path.exists()


def test_outputs_cross_file_systems_by_copy_and_a_failed_move_takes_back_the_others(dirs, monkeypatch):
    tds, shared, tmp = dirs
    files = (("in",), ("a", "b"), ())
    path = Path(tds.prepare("t", "/dag", str(shared), files))
    (path / "a").write_text("A")
    (path / "b").write_text("B")
    (shared / "b").mkdir()
    (shared / "b" / "in the way").write_text("")  # b cannot replace a directory that holds a file
    real = os.rename

    def across(src, dst):
        if str(src).startswith(str(path)):
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        return real(src, dst)

    monkeypatch.setattr(os, "rename", across)
    with open(tmp / "err", "wb") as fh:
        assert tds.finish("t", str(path), str(shared), files, 0, fh.fileno()) == 1
    assert "cannot move declared output b" in (tmp / "err").read_text()
    assert not (shared / "a").exists()  # a was copied across, then taken back with the failure of b
    assert [p.name for p in shared.iterdir() if ".tmp." in p.name] == []
    path = Path(tds.prepare("t", "/dag", str(shared), (("in",), ("a",), ())))
    (path / "a").write_text("A")
    with open(tmp / "err", "wb") as fh:
        assert tds.finish("t", str(path), str(shared), (("in",), ("a",), ()), 0, fh.fileno()) == 0
    assert (shared / "a").read_text() == "A" and not path.exists()


def test_an_inout_file_keeps_its_shared_copy_and_a_failed_task_moves_nothing(dirs):
    tds, shared, tmp = dirs
    files = (("in",), ("in",), ("maybe",))
    path = Path(tds.prepare("t", "/dag", str(shared), files))
    with open(path / "in", "a") as fh:  # written through its link
        fh.write("+more")
    with open(tmp / "err", "wb") as fh:
        assert tds.finish("t", str(path), str(shared), files, 0, fh.fileno()) == 0
    assert (shared / "in").read_text() == "payload+more" and not (shared / "in").is_symlink()
    path = Path(tds.prepare("t", "/dag", str(shared), ((), ("out",), ())))
    (path / "out").write_text("partial")
    with open(tmp / "err", "wb") as fh:
        assert tds.finish("t", str(path), str(shared), ((), ("out",), ()), 3, fh.fileno()) == 3
    assert not (shared / "out").exists() and not path.exists()


def test_a_directory_left_by_a_killed_attempt_is_emptied_first(dirs):
    tds, shared, _ = dirs
    left = Path(tds.path("t", "/dag"))
    (left / "deep").mkdir(parents=True)
    (left / "deep" / "junk").write_text("x")
    os.chmod(left / "deep", 0o500)  # a task may leave read-only directories
    path = Path(tds.prepare("t", "/dag", str(shared), ((), (), ())))
    assert path == left and list(path.iterdir()) == []
    other = TaskDirs(tds.root).path("t", "/other.dag")  # a worker runs one DAG; two DAGs' tasks of a name never meet
    assert other != tds.path("t", "/dag") and os.path.dirname(other) == tds.root
    assert len(os.path.basename(tds.path("x" * 400, "/dag"))) < 255
