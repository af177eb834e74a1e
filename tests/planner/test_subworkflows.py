"""Sub-workflows (pegasusWorkflow jobs) as pilot plan leaves them for pilot submit, written with the real Pegasus.api."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pilot.contracts.clusters import ClusterKind, read_clusters
from pilot.errors import ConfigError
from pilot.planner.plan import PlanRequest, plan
from pilot.planner.subworkflow import plan_options
from pilot.sites import load_site

api = pytest.importorskip("Pegasus.api")


def catalog() -> api.TransformationCatalog:
    tc = api.TransformationCatalog()
    for name, pfn in (("sh", "/bin/sh"), ("cp", "/bin/cp")):
        tc.add_transformations(api.Transformation(name, site="local", pfn=pfn, is_stageable=False))
    return tc


def inner(tmp: Path) -> Path:
    wf = api.Workflow("inner").add_transformation_catalog(catalog())
    wf.add_jobs(api.Job("sh", _id="IN1").add_args("-c", "'cat data.txt'").add_inputs(api.File("data.txt")))
    path = tmp / "inner.yml"
    wf.write(str(path))
    return path


def outer(tmp: Path, sub: api.SubWorkflow | None = None, generated: bool = False) -> Path:
    """A -> sub-workflow -> B; A writes data.txt, which the sub-workflow reads (and inner.yml when ``generated``)."""
    wf = api.Workflow("outer").add_transformation_catalog(catalog())
    data, iy = api.File("data.txt"), api.File("inner.yml")
    a = api.Job("sh", _id="A").add_args("-c", "'echo payload > data.txt'").add_outputs(data, stage_out=False)
    if generated:
        a.add_outputs(iy, stage_out=False)
    else:
        wf.add_replica_catalog(api.ReplicaCatalog().add_replica("local", "inner.yml", str(inner(tmp))))
    sub = sub or api.SubWorkflow(iy, False)
    sub.add_inputs(data)
    b = api.Job("sh", _id="B").add_args("-c", "'echo after'")
    wf.add_jobs(a, sub, b)
    wf.add_dependency(sub, parents=[a], children=[b])
    path = tmp / "outer.yml"
    wf.write(str(path))
    return path


def run_plan(tmp: Path, workflow: Path, cluster: str = "whole", **kw):
    return plan(
        PlanRequest(
            workflow=str(workflow),
            site=load_site("local"),
            cluster=cluster.split(","),
            submit_dir=str(tmp / "submit"),
            **kw,
        )
    )


@pytest.mark.parametrize("cluster", ["whole", "label", "horizontal", "none"])
def test_a_sub_workflow_job_is_a_cluster_of_its_own_between_its_parents_and_children(tmp_path, cluster):
    result = run_plan(tmp_path, outer(tmp_path), cluster)
    specs = {s.name: s for s in read_clusters(result.submit_dir)}
    sub = specs["subdax_inner_ID0000001"]  # Pegasus' name, which pegasus-monitord follows into the sub-workflow
    assert sub.kind is ClusterKind.SUBWORKFLOW and sub.tasks == 1
    assert sub.subworkflow is not None
    assert sub.subworkflow.workflow == str(tmp_path / "inner.yml")
    assert sub.subworkflow.submit_dir == str(Path(result.submit_dir) / "inner_ID0000001.000")
    args = list(sub.subworkflow.plan_args)
    assert args[args.index("--cluster") + 1] == cluster  # the parent's clustering, passed down
    assert args[args.index("--conf") + 1] == str(Path(result.submit_dir) / "pegasus.properties")
    cache = Path(result.submit_dir) / args[args.index("--cache") + 1]
    entries = yaml.safe_load(cache.read_text())["replicas"]
    assert [e["lfn"] for e in entries] == ["data.txt"]  # what its parent wrote, in the parent's directory
    assert entries[0]["pfns"][0]["pfn"].endswith("/data.txt")
    # No job is clustered with it, and whole clustering splits around it without a cycle.
    a = next(s for s in specs.values() if any(p == sub.name for p in s.parents) and s.kind is not ClusterKind.DATA)
    assert sub.parents and all(specs[p].kind is not ClusterKind.SUBWORKFLOW for p in sub.parents)
    assert a.name != sub.name
    if cluster == "whole":
        assert [s.name for s in specs.values() if s.kind is ClusterKind.WHOLE] == ["merge_outer", "merge_outer_2"]
    # monitord's view: a job of Pegasus' type dax, with no stage-in of the sub-workflow's own inputs.
    submit = Path(result.submit_dir)
    assert "+pegasus_job_class = 10" in (submit / sub.name / f"{sub.name}.sub").read_text()
    static = (submit / "outer-0.static.bp").read_text()
    assert f'job.id="{sub.name}"' in static and 'type_desc="dax"' in static
    staged = " ".join(p.read_text() for p in submit.glob("*/*.in"))
    assert "inner.yml" not in staged


def test_the_sub_workflow_file_may_be_written_by_a_parent_job(tmp_path):
    result = run_plan(tmp_path, outer(tmp_path, generated=True))
    sub = next(s for s in read_clusters(result.submit_dir) if s.subworkflow is not None)
    assert sub.subworkflow.workflow.endswith("/outer/submit/inner.yml")  # in the parent's directory on scratch
    assert not Path(sub.subworkflow.workflow).exists()  # read when the job is ready, after its parent wrote it


def test_the_sub_workflows_own_planner_options_win(tmp_path):
    sub = api.SubWorkflow(api.File("inner.yml"), False).add_planner_args(
        cluster=["label"], verbose=3, force=True, output_sites=["local"], submit=True
    )
    result = run_plan(tmp_path, outer(tmp_path, sub))
    spec = next(s for s in read_clusters(result.submit_dir) if s.subworkflow is not None)
    args = list(spec.subworkflow.plan_args)
    assert args.count("--cluster") == 1 and args[args.index("--cluster") + 1] == "label"
    assert "--force" in args and "-vvv" not in args and "--submit" not in args


def test_planner_options_pilot_cannot_honour_are_refused_naming_them():
    where = ("w.yml", "jobs[1]")
    assert plan_options(
        "s.yml", ["--cluster", "label", "-vvv", "--sites", "local", "--cache=c.yml", "-X-Xmx1g"], *where
    ).options == ("--cluster", "label", "--cache", "c.yml")
    for words in (
        ["--relative-submit-dir", "x"],
        ["-Dpegasus.mode=debug"],
        ["--force-replan"],
        ["--input-dir", "i"],
        ["--basename", "b"],
        ["--staging-site", "a=b"],
        ["--reuse", "r"],
        ["--random"],
        ["--cluster"],
    ):
        with pytest.raises(ConfigError) as exc:
            plan_options("s.yml", words, *where)
        assert str(exc.value).startswith("w.yml: jobs[1].arguments: ") and words[0].split("=")[0] in str(exc.value)


def test_a_sub_workflow_on_another_site_or_written_by_a_job_not_its_parent_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"--sites elsewhere: a sub-workflow runs on its parent's site"):
        run_plan(
            tmp_path,
            outer(tmp_path, api.SubWorkflow(api.File("inner.yml"), False).add_planner_args(sites=["elsewhere"])),
        )
    wf = api.Workflow("w", infer_dependencies=False).add_transformation_catalog(catalog())
    wf.add_jobs(
        api.Job("sh", _id="A").add_outputs(api.File("inner.yml"), stage_out=False),
        api.SubWorkflow(api.File("inner.yml"), False, _id="S"),
    )
    wf.write(str(tmp_path / "w.yml"))
    with pytest.raises(
        ConfigError, match=r"jobs\[1\] \(id S\): its workflow file 'inner.yml' is written by .*not its parent"
    ):
        run_plan(tmp_path, tmp_path / "w.yml")


def test_bad_sub_workflows_are_one_line_before_anything_is_submitted(tmp_path):
    """A sub-workflow file that is nowhere, a planned DAGMan DAG (condorWorkflow), an output of the job itself."""
    cases = {
        "missing": (
            "- type: pegasusWorkflow\n  file: sub.yml\n  id: s1\n  arguments: []\n",
            "jobs[0] (id s1): sub-workflow file 'sub.yml' is not a file here (no replica)",
        ),
        "condor": (
            "- type: condorWorkflow\n  file: sub.dag\n  id: s1\n  arguments: []\n",
            "jobs[0].type: a condorWorkflow job runs a DAG already planned for HTCondor's DAGMan",
        ),
        "output": (
            "- type: pegasusWorkflow\n  file: sub.yml\n  id: s1\n  uses: [{lfn: o, type: output}]\n",
            "jobs[0].uses[0]: 'o' is an output of a sub-workflow job",
        ),
    }
    for name, (job, message) in cases.items():
        (tmp_path / "w.yml").write_text(f"pegasus: 5.0.4\nname: w\njobs:\n{job}")
        res = subprocess.run(
            [
                sys.executable,
                "-m",
                "pilot",
                "submit",
                "--site",
                "local",
                str(tmp_path / "w.yml"),
                "--dir",
                str(tmp_path / name),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
        assert message in res.stderr, res.stderr
        assert not (tmp_path / name / "submit.state.json").exists()
