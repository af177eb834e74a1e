"""Hierarchical workflows run for real: a pegasusWorkflow job, planned when ready from a file its parent wrote,
driven by a nested pilot submit under real MPI, followed by the real pegasus-monitord, counted by the real
pegasus-statistics; its failure fails the job, a rerun resumes it, and a killed driver finds it again."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import mpiexec
from tests.integration.pegasus_tools import statistics
from tests.waiting import wait_for

pytestmark = [pytest.mark.mpi, pytest.mark.monitord]
api = pytest.importorskip("Pegasus.api")
PILOT = [sys.executable, "-m", "pilot"]
SUB = "subdax_inner_ID0000001"


def sites(tmp: Path) -> api.SiteCatalog:
    return api.SiteCatalog().add_sites(
        api.Site("local").add_directories(
            api.Directory(api.Directory.SHARED_SCRATCH, str(tmp / "scratch")).add_file_servers(
                api.FileServer(f"file://{tmp / 'scratch'}", api.Operation.ALL)
            ),
            api.Directory(api.Directory.LOCAL_STORAGE, str(tmp / "output")).add_file_servers(
                api.FileServer(f"file://{tmp / 'output'}", api.Operation.ALL)
            ),
        )
    )


def workflows(tmp: Path, inner_job: str) -> Path:
    """GEN copies the sub-workflow's YAML into place and MK writes data.txt; the sub-workflow (label clustering
    by its own arguments) runs ``inner_job``, which reads data.txt and writes out.txt; then AFTER runs."""
    tc = api.TransformationCatalog().add_transformations(
        api.Transformation("sh", site="local", pfn="/bin/sh", is_stageable=False),
        api.Transformation("cp", site="local", pfn="/bin/cp", is_stageable=False),
    )
    data, out, iy, tmpl = api.File("data.txt"), api.File("out.txt"), api.File("inner.yml"), api.File("template.yml")
    inner = api.Workflow("inner").add_transformation_catalog(tc).add_site_catalog(sites(tmp))
    inner.add_jobs(api.Job("sh", _id="IN1").add_args("-c", f"'{inner_job}'").add_inputs(data).add_outputs(out))
    inner.write(str(tmp / "template.yml"))
    wf = api.Workflow("outer").add_transformation_catalog(tc).add_site_catalog(sites(tmp))
    gen = api.Job("cp", _id="GEN").add_args(tmpl, iy).add_inputs(tmpl).add_outputs(iy, stage_out=False)
    mk = api.Job("sh", _id="MK").add_args("-c", "'echo payload > data.txt'").add_outputs(data, stage_out=False)
    sub = api.SubWorkflow(iy, False).add_args("--cluster", "label").add_inputs(data)
    after = api.Job("sh", _id="AFTER").add_args("-c", "'echo after'")
    wf.add_jobs(gen, mk, sub, after).add_dependency(sub, children=[after])
    wf.add_replica_catalog(api.ReplicaCatalog().add_replica("local", "template.yml", str(tmp / "template.yml")))
    wf.write(str(tmp / "outer.yml"))
    return tmp / "outer.yml"


def submit(*args: str, timeout: float = 300, **kw) -> subprocess.CompletedProcess:
    if mpiexec() is None:
        pytest.skip("no mpiexec (pip install mpich)")
    return subprocess.run(
        [*PILOT, "submit", "--poll", "0.2", *args], capture_output=True, text=True, timeout=timeout, **kw
    )


def nested_state(sub: Path) -> dict:
    return {
        c["name"]: c for c in json.loads((sub / "inner_ID0000001.000" / "submit.state.json").read_text())["clusters"]
    }


def test_a_sub_workflow_runs_fails_resumes_and_shows_in_the_monitoring_db(tmp_path):
    flag = tmp_path / "fixed"
    outer = workflows(tmp_path, f"test -e {flag} && cat data.txt > out.txt")
    sub = tmp_path / "sub"
    first = submit("--retry", "0", "--site", "local", "--cluster", "whole", str(outer), "--dir", str(sub))
    assert first.returncode == 1, first.stderr
    assert f"{SUB}: sub-workflow: see pilot status inner_ID0000001.000" in first.stderr
    nested = nested_state(sub)
    assert nested["sh_IN1"]["state"] == "failed"
    # The nested workflow is a sub-workflow of the root in the DB, and its failure is the job's.
    assert statistics(sub)["Sub-Workflows"][:4] == ["0", "1", "0", "1"]

    flag.touch()
    second = submit(str(sub))
    assert second.returncode == 0, second.stderr
    assert (tmp_path / "output" / "out.txt").read_text() == "payload\n"  # read from its parent's directory
    nested = nested_state(sub)
    done_before = [n for n, c in nested.items() if n != "sh_IN1" and c["attempts"] == 1 and c["state"] == "done"]
    assert nested["sh_IN1"]["attempts"] == 2 and any(n.startswith("create_dir") for n in done_before)  # resumed
    with sqlite3.connect(sub / "outer-0.stampede.db") as db:
        rows = db.execute("select wf_id, parent_wf_id, root_wf_id, dax_label from workflow order by wf_id").fetchall()
        linked = db.execute("select count(*) from job_instance where subwf_id = 2").fetchone()[0]
    assert [(r[1], r[2], r[3]) for r in rows] == [(None, 1, "outer"), (1, 1, "inner")] and linked >= 1
    stats = statistics(sub)
    assert stats["Sub-Workflows"][:4] == ["1", "0", "0", "1"] and stats["Sub-Workflows"][4] == "1"  # one retry
    assert stats["Tasks"][1:3] == ["0", "0"]


def test_a_killed_driver_finds_its_running_sub_workflow_again(tmp_path):
    """SIGKILL of the root driver while the nested one runs: the restart adopts the nested run, never starts a
    second one, and settles the job when it ends."""
    outer = workflows(tmp_path, "sleep 4; cat data.txt > out.txt")
    sub = tmp_path / "sub"
    proc = subprocess.Popen(
        [
            *PILOT,
            "submit",
            "--poll",
            "0.2",
            "--no-monitord",
            "--site",
            "local",
            "--cluster",
            "whole",
            str(outer),
            "--dir",
            str(sub),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    if mpiexec() is None:
        proc.kill()
        pytest.skip("no mpiexec (pip install mpich)")
    try:
        lock = sub / "inner_ID0000001.000" / "submit.lock"
        wait_for(lambda: lock.exists() and lock.read_text().strip(), 180, "the nested pilot submit to start")
        nested_pid = int(lock.read_text())
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert os.path.exists(f"/proc/{nested_pid}")  # in a session of its own: it outlived its driver
    again = submit("--no-monitord", str(sub))
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "output" / "out.txt").read_text() == "payload\n"
    state = {c["name"]: c for c in json.loads((sub / "submit.state.json").read_text())["clusters"]}
    assert state[SUB]["attempts"] == 1 and state[SUB]["job_ids"] == [f"nested:{SUB}:{nested_pid}"]
    log = (sub / SUB / f"{SUB}.nested.err").read_text()
    assert log.count("STATE Success") <= 1 and nested_state(sub)["sh_IN1"]["attempts"] == 1
