"""pilot run --task-files under mpiexec: each listed task in a directory of its own on node-local storage, its
declared inputs linked in, its declared outputs (and nothing else) moved to its working directory on the
shared scratch; failures leave nothing there (pilot.runtime.taskdir)."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest

from pilot.runtime.startup import dag_key
from pilot.runtime.taskdir import TaskDirs
from tests.mpi.helpers import run_pilot

pytestmark = pytest.mark.mpi


def write_lists(path: Path, tasks: dict[str, tuple[list[str], list[str], list[str]]]) -> str:
    lines = [json.dumps({"format": 1})] + [json.dumps([name, *files]) for name, files in tasks.items()]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def setup(tmp_path: Path, body: str, tasks: dict, local: Path | None = None) -> tuple[Path, Path, list[str]]:
    shared, local = tmp_path / "shared", local or tmp_path / "local"
    shared.mkdir()
    local.mkdir(exist_ok=True)
    (shared / "in.txt").write_text("payload\n")
    dag = tmp_path / "wf.dag"
    dag.write_text(f"#pilot cwd={shared}\n{body}")
    args = [
        "--per-task-stdio",
        "--task-files",
        write_lists(tmp_path / "wf.dag.taskfiles", tasks),
        "--local-scratch",
        str(local),
        str(dag),
    ]
    return shared, local, args


BODY = """TASK A /bin/sh -c "pwd > where.txt; head -c 100000 /dev/zero > big.tmp; cat in.txt > out.txt"
TASK B /bin/sh -c "cat out.txt out.txt > b.txt"
TASK C /bin/sh -c "echo half > partial.out; exit 3"
TASK D /bin/sh -c "echo forgot"
TASK E /bin/sh -c "pwd > e.txt"
EDGE A B
"""
LISTS = {
    "A": (["in.txt"], ["out.txt", "where.txt"], []),
    "B": (["out.txt"], ["b.txt"], ["maybe.txt"]),
    "C": ([], ["partial.out"], []),
    "D": ([], ["missing.out"], []),
}


@pytest.mark.parametrize("where", ["same file system", "another file system"])
def test_temporary_files_stay_local_outputs_reach_the_shared_scratch_failures_leave_nothing(tmp_path, where):
    local = None
    if where == "another file system":
        if not os.path.isdir("/dev/shm") or os.stat("/dev/shm").st_dev == os.stat(tmp_path).st_dev:
            pytest.skip("no second file system (/dev/shm) here")
        local = Path("/dev/shm") / f"pilot-test-{uuid.uuid4().hex}"
    try:
        shared, local, args = setup(tmp_path, BODY, LISTS, local)
        res = run_pilot(args)
        assert res.returncode != 0  # C and D failed
        # A ran in a directory of its own under --local-scratch; its temporary file never reached the shared scratch.
        assert (shared / "where.txt").read_text().startswith(str(local) + "/pilot-")
        assert (shared / "out.txt").read_text() == "payload\n"
        assert not (shared / "big.tmp").exists()
        assert (shared / "b.txt").read_text() == "payload\npayload\n"  # B read A's output through its link
        assert not (shared / "maybe.txt").exists()  # an optional output B did not write: no failure
        # C failed: nothing of it on the shared scratch. D did not write its declared output: it failed, saying so.
        assert not (shared / "partial.out").exists()
        assert "Task D: declared output missing.out was not written" in (tmp_path / "D.err.000").read_text()
        records = {
            t: next(
                line
                for line in (tmp_path / f"{t}.out.000").read_text().splitlines()
                if line.startswith("[cluster-task")
            )
            for t in "ABCDE"
        }
        assert "status=3" in records["C"] and "status=1" in records["D"] and "status=0" in records["A"]
        # E is not listed: it ran in its working directory, as under sharedfs.
        assert (shared / "e.txt").read_text().strip() == str(shared)
        assert list(local.iterdir()) == []  # every task directory removed, the failed ones too
        assert sorted(p.name for p in shared.iterdir()) == ["b.txt", "e.txt", "in.txt", "out.txt", "where.txt"]
    finally:
        if local is not None and str(local).startswith("/dev/shm/"):
            import shutil

            shutil.rmtree(local, ignore_errors=True)


def test_keep_task_dirs_keeps_what_a_failed_task_left(tmp_path):
    shared, local, args = setup(
        tmp_path, 'TASK C /bin/sh -c "echo half > partial.out; exit 3"\n', {"C": ([], ["partial.out"], [])}
    )
    res = run_pilot(["--keep-task-dirs", *args])
    assert res.returncode != 0
    (kept,) = local.iterdir()
    assert (kept / "partial.out").read_text() == "half\n"
    assert not (shared / "partial.out").exists()


def test_a_task_after_a_killed_run_starts_in_an_empty_directory(tmp_path):
    """A run killed with SIGKILL leaves its task's directory; the next attempt of the task finds it and empties it."""
    body = 'TASK A /bin/sh -c "ls -A > listing.txt"\n'
    shared, local, args = setup(tmp_path, body, {"A": (["in.txt"], ["listing.txt"], [])})
    left = Path(TaskDirs(str(local)).path("A", dag_key(str(tmp_path / "wf.dag"))))
    left.mkdir()
    (left / "half-written.tmp").write_text("from the killed run")
    (left / "listing.txt").write_text("stale")
    res = run_pilot(args)
    assert res.returncode == 0, res.stderr
    assert (shared / "listing.txt").read_text().split() == ["in.txt", "listing.txt"]
    assert not left.exists()


def test_a_task_files_list_of_another_dag_is_one_line(tmp_path):
    shared, local, args = setup(tmp_path, "TASK A /bin/true\n", {"Z": ([], [], [])})
    res = run_pilot(args)
    assert res.returncode == 2, res.stderr
    assert "wf.dag.taskfiles: task Z is not in" in res.stderr and "Traceback" not in res.stderr
