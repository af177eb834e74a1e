"""What a Pegasus workflow says reaches the task, run for real: env profiles of every layer, argument words,
resource requests; written with the real Pegasus.api and run by pilot submit (and pilot run) under real MPI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import mpiexec
from tests.mpi.helpers import run_pilot
from tests.planner.wf import api, write_properties

pytestmark = pytest.mark.mpi
PILOT = [sys.executable, "-m", "pilot"]


def local_site(tmp_path: Path, site=None):
    """Site catalog: ``local`` with shared scratch and local storage under ``tmp_path``."""
    return api.SiteCatalog().add_sites(
        (site or api.Site("local")).add_directories(
            api.Directory(api.Directory.SHARED_SCRATCH, str(tmp_path / "scratch")).add_file_servers(
                api.FileServer(f"file://{tmp_path / 'scratch'}", api.Operation.ALL)
            ),
            api.Directory(api.Directory.LOCAL_STORAGE, str(tmp_path / "output")).add_file_servers(
                api.FileServer(f"file://{tmp_path / 'output'}", api.Operation.ALL)
            ),
        )
    )


def env_workflow(tmp_path: Path) -> dict[str, str]:
    """Two jobs running /usr/bin/env into their stdout files; env profiles on every layer Pegasus has."""
    tc = api.TransformationCatalog().add_transformations(
        api.Transformation("env", site="local", pfn="/usr/bin/env", is_stageable=False).add_env(T_ONLY="t", LAYER2="tx")
    )
    sc = local_site(tmp_path, api.Site("local").add_env(S_ONLY="s"))
    wf = api.Workflow("envs").add_env(LAYER="wf", W_ONLY="w two words")
    j1 = api.Job("env", _id="j1").add_env(LAYER="job", J_ONLY="j", LAYER2="job").set_stdout(api.File("j1.env"))
    j2 = api.Job("env", _id="j2").set_stdout(api.File("j2.env"))
    wf.add_jobs(j1, j2).add_transformation_catalog(tc).add_site_catalog(sc)
    wf.write(str(tmp_path / "envs.yml"))
    conf = write_properties(tmp_path / "pegasus.properties", {"env.P_ONLY": "p", "env.LAYER": "props"})
    return {"workflow": str(tmp_path / "envs.yml"), "conf": conf}


def variables(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


@pytest.mark.parametrize("cluster", ["whole", "label", "horizontal"])
def test_env_profiles_of_every_layer_reach_the_task_in_every_clustering_mode(tmp_path, cluster):
    """Pegasus' order, lowest first: properties, the workflow, the job, the site, the transformation."""
    if mpiexec() is None:
        pytest.skip("no mpiexec (pip install mpich)")
    paths = env_workflow(tmp_path)
    res = subprocess.run(
        [
            *PILOT,
            "submit",
            "--poll",
            "0.2",
            "--no-monitord",
            "--site",
            "local",
            "--cluster",
            cluster,
            paths["workflow"],
            "--conf",
            paths["conf"],
            "--dir",
            str(tmp_path / "sub"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    j1, j2 = variables(tmp_path / "output" / "j1.env"), variables(tmp_path / "output" / "j2.env")
    want = {"P_ONLY": "p", "W_ONLY": "w two words", "S_ONLY": "s", "T_ONLY": "t", "LAYER2": "tx"}
    assert {k: j1.get(k) for k in [*want, "LAYER", "J_ONLY"]} == {**want, "LAYER": "job", "J_ONLY": "j"}
    assert {k: j2.get(k) for k in [*want, "LAYER", "J_ONLY"]} == {**want, "LAYER": "wf", "J_ONLY": None}
    assert j1["PMC_TASK"].endswith("j1") and "PATH" in j1  # the pilot's own variables and environment stay


def test_a_dag_with_env_lines_runs_under_pilot_run_alone(dagfile, tmp_path):
    """The DAG carries the environment: '#pilot env' lines, which PMC's grammar reads as comments."""
    show = tmp_path / "show.sh"
    show.write_text('#!/bin/sh\necho "$A|$B" > "$1"\n')
    show.chmod(0o755)
    out = tmp_path / "out"
    dag = dagfile(
        f"#pilot env A=1 'B=two words'\nTASK a {show} {out}.a\nTASK b {show} {out}.b\n#pilot env\n"
        f"TASK c {show} {out}.c\n"
    )
    res = run_pilot(["-s", dag], n=2)
    assert res.returncode == 0, res.stderr
    assert [Path(f"{out}.{t}").read_text() for t in "abc"] == ["1|two words\n", "1|two words\n", "|\n"]


@pytest.mark.monitord
def test_workflow_and_job_metadata_reach_the_monitoring_db(tmp_path):
    """As pegasus-monitord records a Pegasus run's: workflow_meta and task_meta rows."""
    import sqlite3

    if mpiexec() is None:
        pytest.skip("no mpiexec (pip install mpich)")
    tc = api.TransformationCatalog().add_transformations(
        api.Transformation("true", site="local", pfn="/bin/true", is_stageable=False)
    )
    wf = api.Workflow("meta").add_metadata(campaign="c7", owner="lab")
    wf.add_jobs(api.Job("true", _id="j1").add_metadata(sample="s-01", **{"time": "5"}), api.Job("true", _id="j2"))
    wf.add_transformation_catalog(tc).write(str(tmp_path / "meta.yml"))
    sub = tmp_path / "sub"
    res = subprocess.run(
        [
            *PILOT,
            "submit",
            "--poll",
            "0.2",
            "--site",
            "local",
            "--cluster",
            "whole",
            str(tmp_path / "meta.yml"),
            "--dir",
            str(sub),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    db = sqlite3.connect(next(sub.glob("*.stampede.db")))
    try:
        assert sorted(db.execute("select key, value from workflow_meta").fetchall()) == [
            ("campaign", "c7"),
            ("owner", "lab"),
        ]
        rows = db.execute(
            "select t.abs_task_id, m.key, m.value from task_meta m join task t on t.task_id = m.task_id"
        ).fetchall()
    finally:
        db.close()
    assert sorted(rows) == [("j1", "sample", "s-01"), ("j1", "time", "5")]


@pytest.mark.monitord
def test_shell_hooks_of_the_workflow_and_of_a_job_are_run_by_pegasus_monitord(tmp_path):
    """As for a Pegasus run: pilot writes the notifications file, pegasus-monitord runs the commands."""
    if mpiexec() is None:
        pytest.skip("no mpiexec (pip install mpich)")
    tc = api.TransformationCatalog().add_transformations(
        api.Transformation("true", site="local", pfn="/bin/true", is_stageable=False),
        api.Transformation("false", site="local", pfn="/bin/false", is_stageable=False),
    )
    wf = api.Workflow("hooks").add_shell_hook(api.EventType.END, f"/usr/bin/touch {tmp_path / 'wf-ended'}")
    ok = api.Job("true", _id="ok").add_shell_hook(api.EventType.SUCCESS, f"/usr/bin/touch {tmp_path / 'ok-succeeded'}")
    bad = api.Job("false", _id="bad").add_shell_hook(api.EventType.ERROR, f"/usr/bin/touch {tmp_path / 'bad-failed'}")
    bad.add_shell_hook(api.EventType.SUCCESS, f"/usr/bin/touch {tmp_path / 'bad-succeeded'}")
    wf.add_jobs(ok, bad).add_transformation_catalog(tc).write(str(tmp_path / "hooks.yml"))
    res = subprocess.run(
        [
            *PILOT,
            "submit",
            "--poll",
            "0.2",
            "--site",
            "local",
            "--cluster",
            "none",
            "--retry",
            "0",
            str(tmp_path / "hooks.yml"),
            "--dir",
            str(tmp_path / "sub"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 1, res.stderr  # bad fails
    assert (
        (tmp_path / "wf-ended").exists() and (tmp_path / "ok-succeeded").exists() and (tmp_path / "bad-failed").exists()
    )
    assert not (tmp_path / "bad-succeeded").exists()


def test_a_hook_on_a_job_clustered_with_others_is_refused_in_one_line(tmp_path):
    tc = api.TransformationCatalog().add_transformations(
        api.Transformation("true", site="local", pfn="/bin/true", is_stageable=False)
    )
    wf = api.Workflow("hooks")
    wf.add_jobs(api.Job("true", _id="a").add_shell_hook(api.EventType.END, "/bin/true"), api.Job("true", _id="b"))
    wf.add_transformation_catalog(tc).write(str(tmp_path / "hooks.yml"))
    res = subprocess.run(
        [
            *PILOT,
            "plan",
            "--site",
            "local",
            "--cluster",
            "whole",
            str(tmp_path / "hooks.yml"),
            "--dir",
            str(tmp_path / "sub"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert (
        "jobs[0] (id a): shell hooks of a job clustered with" in res.stderr
        and len(res.stderr.strip().splitlines()) == 1
    )


def test_stdin_of_a_job_is_its_staged_input(tmp_path):
    """set_stdin: the file is staged in from the replica catalog and read by the task as its stdin; set_stdout
    writes the task's stdout to a file that is staged out like any output."""
    if mpiexec() is None:
        pytest.skip("no mpiexec (pip install mpich)")
    (tmp_path / "in.txt").write_text("from stdin\n")
    rc = api.ReplicaCatalog().add_replica("local", "in.txt", str(tmp_path / "in.txt"))
    tc = api.TransformationCatalog().add_transformations(
        api.Transformation("cat", site="local", pfn="/bin/cat", is_stageable=False)
    )
    sc = local_site(tmp_path)
    job = api.Job("cat", _id="c").set_stdin(api.File("in.txt")).set_stdout(api.File("out.txt"), register_replica=False)
    wf = api.Workflow("stdin").add_jobs(job).add_replica_catalog(rc).add_transformation_catalog(tc).add_site_catalog(sc)
    wf.write(str(tmp_path / "stdin.yml"))
    res = subprocess.run(
        [
            *PILOT,
            "submit",
            "--poll",
            "0.2",
            "--no-monitord",
            "--site",
            "local",
            str(tmp_path / "stdin.yml"),
            "--dir",
            str(tmp_path / "sub"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "output" / "out.txt").read_text() == "from stdin\n"


def test_a_checkpoint_file_is_there_for_the_retry_and_staged_out_at_the_end(tmp_path):
    """add_checkpoint: the job's directory is the workflow's on shared scratch, so the retry finds what the
    failed attempt wrote, as Pegasus restores it; once the job succeeds the file is staged out."""
    if mpiexec() is None:
        pytest.skip("no mpiexec (pip install mpich)")
    tc = api.TransformationCatalog().add_transformations(
        api.Transformation("sh", site="local", pfn="/bin/sh", is_stageable=False)
    )
    sc = local_site(tmp_path)
    body = "'if test -f ck; then echo resumed >> ck; else echo step1 > ck; exit 1; fi'"
    job = api.Job("sh", _id="long").add_args("-c", body).add_checkpoint(api.File("ck"))
    wf = api.Workflow("ckpt").add_jobs(job).add_transformation_catalog(tc).add_site_catalog(sc)
    wf.write(str(tmp_path / "ckpt.yml"))
    res = subprocess.run(
        [
            *PILOT,
            "submit",
            "--poll",
            "0.2",
            "--no-monitord",
            "--site",
            "local",
            "--retry",
            "1",
            str(tmp_path / "ckpt.yml"),
            "--dir",
            str(tmp_path / "sub"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "output" / "ck").read_text() == "step1\nresumed\n"


@pytest.mark.monitord
def test_a_wrong_copy_fails_its_stage_in_and_file_metadata_reaches_the_monitoring_db(tmp_path):
    """A replica whose content is not its checksum fails the stage-in job that brought it (the job reading it never
    starts); fixed and rerun, the workflow runs, and pegasus-monitord records the files' metadata (rc_meta) and
    their map to the task (workflow_files), as for a Pegasus run."""
    import hashlib
    import sqlite3

    if mpiexec() is None:
        pytest.skip("no mpiexec (pip install mpich)")
    source = tmp_path / "f.in"
    source.write_text("tampered\n")
    rc = api.ReplicaCatalog().add_replica(
        "local",
        "f.in",
        str(source),
        metadata={"origin": "lab"},
        checksum={"sha256": hashlib.sha256(b"payload\n").hexdigest()},
    )
    tc = api.TransformationCatalog().add_transformations(
        api.Transformation("cat", site="local", pfn="/bin/cat", is_stageable=False)
    )
    fin, fout = api.File("f.in"), api.File("f.out").add_metadata(kind="result")
    job = api.Job("cat", _id="j").add_args(fin).add_inputs(fin).set_stdout(fout)
    wf = api.Workflow("sums").add_jobs(job).add_replica_catalog(rc).add_transformation_catalog(tc)
    wf.add_site_catalog(local_site(tmp_path)).write(str(tmp_path / "sums.yml"))
    sub = tmp_path / "sub"
    submit = [*PILOT, "submit", "--poll", "0.2", "--site", "local", "--cluster", "whole", "--retry", "0"]
    res = subprocess.run(
        [*submit, str(tmp_path / "sums.yml"), "--dir", str(sub)], capture_output=True, text=True, timeout=300
    )
    assert res.returncode == 1, res.stderr
    assert not (tmp_path / "output" / "f.out").exists()
    said = [
        line
        for p in sub.rglob("*")
        if p.is_file() and p.suffix not in (".db",)
        for line in p.read_text(errors="replace").splitlines()
        if "integrity check failed" in line
    ]
    assert said and "the catalog says" in said[0]
    source.write_text("payload\n")
    res = subprocess.run([*submit, str(sub)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "output" / "f.out").read_text() == "payload\n"
    db = sqlite3.connect(next(sub.glob("*.stampede.db")))
    try:
        meta = db.execute("select l.lfn, m.key, m.value from rc_meta m join rc_lfn l on l.lfn_id = m.lfn_id").fetchall()
        mapped = db.execute(
            "select l.lfn, t.abs_task_id from workflow_files f join rc_lfn l on l.lfn_id = f.lfn_id "
            "join task t on t.task_id = f.task_id"
        ).fetchall()
    finally:
        db.close()
    assert ("f.out", "kind", "result") in meta and ("f.in", "origin", "lab") in meta
    assert ("f.in", "checksum.value", hashlib.sha256(b"payload\n").hexdigest()) in meta
    assert sorted(mapped) == [("f.in", "j"), ("f.out", "j")]
