"""Stand-in variants of the workflows pegasus-isi publishes, run end to end with pilot submit --site local.

tests/standin.py makes a copy of each golden folder runnable (every pfn a stand-in that checks the job's inputs
and writes its outputs, every replica a small file, a transformation's container dropped: the test machine has no
Singularity). The run then shows every job ran once, every input was staged in, every output marked stageOut is
in the output site's storage directory, and those marked registerReplica too are in the output replica catalog.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import mpiexec
from tests.pegasus_isi import job_ids
from tests.standin import StandIn

pytestmark = [pytest.mark.mpi]
PILOT = [sys.executable, "-m", "pilot"]


def submit(run: StandIn, sub: Path, cluster: str) -> subprocess.CompletedProcess:
    if mpiexec() is None:
        pytest.skip("no mpiexec (pip install mpich)")
    # monitord is left out: rosetta's properties send its events to a public AMQP server.
    args = [
        *PILOT,
        "submit",
        "workflow.yml",
        "--site",
        "local",
        "--sites",
        run.published.sites,
        "--cluster",
        cluster,
        "--dir",
        str(sub),
        "--poll",
        "0.2",
        "--no-monitord",
    ]
    return subprocess.run(args, cwd=run.folder, capture_output=True, text=True, timeout=300)


def registered_lfns(sub: Path) -> set[str]:
    lfns: set[str] = set()
    for db_path in sub.glob("*.replicas.db"):
        db = sqlite3.connect(db_path)
        lfns |= {lfn for (lfn,) in db.execute("select lfn from rc_lfn")}
        db.close()
    return lfns


@pytest.mark.parametrize(
    ("name", "cluster"),
    [("1000genome", "horizontal"), ("rosetta", "whole"), ("earthquake", "whole"), ("casa-wind", "horizontal")],
)
def test_stand_in_of_a_published_workflow_runs_each_job_once_and_moves_its_files(tmp_path, name, cluster):
    run = StandIn(name, tmp_path)
    sub = tmp_path / "sub"
    res = submit(run, sub, cluster)
    assert res.returncode == 0, res.stdout + res.stderr
    jobs = job_ids(run.folder)
    assert Counter(run.ledger.read_text().split()) == Counter(jobs)
    staged = {p.name: p.read_text() for p in run.storage().rglob("*") if p.is_file()}
    wanted = run.outputs(registered=False)
    assert wanted and set(staged) == wanted
    assert all(text.endswith(f" wrote {lfn}\n") for lfn, text in staged.items())
    assert registered_lfns(sub) == run.outputs(registered=True)
