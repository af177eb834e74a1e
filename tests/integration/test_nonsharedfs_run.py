"""A nonsharedfs workflow run for real with pilot submit --site local: its compute tasks ran in directories of
their own on node-local storage ($TMPDIR), their temporary files never reached the shared scratch, their
declared outputs did and were staged out and registered (docs/data.md)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys

import pytest

from tests.conftest import mpiexec
from tests.planner.data_wf import data_workflow

pytestmark = pytest.mark.mpi

# The example's stageable executable, which also says where it runs (its stdout file, j2.out, is staged out)
# and writes a temporary file of its own.
MINE = '#!/bin/sh\npwd\nhead -c 100000 /dev/zero > scratch.tmp\ncat "$1" > "$2" && echo mine >> "$2"\n'


@pytest.mark.parametrize("cluster", ["whole", "horizontal"])
def test_a_nonsharedfs_workflow_keeps_its_temporary_files_off_the_shared_scratch(tmp_path, cluster):
    if mpiexec() is None:
        pytest.skip("no mpiexec (pip install mpich)")
    paths = data_workflow(tmp_path, props={"pegasus.data.configuration": "nonsharedfs"})
    (tmp_path / "bin" / "mine.sh").write_text(MINE)
    node = tmp_path / "node-local"
    node.mkdir()
    sub = tmp_path / "sub"
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "pilot",
            "submit",
            "--poll",
            "0.2",
            "--site",
            "local",
            paths["workflow"],
            "--conf",
            paths["conf"],
            "--dir",
            str(sub),
            "--cluster",
            cluster,
            "--cleanup",
            "none",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TMPDIR": str(node)},
    )
    assert res.returncode == 0, res.stderr
    assert "warning" not in res.stderr
    assert (tmp_path / "output" / "f.c").read_text() == "hello\nmine\n"
    assert (tmp_path / "output" / "j2.out").read_text().startswith(str(node) + "/pilot-")  # where j2 ran
    (workdir,) = [p.parent for p in (tmp_path / "scratch").rglob("f.b")]  # the workflow's directory, kept
    assert {"f.a", "f.b", "f.c", "j2.out"} <= {p.name for p in workdir.iterdir()}
    assert not list((tmp_path / "scratch").rglob("scratch.tmp"))  # the temporary file stayed node-local
    assert list(node.iterdir()) == []  # and went with its task's directory
    db = sqlite3.connect(sub / "data-0.replicas.db")
    assert db.execute("select lfn, pfn, site from rc_lfn natural join rc_pfn").fetchall() == [
        ("f.c", f"file://{tmp_path}/output/f.c", "local")
    ]
    db.close()
    done: dict[str, int] = {}
    for log in sub.glob("*/jobstate.log"):
        for line in log.read_text().splitlines():
            fields = line.split()
            if len(fields) > 2 and fields[2] == "JOB_SUCCESS":
                done[fields[1]] = done.get(fields[1], 0) + 1
    assert done["cp_j1"] == 1 and done["mine_j2"] == 1 and set(done.values()) == {1}  # every job once
