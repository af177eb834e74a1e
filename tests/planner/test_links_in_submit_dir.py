"""``pilot plan --force`` and ``pilot submit`` never write through a symbolic link planted in the submit directory.

Each file the plan writes (the root braindump.yml, DAG, monitord.notify and pegasus.properties, a cluster's
.dag, batch script, .sub and data job input) and a cluster's directory is made a link to something outside; the
plan is refused in one line naming it, and the outside file is untouched. The same for submit.lock, where
pilot submit writes its pid.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pilot.errors import ConfigError
from pilot.submit.lock import SubmitLock
from tests.planner.test_user_values import PLAIN, write_inputs

FILES = [
    "braindump.yml",
    "uv-0.dag",
    "monitord.notify",
    "pegasus.properties",
    "cat_j1/cat_j1.dag",
    "cat_j1/cat_j1.sh",
    "cat_j1/cat_j1.sub",
    "cat_j1/braindump.yml",
    "stage_in_local_local_0_0/stage_in_local_local_0_0.in",
]


def pilot_plan(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    wf, conf = write_inputs(tmp_path, PLAIN)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pilot",
            "plan",
            "--site",
            "local",
            "--cluster",
            "none",
            str(wf),
            "--conf",
            str(conf),
            "--dir",
            str(tmp_path / "submit"),
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )


@pytest.fixture
def planned(tmp_path) -> Path:
    res = pilot_plan(tmp_path)
    assert res.returncode == 0, res.stderr
    return tmp_path / "submit"


@pytest.mark.parametrize("name", FILES)
def test_plan_force_does_not_write_through_a_linked_file(tmp_path, planned, name):
    outside = tmp_path / "outside"
    outside.write_text("mine\n")
    target = planned / name
    assert target.is_file()
    target.unlink()
    target.symlink_to(outside)
    res = pilot_plan(tmp_path, "--force")
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert str(target) in res.stderr and "symbolic link" in res.stderr
    assert outside.read_text() == "mine\n"


def test_plan_force_does_not_write_into_a_linked_cluster_directory(tmp_path, planned):
    outside = tmp_path / "outside"
    outside.mkdir()
    cdir = planned / "cat_j1"
    for f in cdir.iterdir():
        f.unlink()
    cdir.rmdir()
    cdir.symlink_to(outside)
    res = pilot_plan(tmp_path, "--force")
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert "symbolic link" in res.stderr
    assert list(outside.iterdir()) == []


def test_submit_does_not_write_its_pid_through_a_linked_lock(tmp_path):
    outside = tmp_path / "outside"
    outside.write_text("mine\n")
    (tmp_path / "submit.lock").symlink_to(outside)
    with pytest.raises(ConfigError, match="symbolic link"):
        SubmitLock(str(tmp_path)).acquire()
    assert outside.read_text() == "mine\n"
