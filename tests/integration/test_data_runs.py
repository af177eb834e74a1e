"""Workflows that move files, run for real: pilot submit with the real pegasus-transfer, monitord and friends.

The example of tests/planner/data_wf.py (an input from the replica catalog, a stageable executable, an
output staged out and registered, a job's stdout file) in every clustering mode on the local site; a stage-in
that fails and the rerun that follows; data reuse.
"""

from __future__ import annotations

import json
import re
import shlex
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pilot.dag import read_dag
from pilot.submit.monitord import pegasus_cli
from tests.conftest import mpiexec
from tests.planner.data_wf import data_workflow
from tests.planner.wf import api

pytestmark = [pytest.mark.mpi, pytest.mark.monitord]
PILOT = [sys.executable, "-m", "pilot"]
JOB_TYPES = "select exec_job_id, type_desc, task_count from job"  # each job's Pegasus type and tasks


def submit(paths: dict, sub: Path, *extra: str, timeout: float = 300) -> subprocess.CompletedProcess:
    if mpiexec() is None:
        pytest.skip("no mpiexec (pip install mpich)")
    args = [*PILOT, "submit", "--poll", "0.2", *extra]
    if "workflow" in paths:
        args += ["--site", "local", paths["workflow"], "--conf", paths["conf"], "--dir", str(sub)]
    else:
        args.append(str(sub))
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout)


def tool(name: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    cmd = pegasus_cli(name)
    if cmd is None:
        pytest.skip("pegasus-wms is not installed")
    return subprocess.run([*cmd, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def summary(sub: Path) -> dict[str, list[str]]:
    stats = tool("pegasus-statistics", "-s", "all", ".", cwd=sub)
    assert stats.returncode == 0, stats.stderr
    text = (sub / "statistics" / "summary.txt").read_text()
    return {line.split()[0]: line.split()[1:] for line in text.splitlines() if line.startswith(("Tasks", "Jobs"))}


def successes(sub: Path) -> dict[str, int]:
    """JOB_SUCCESS records per task, over every cluster's jobstate.log (every attempt, every run)."""
    out: dict[str, int] = {}
    for log in sub.glob("*/jobstate.log"):
        for line in log.read_text().splitlines():
            fields = line.split()
            if len(fields) > 2 and fields[2] == "JOB_SUCCESS":
                out[fields[1]] = out.get(fields[1], 0) + 1
    return out


@pytest.mark.parametrize("cluster", ["whole", "label", "horizontal"])
def test_the_example_moves_its_files_in_every_clustering_mode(tmp_path, cluster):
    paths = data_workflow(tmp_path)
    sub = tmp_path / "sub"
    res = submit(paths, sub, "--cluster", cluster)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "output" / "f.c").read_text() == "hello\nmine\n"
    assert (tmp_path / "output" / "j2.out").exists()  # the job's stdout file, staged out too
    assert not list((tmp_path / "scratch").rglob("f.*"))  # the workflow's directory was cleaned up
    db = sqlite3.connect(sub / "data-0.replicas.db")
    assert db.execute("select lfn, pfn, site from rc_lfn natural join rc_pfn").fetchall() == [
        ("f.c", f"file://{tmp_path}/output/f.c", "local")
    ]
    db.close()
    # the real monitord's view, as of a Pegasus run: the workflow's 2 jobs are its tasks; the 10 data jobs are
    # jobs of their Pegasus types with no task
    table = summary(sub)
    assert "cannot access properties file" not in (sub / "monitord.out").read_text()
    assert table["Tasks"][:4] == ["2", "0", "0", "2"]
    types = dict(sqlite3.connect(next(sub.glob("*.stampede.db"))).execute("select exec_job_id, type_desc from job"))
    if cluster == "whole":
        assert types == {"merge_data": "compute"}
    else:
        assert types["stage_in_local_local_0_0"] == "stage-in-tx" and types["register_local_1_0"] == "registration"
        assert types["create_dir_data_0_local"] == "create-dir" and types["chmod_j2_0"] == "chmod"
        assert types["cleanup_data_0_local"] == "cleanup" and types["cp_j1"] == "compute"
        assert table["Jobs"][:4] == ["12", "0", "0", "12"]


def two_branches(tmp_path: Path) -> dict:
    """jA reads f.a (present), jB reads f.z (its replica missing); one stage-in and one stage-out job each."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "f.a").write_text("a\n")
    rc = api.ReplicaCatalog().add_replica("local", "f.a", str(tmp_path / "in" / "f.a"))
    rc.add_replica("local", "f.z", str(tmp_path / "in" / "f.z"))
    tc = api.TransformationCatalog().add_transformations(
        api.Transformation("cp", site="local", pfn="/bin/cp", is_stageable=False)
    )
    wf = api.Workflow("branches")
    for name, src in (("jA", "f.a"), ("jB", "f.z")):
        out = api.File(f"{name}.out")
        wf.add_jobs(api.Job("cp", _id=name).add_args(src, out).add_inputs(api.File(src)).add_outputs(out))
    wf.add_replica_catalog(rc).add_transformation_catalog(tc)
    sc = api.SiteCatalog().add_sites(
        api.Site("local").add_directories(
            api.Directory(api.Directory.SHARED_SCRATCH, str(tmp_path / "scratch")),
            api.Directory(api.Directory.LOCAL_STORAGE, str(tmp_path / "output")),
        )
    )
    wf.add_site_catalog(sc)
    wf.write(str(tmp_path / "branches.yml"))
    props = api.Properties()
    props["pegasus.transfer.arguments"] = "-m 1"  # one try: pegasus-transfer waits minutes before a second
    props["pegasus.stagein.clusters"] = "2"  # Pegasus would group both files of the level into one of each
    props["pegasus.stageout.clusters"] = "2"
    props.write(str(tmp_path / "pegasus.properties"))
    return {"workflow": str(tmp_path / "branches.yml"), "conf": str(tmp_path / "pegasus.properties")}


def test_a_failed_stage_in_fails_only_its_jobs_and_a_rerun_repeats_no_finished_transfer(tmp_path):
    paths = two_branches(tmp_path)
    sub = tmp_path / "sub"
    res = submit(paths, sub, "--cluster", "whole", "--retry", "0")
    assert res.returncode == 1, res.stderr
    assert (tmp_path / "output" / "jA.out").read_text() == "a\n"  # the other branch ran to its end
    assert not (tmp_path / "output" / "jB.out").exists()
    done = successes(sub)
    failed = next(n for n in ("stage_in_local_local_0_0", "stage_in_local_local_0_1") if n not in done)
    assert "cp_jA" in done and "cp_jB" not in done and "cleanup_branches_0_local" not in done
    # pegasus-analyzer names the failed transfer and shows the URL it could not read
    analyzer = tool("pegasus-analyzer", ".", cwd=sub)
    assert analyzer.returncode != 0 and failed in analyzer.stdout, analyzer.stdout
    assert f"{tmp_path}/in/f.z" in analyzer.stdout
    status = subprocess.run([*PILOT, "status", str(sub)], capture_output=True, text=True)
    assert status.returncode == 1 and "FAILED" in status.stdout

    (tmp_path / "in" / "f.z").write_text("z\n")  # the missing input appears: run again
    again = submit({}, sub)
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "output" / "jB.out").read_text() == "z\n"
    done = successes(sub)
    assert all(n == 1 for n in done.values()), done  # no finished transfer (or job) ran twice
    assert set(done) == {t.name for t in read_dag(str(sub / "merge_branches" / "merge_branches.dag"))}


def test_a_failed_stage_in_is_a_failed_job_of_its_type_with_no_task_as_in_a_pegasus_run(tmp_path):
    paths = two_branches(tmp_path)
    sub = tmp_path / "sub"
    res = submit(paths, sub, "--cluster", "label", "--retry", "0")
    assert res.returncode == 1, res.stderr
    failed = next(n for n in ("stage_in_local_local_0_0", "stage_in_local_local_0_1") if n not in successes(sub))
    db = sqlite3.connect(next(sub.glob("*.stampede.db")))
    jobs = {name: (kind, count) for name, kind, count in db.execute(JOB_TYPES)}
    assert jobs[failed] == ("stage-in-tx", 0) and jobs["cp_jA"] == ("compute", 1)
    assert jobs["create_dir_branches_0_local"] == ("create-dir", 0)
    assert jobs["register_local_0_0"] == ("registration", 0)
    assert jobs["cleanup_branches_0_local"] == ("cleanup", 0) and jobs["stage_out_local_local_0_0"][0] == "stage-out-tx"
    assert sorted(r[0] for r in db.execute("select abs_task_id from task")) == ["jA", "jB"]
    # the data jobs' invocations name no task: only the workflow's jobs count as tasks
    assert [r[0] for r in db.execute("select distinct abs_task_id from invocation where task_submit_seq > 0")] in (
        [None, "jA"],
        ["jA", None],
    )
    db.close()
    # Type: Succeeded Failed Incomplete Total: jA ran, jB never did (its stage-in failed); 12 jobs, 1 failed
    table = summary(sub)
    assert table["Tasks"][:4] == ["1", "0", "1", "2"] and table["Jobs"][:4] == ["5", "1", "6", "12"]
    # pegasus-analyzer, as for a Pegasus run: the failed job by its name, its invocation by its transformation
    # and no task, and the transfer's stderr
    analyzer = tool("pegasus-analyzer", ".", cwd=sub)
    assert analyzer.returncode != 0, analyzer.stdout
    out = analyzer.stdout
    assert re.search(rf"^=+{failed}=+$", out, re.M) and "last state: POST_SCRIPT_FAILED" in out, out
    assert re.search(r"^-+Task #1 - pegasus::transfer - None - Kickstart stderr-+$", out, re.M), out
    assert f"Expected local file does not exist: {tmp_path}/in/f.z" in out


def test_a_clusters_own_monitoring_shows_its_data_jobs_as_jobs_of_their_types(tmp_path, monkeypatch):
    """The whole cluster run by hand with --monitord-hack, its own static.bp (--cluster-static-bp) read by the
    real pegasus-monitord: each of its data jobs a job of its type with no task, as in a Pegasus run."""
    if mpiexec() is None:
        pytest.skip("no mpiexec (pip install mpich)")
    paths = data_workflow(tmp_path)
    sub = tmp_path / "sub"
    res = subprocess.run(
        [
            *PILOT,
            "plan",
            "--site",
            "local",
            "--cluster",
            "whole",
            "--cluster-static-bp",
            paths["workflow"],
            "--conf",
            paths["conf"],
            "--dir",
            str(sub),
        ],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr
    cdir = sub / "merge_data"
    argv = shlex.split((cdir / "merge_data.sh").read_text().strip().splitlines()[-1])
    argv[-1:-1] = ["--monitord-hack"]
    assert subprocess.run(argv, cwd=cdir, capture_output=True, timeout=300).returncode == 0
    monkeypatch.setenv("HOME", str(tmp_path))
    mon = tool("pegasus-monitord", "-r", "merge_data.dag.dagman.out", cwd=cdir)
    assert mon.returncode == 0, mon.stderr
    assert summary(cdir) == {"Tasks": ["2", "0", "0", "2", "0", "2"], "Jobs": ["12", "0", "0", "12", "0", "12"]}
    with sqlite3.connect(cdir / "merge_data.stampede.db") as db:
        jobs = {name: (kind, count) for name, kind, count in db.execute(JOB_TYPES)}
    assert jobs["cp_j1"] == jobs["mine_j2"] == ("compute", 1) and jobs["chmod_j2_0"] == ("chmod", 0)
    assert jobs["create_dir_data_0_local"] == ("create-dir", 0) and jobs["register_local_1_0"] == ("registration", 0)
    assert jobs["stage_in_local_local_0_0"] == ("stage-in-tx", 0)
    assert jobs["stage_out_local_local_1_0"] == ("stage-out-tx", 0)
    assert jobs["clean_up_local_level_3_0"] == jobs["cleanup_data_0_local"] == ("cleanup", 0)


def test_data_reuse_runs_only_what_is_missing(tmp_path):
    paths = data_workflow(tmp_path)
    old = tmp_path / "old"
    old.mkdir()
    (old / "f.b").write_text("from an earlier run\n")
    doc = yaml.safe_load(Path(paths["workflow"]).read_text())
    doc["replicaCatalog"]["replicas"].append({"lfn": "f.b", "pfns": [{"site": "local", "pfn": str(old / "f.b")}]})
    Path(paths["workflow"]).write_text(yaml.safe_dump(doc))
    sub = tmp_path / "sub"
    res = submit(paths, sub, "--cluster", "whole")
    assert res.returncode == 0, res.stderr
    assert "1 job left out: their outputs are in the replica catalog" in res.stdout
    assert (tmp_path / "output" / "f.c").read_text() == "from an earlier run\nmine\n"
    assert "cp_j1" not in successes(sub)
    moved = [e for f in (sub / "merge_data").glob("stage_in_*.in") for e in json.loads(f.read_text())]
    # j2, a root now, reads the earlier run's copy; nothing reads f.a any more
    assert [e["src_urls"][0]["url"] for e in moved if e["lfn"] == "f.b"] == [f"file://{old}/f.b"]
    assert "f.a" not in [e["lfn"] for e in moved]


@pytest.mark.slurm
@pytest.mark.parametrize("cluster", ["whole", "label"])
def test_the_example_moves_its_files_through_the_real_slurm(tmp_path, cluster):
    """Every batch job through Slurm's sbatch; the data jobs run on the compute node, on the shared file system."""
    from tests.integration.slurm import require_slurm

    require_slurm()
    paths = data_workflow(tmp_path)
    sub = tmp_path / "sub"
    res = subprocess.run(
        [
            *PILOT,
            "submit",
            "--site",
            "container",
            "--set",
            "pegasus_site=local",
            "--set",
            f"pilot_command={sys.executable} -m pilot",
            "--cluster",
            cluster,
            "--poll",
            "0.3",
            paths["workflow"],
            "--conf",
            paths["conf"],
            "--dir",
            str(sub),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "output" / "f.c").read_text() == "hello\nmine\n" and (tmp_path / "output" / "j2.out").exists()
    state = json.loads((sub / "submit.state.json").read_text())["clusters"]
    assert all(c["state"] == "done" for c in state) and len(state) == (1 if cluster == "whole" else 12)
    assert summary(sub)["Tasks"][:4] == ["2", "0", "0", "2"]  # the workflow's own jobs: data jobs have no task row
