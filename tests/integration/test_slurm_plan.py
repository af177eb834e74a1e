"""pilot plan end to end under real Slurm: scripts submitted by hand with sbatch."""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pilot.dag import read_dag
from pilot.dag.model import NO_DAX_ID
from tests.integration.slurm import require_slurm, sbatch, wait_gone
from tests.integration.test_monitord import pegasus_cli

pytestmark = pytest.mark.slurm
api = pytest.importorskip("Pegasus.api")

PILOT = f"pilot_command={sys.executable} -m pilot"


def diamond(tmp_path: Path, labels: dict[str, str] | None = None) -> str:
    """The diamond with echo for every program: its input comes from the replica catalog, its outputs (which
    echo never writes) are neither staged out nor registered."""
    wf = api.Workflow("diamond", infer_dependencies=True)
    files = {n: api.File(n) for n in ("f.a", "f.b1", "f.b2", "f.c1", "f.c2", "f.d")}
    (tmp_path / "f.a").write_text("a\n")
    wf.add_replica_catalog(api.ReplicaCatalog().add_replica("local", "f.a", str(tmp_path / "f.a")))
    tc = api.TransformationCatalog()
    for n in ("preprocess", "findrange", "analyze"):
        tc.add_transformations(api.Transformation(n, site="container", pfn="/bin/echo", is_stageable=False))
    wf.add_transformation_catalog(tc)
    kept = {"stage_out": False, "register_replica": False}
    jobs = [
        api.Job("preprocess", _id="pre")
        .add_args("pre", files["f.a"])
        .add_inputs(files["f.a"])
        .add_outputs(files["f.b1"], files["f.b2"], **kept),
        api.Job("findrange", _id="left").add_args("left").add_inputs(files["f.b1"]).add_outputs(files["f.c1"], **kept),
        api.Job("findrange", _id="right")
        .add_args("right")
        .add_inputs(files["f.b2"])
        .add_outputs(files["f.c2"], **kept),
        api.Job("analyze", _id="ana")
        .add_args("ana")
        .add_inputs(files["f.c1"], files["f.c2"])
        .add_outputs(files["f.d"], **kept),
    ]
    for j in jobs:
        if labels and j._id in labels:
            j.add_profiles(api.Namespace.PEGASUS, key="label", value=labels[j._id])
        wf.add_jobs(j)
    path = tmp_path / "diamond.yml"
    wf.write(str(path))
    return str(path)


def plan(tmp_path: Path, workflow: str, cluster: str, *sets: str) -> Path:
    sub = tmp_path / "submit"
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "pilot",
            "plan",
            workflow,
            "--site",
            "container",
            "--cluster",
            cluster,
            "--dir",
            str(sub),
            "--set",
            PILOT,
            *(x for kv in sets for x in ("--set", kv)),
        ],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr
    return sub


@pytest.mark.monitord
def test_whole_workflow_by_hand_then_monitord(tmp_path, monkeypatch):
    """A cluster's batch script run by hand is monitored as a workflow of its own with --monitord-hack."""
    require_slurm()
    sub = plan(tmp_path, diamond(tmp_path), "whole", "pilot_options=--monitord-hack")
    cdir = sub / "merge_diamond"
    job = sbatch(str(cdir / "merge_diamond.slurm"), cwd=str(tmp_path))  # sbatch from elsewhere: --chdir applies
    wait_gone([job])
    out = (cdir / "merge_diamond.batch.out").read_text()
    dag = read_dag(str(cdir / "merge_diamond.dag"))
    names = [t.name for t in dag]  # the 4 jobs and their data jobs
    own = sum(t.dax_id != NO_DAX_ID for t in dag)  # the 4 jobs: a data job is a job with no task, as in Pegasus
    assert {"stage_in_remote_container_0_0", "preprocess_pre", "analyze_ana"} < set(names)
    n = len(names)
    assert f'[cluster-summary stat="ok", tasks={n}, submitted={n}, succeeded={n}' in out, (
        cdir / "merge_diamond.batch.err"
    ).read_text()
    assert sorted((cdir / "merge_diamond.dag.rescue").read_text().split()) == sorted(
        x for name in names for x in ("DONE", name)
    )
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    mon = subprocess.run(
        [*pegasus_cli("pegasus-monitord"), "-r", "merge_diamond.dag.dagman.out"],
        cwd=cdir,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert mon.returncode == 0, mon.stderr
    db = sqlite3.connect(cdir / "merge_diamond.stampede.db")
    rows = db.execute(
        "select j.exec_job_id, ji.exitcode from job_instance ji join job j on j.job_id = ji.job_id"
    ).fetchall()
    db.close()
    assert sorted(rows) == sorted((t, 0) for t in names)
    stats = subprocess.run(
        [*pegasus_cli("pegasus-statistics"), "-s", "all", "."], cwd=cdir, capture_output=True, text=True
    )
    assert stats.returncode == 0, stats.stderr
    summary = (cdir / "statistics" / "summary.txt").read_text()
    jobs = next(line.split() for line in summary.splitlines() if line.startswith("Jobs"))
    tasks = next(line.split() for line in summary.splitlines() if line.startswith("Tasks"))
    assert jobs[1:5] == [str(n), "0", "0", str(n)] and tasks[1:5] == ["4", "0", "0", "4"] and own == 4


def test_label_clusters_run_in_dependency_order(tmp_path):
    require_slurm()
    sub = plan(tmp_path, diamond(tmp_path, {"pre": "top", "left": "mid", "right": "mid"}), "label")
    clusters = yaml.safe_load((sub / "clusters.yml").read_text())["clusters"]
    # a label with one job stays that job, as a chunk of one does in horizontal clustering
    parents = {c["name"]: c["parents"] for c in clusters}
    assert parents["preprocess_pre"] == ["stage_in_remote_container_0_0"] and parents["merge_mid"] == ["preprocess_pre"]
    assert parents["analyze_ana"] == ["merge_mid"] and parents["stage_in_remote_container_0_0"] == [
        "create_dir_diamond_0_container"
    ]
    ids: dict[str, str] = {}
    for c in clusters:  # listed parents first
        deps = [ids[p] for p in c["parents"]]
        extra = [f"--dependency=afterok:{':'.join(deps)}"] if deps else []
        ids[c["name"]] = sbatch(str(sub / c["script"]), *extra)
    wait_gone(list(ids.values()))
    spans = {}
    for c in clusters:
        out = (sub / c["dir"] / f"{c['name']}.batch.out").read_text()
        assert 'stat="ok"' in out, out
        starts = [
            float(x)
            for x in re.findall(r"^(\d+\.\d+) \S+ EXECUTE", (sub / c["dir"] / "jobstate.log").read_text(), re.M)
        ]
        ends = [
            float(x)
            for x in re.findall(r"^(\d+\.\d+) \S+ JOB_TERMINATED", (sub / c["dir"] / "jobstate.log").read_text(), re.M)
        ]
        spans[c["name"]] = (min(starts), max(ends))
    assert spans["preprocess_pre"][1] <= spans["merge_mid"][0] and spans["merge_mid"][1] <= spans["analyze_ana"][0]
