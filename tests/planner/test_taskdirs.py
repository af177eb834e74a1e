"""nonsharedfs and condorio plans: each compute task's declared files in its cluster's ``<dag>.taskfiles``, and
the options that read it on the cluster's pilot run (its batch script, clusters.yml for pilot submit); sharedfs
plans stay as they were (docs/data.md)."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pilot.contracts.clusters import read_clusters
from pilot.contracts.taskfiles import read_taskfiles
from pilot.errors import ConfigError
from pilot.planner.plan import PlanRequest, plan
from pilot.sites import load_site
from tests.planner.data_wf import data_workflow
from tests.planner.wf import api


def pilot_plan(paths: dict, sub: Path, cluster: str = "none") -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pilot",
            "plan",
            paths["workflow"],
            "--conf",
            paths["conf"],
            "--site",
            "local",
            "--dir",
            str(sub),
            "--cluster",
            cluster,
        ],
        capture_output=True,
        text=True,
    )


def dags(sub: Path) -> list[str]:
    """Every cluster's DAG and clusters.yml but its run options, the directory's name taken out."""
    out = [p.read_text().replace(str(sub.parent), "DIR") for p in sorted(sub.rglob("*.dag"))]
    specs = read_clusters(str(sub))
    return out + [str([(c.name, c.kind, c.tasks, c.parents) for c in specs])]


@pytest.mark.parametrize("where", ["properties", "site profile"])
@pytest.mark.parametrize("value", ["nonsharedfs", "condorio", "CondorIO"])
def test_nonsharedfs_and_condorio_plans_run_each_task_in_a_directory_of_its_own(tmp_path, value, where):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    shared = data_workflow(tmp_path / "a", props={"pegasus.data.configuration": "sharedfs"})
    assert pilot_plan(shared, tmp_path / "a" / "s").returncode == 0
    assert not list((tmp_path / "a" / "s").rglob("*.taskfiles"))  # sharedfs: every task in the workflow's directory
    props = {"pegasus.data.configuration": value} if where == "properties" else {}
    paths = data_workflow(tmp_path / "b", props=props)
    if where == "site profile":
        doc = yaml.safe_load(Path(paths["workflow"]).read_text())
        doc["siteCatalog"]["sites"][0]["profiles"] = {"pegasus": {"data.configuration": value}}
        Path(paths["workflow"]).write_text(yaml.safe_dump(doc))
    out = pilot_plan(paths, tmp_path / "b" / "s")
    assert out.returncode == 0 and out.stderr == "", out.stderr  # honoured: no warning
    sub = tmp_path / "b" / "s"
    # The compute tasks' declared files, each in its cluster's list; the data jobs' clusters have none.
    lists = {
        p.parent.name: {name: tuple(map(sorted, files)) for name, files in read_taskfiles(str(p)).items()}
        for p in sub.rglob("*.taskfiles")
    }  # in the order of the workflow's uses, which Pegasus.api writes a set
    assert lists == {
        "cp_j1": {"cp_j1": (["f.a"], ["f.b"], [])},
        "mine_j2": {"mine_j2": (["f.b"], ["f.c", "j2.out"], [])},
    }
    for spec in read_clusters(str(sub)):
        script = Path(spec.script).read_text() if spec.script else ""
        if spec.name in lists:
            assert spec.run_options == ("--task-files", f"{spec.name}.dag.taskfiles")
            assert f"--task-files {spec.name}.dag.taskfiles {spec.name}.dag" in script
        else:
            assert spec.run_options == () and "--task-files" not in script
    # The DAGs themselves are the sharedfs plan's: pegasus-mpi-cluster reads them as before.
    assert dags(sub) == [t.replace(str(tmp_path / "a"), str(tmp_path / "b")) for t in dags(tmp_path / "a" / "s")]


def test_the_sites_local_scratch_is_the_runs_local_scratch_quoted(tmp_path):
    paths = data_workflow(tmp_path, props={"pegasus.data.configuration": "nonsharedfs"})
    doc = yaml.safe_load(Path(paths["workflow"]).read_text())
    local = "/local/my scratch/$SLURM_JOB_ID"  # a variable of the node's environment, read there by pilot run
    doc["siteCatalog"]["sites"][0]["directories"].append(
        {"type": "localScratch", "path": local, "fileServers": [{"url": "file://" + local, "operation": "all"}]}
    )
    Path(paths["workflow"]).write_text(yaml.safe_dump(doc))
    res = pilot_plan(paths, tmp_path / "s", cluster="whole")
    assert res.returncode == 0, res.stderr
    spec = read_clusters(str(tmp_path / "s"))[0]
    assert spec.run_options == ("--task-files", f"{spec.name}.dag.taskfiles", "--local-scratch", local)
    line = next(x for x in Path(spec.script).read_text().splitlines() if " run " in x)
    words = shlex.split(line)
    assert words[words.index("--local-scratch") + 1] == local  # quoted: the shell expands nothing
    # Under whole clustering the data jobs share the cluster: only the compute tasks are listed.
    assert sorted(read_taskfiles(str(Path(spec.dag).with_suffix(".dag.taskfiles")))) == ["cp_j1", "mine_j2"]


def test_a_container_job_and_optional_outputs(tmp_path):
    """A job in a container runs in the workflow's directory, which its runtime mounts; an optional output is
    moved only where the task wrote it."""
    box = api.Container("alp", api.Container.SINGULARITY, image="docker://alpine:3.18", bypass_staging=True)
    tc = (
        api.TransformationCatalog()
        .add_containers(box)
        .add_transformations(
            api.Transformation("echo", site="local", pfn="/bin/echo", is_stageable=False, container=box),
            api.Transformation("cat", site="local", pfn="/bin/cat", is_stageable=False),
        )
    )
    wf = api.Workflow("mixed").add_transformation_catalog(tc)
    wf.add_jobs(
        api.Job("echo", _id="j1").add_args("hi"),
        api.Job("cat", _id="j2")
        .add_outputs(api.File("maybe"), stage_out=False, register_replica=False)
        .add_outputs(api.File("sure"), stage_out=False, register_replica=False),
    )
    wf.write(str(tmp_path / "mixed.yml"))
    doc = yaml.safe_load((tmp_path / "mixed.yml").read_text())
    next(u for u in doc["jobs"][1]["uses"] if u["lfn"] == "maybe")["optional"] = True
    (tmp_path / "mixed.yml").write_text(yaml.safe_dump(doc))
    (tmp_path / "pegasus.properties").write_text("pegasus.data.configuration = condorio\n")
    result = plan(
        PlanRequest(
            workflow=str(tmp_path / "mixed.yml"),
            site=load_site("local", {"container_runtimes": "apptainer"}),
            cluster=["whole"],
            submit_dir=str(tmp_path / "submit"),
            conf=str(tmp_path / "pegasus.properties"),
        )
    )
    lists = read_taskfiles(result.emitted[0].dag + ".taskfiles")
    assert lists == {"cat_j2": ((), ("sure",), ("maybe",))}


def test_a_task_files_list_of_another_shape_is_one_line(tmp_path):
    bad = tmp_path / "x.dag.taskfiles"
    bad.write_text(json.dumps({"format": 1}) + "\n" + json.dumps(["t", ["../etc/passwd"], [], []]) + "\n")
    with pytest.raises(
        ConfigError,
        match=r"x\.dag\.taskfiles:2: task t: the file '\.\./etc/passwd' has an empty, " r"'\.' or '\.\.' part",
    ):
        read_taskfiles(str(bad))
    bad.write_text(json.dumps({"format": 7}) + "\n")
    with pytest.raises(ConfigError, match=r"x\.dag\.taskfiles:1: expected \{\"format\": 1\}"):
        read_taskfiles(str(bad))


def test_a_relative_local_scratch_is_refused_at_plan_time(tmp_path):
    paths = data_workflow(tmp_path, props={"pegasus.data.configuration": "nonsharedfs"})
    doc = yaml.safe_load(Path(paths["workflow"]).read_text())
    doc["siteCatalog"]["sites"][0]["directories"].append({"type": "localScratch", "path": "node/tmp"})
    Path(paths["workflow"]).write_text(yaml.safe_dump(doc))
    res = pilot_plan(paths, tmp_path / "s")
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert "directories[2].path: 'node/tmp' is not an absolute path" in res.stderr  # the catalog's reader says so
