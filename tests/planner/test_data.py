"""The data half of a Pegasus plan (sharedfs): catalogs, data jobs, their grouping and names, reuse, errors."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pilot.dag import read_dag
from pilot.errors import ConfigError
from pilot.planner.plan import PlanRequest, plan
from pilot.sites import load_site
from tests.planner.data_wf import data_workflow
from tests.planner.wf import api, transformations, write


def run_plan(tmp_path: Path, paths: dict, cluster: str = "whole", **kw):
    req = PlanRequest(
        workflow=paths["workflow"],
        site=load_site(kw.pop("site", "local")),
        cluster=cluster.split(","),
        submit_dir=str(tmp_path / kw.pop("dir", "submit")),
        conf=paths.get("conf"),
        replicas=paths.get("replicas"),
        **kw,
    )
    return plan(req)


def entries(submit: Path, cluster: str, job: str) -> list[dict]:
    return json.loads((submit / cluster / f"{job}.in").read_text())


def test_whole_plan_has_pegasus_data_jobs_in_order(tmp_path):
    res = run_plan(tmp_path, data_workflow(tmp_path))
    dag = read_dag(res.emitted[0].dag)
    names = [t.name for t in dag]
    assert names == [
        "create_dir_data_0_local",
        "stage_in_local_local_0_0",
        "cp_j1",
        "stage_in_local_local_1_0",
        "chmod_j2_0",
        "mine_j2",
        "stage_out_local_local_1_0",
        "register_local_1_0",
        "clean_up_local_level_3_0",
        "clean_up_local_level_4_0",
        "clean_up_local_level_5_0",
        "cleanup_data_0_local",
    ]
    workdir = f"{tmp_path}/scratch/{os.environ.get('USER') or __import__('getpass').getuser()}/pegasus/data/submit"
    # compute jobs run in the workflow's directory on the shared scratch; data jobs in the pilot's own
    assert {t.name: t.cwd for t in dag}["cp_j1"] == workdir and dag["create_dir_data_0_local"].cwd is None
    assert dag["mine_j2"].argv[0] == f"{workdir}/mine" and dag["mine_j2"].stdio == ("", "j2.out", "")
    assert dag["chmod_j2_0"].argv == ["/bin/chmod", "+x", f"{workdir}/mine"]
    assert [c.name for c in dag["stage_in_local_local_0_0"].children] == ["cp_j1"]
    assert {p.name for p in dag["mine_j2"].parents} == {"cp_j1", "chmod_j2_0"}
    assert [c.name for c in dag["stage_out_local_local_1_0"].children] == [
        "register_local_1_0",
        "clean_up_local_level_5_0",
    ]
    submit = tmp_path / "submit"
    (mkdir,) = entries(submit, "merge_data", "create_dir_data_0_local")
    assert mkdir == {"id": 1, "type": "mkdir", "target": {"site_label": "local", "url": f"file://{workdir}"}}
    (fa,) = entries(submit, "merge_data", "stage_in_local_local_0_0")
    assert fa["linkage"] == "input" and fa["lfn"] == "f.a"
    assert fa["src_urls"] == [{"site_label": "local", "url": f"file://{tmp_path}/input/f.a", "priority": 1}]
    assert fa["dest_urls"] == [{"site_label": "local", "url": f"file://{workdir}/f.a"}]
    out = entries(submit, "merge_data", "stage_out_local_local_1_0")
    assert sorted((e["lfn"], e["dest_urls"][0]["url"]) for e in out) == [
        ("f.c", f"file://{tmp_path}/output/f.c"),
        ("j2.out", f"file://{tmp_path}/output/j2.out"),
    ]
    # registered: f.c only (j2.out says register_replica=False), at the output site's URL
    assert (
        submit / "merge_data" / "register_local_1_0.in"
    ).read_text() == f'f.c file://{tmp_path}/output/f.c site="local"\n'
    assert dag["register_local_1_0"].argv[-4:] == [
        "--db",
        str(submit / "data-0.replicas.db"),
        "--insert",
        str(submit / "merge_data" / "register_local_1_0.in"),
    ]
    leaf = entries(submit, "merge_data", "cleanup_data_0_local")
    assert leaf == [
        {"id": 1, "type": "remove", "target": {"site_label": "local", "url": f"file://{workdir}", "recursive": "True"}}
    ]
    # every data job runs pegasus-transfer on its input file, with Pegasus' --threads 2 and the transfer arguments
    transfer = dag["stage_in_local_local_0_0"].argv
    assert transfer[-6:] == [
        "--threads",
        "2",
        "-m",
        "1",
        "-f",
        str(submit / "merge_data" / "stage_in_local_local_0_0.in"),
    ]
    assert transfer[1].endswith("Pegasus/cli/pegasus-transfer.py")


def assert_tasks_are_the_workflows_jobs(bp: str) -> None:
    """As Pegasus writes a plan's static.bp: tasks, task edges and the task map of the workflow's jobs only; each
    data job a job with task_count 0."""
    assert re.findall(r'event=task.info xwf.id=\S+ task.id="(\w+)"', bp) == ["j1", "j2"]
    assert re.findall(r'event=task.edge xwf.id=\S+ parent.task.id="(\w+)" child.task.id="(\w+)"', bp) == [("j1", "j2")]
    assert re.findall(r'event=wf.map.task_job xwf.id=\S+ job.id="\w+" task.id="(\w+)"', bp) == ["j1", "j2"]
    counts = dict(re.findall(r'event=job.info xwf.id=\S+ job.id="(\w+)" .* task_count="(\d+)"', bp))
    assert counts.pop("merge_data", None) in (None, "2") and counts.get("stage_in_local_local_0_0", "0") == "0"
    assert {k: v for k, v in counts.items() if v != "0"} in ({"cp_j1": "1", "mine_j2": "1"}, {})


def test_whole_clustering_leaves_the_data_jobs_out_of_the_root_tasks(tmp_path):
    run_plan(tmp_path, data_workflow(tmp_path), "whole")
    assert_tasks_are_the_workflows_jobs((tmp_path / "submit" / "data-0.static.bp").read_text())


def test_label_clustering_makes_each_data_job_a_batch_job_of_its_own(tmp_path):
    res = run_plan(tmp_path, data_workflow(tmp_path), "label")
    data = yaml.safe_load((tmp_path / "submit" / "clusters.yml").read_text())
    kinds = {c["name"]: c["kind"] for c in data["clusters"]}
    assert kinds["create_dir_data_0_local"] == kinds["stage_out_local_local_1_0"] == "data"
    assert kinds["cp_j1"] == kinds["mine_j2"] == "single"
    parents = {c["name"]: c["parents"] for c in data["clusters"]}
    assert parents["cp_j1"] == ["stage_in_local_local_0_0"] and parents["stage_in_local_local_0_0"] == [
        "create_dir_data_0_local"
    ]
    assert data["clusters"][0]["name"] == "create_dir_data_0_local"  # parents first
    assert len(res.emitted) == 12
    # the root static.bp: each data job a job of its Pegasus type, which pegasus-statistics counts jobs by
    bp = (tmp_path / "submit" / "data-0.static.bp").read_text()
    assert re.search(
        r'event=job.info xwf.id=\S+ job.id="stage_in_local_local_0_0" \S+ type="2" type_desc="stage-in-tx"', bp
    )
    assert re.search(r'event=job.info xwf.id=\S+ job.id="register_local_1_0" \S+ type="4" type_desc="registration"', bp)
    assert re.search(r'event=job.info xwf.id=\S+ job.id="cp_j1" \S+ type="1" type_desc="compute"', bp)
    assert_tasks_are_the_workflows_jobs(bp)
    sub = (tmp_path / "submit" / "create_dir_data_0_local" / "create_dir_data_0_local.sub").read_text()
    assert '+pegasus_wf_xformation = "pegasus::dirmanager"' in sub and "+pegasus_job_class = 6" in sub


def test_every_job_of_every_cluster_runs_in_the_one_workflow_directory(tmp_path):
    run_plan(tmp_path, data_workflow(tmp_path), "label")
    cwds = set()
    for name in ("cp_j1", "mine_j2"):
        cwds |= {t.cwd for t in read_dag(str(tmp_path / "submit" / name / f"{name}.dag"))}
    assert len(cwds) == 1 and next(iter(cwds)).startswith(f"{tmp_path}/scratch/")


def test_transfers_are_grouped_ten_jobs_to_a_transfer_job_per_level(tmp_path):
    """25 jobs on a level, each with an input from the catalog and an output: ceil(25/10) = 3 stage-in and
    3 stage-out jobs, files dealt round-robin; an input two jobs read is moved once."""
    wf = api.Workflow("many")
    rc = api.ReplicaCatalog()
    shared = api.File("shared.txt")
    rc.add_replica("local", "shared.txt", "/data/shared.txt")
    for i in range(25):
        f_in, f_out = api.File(f"in{i}"), api.File(f"out{i}")
        rc.add_replica("local", f"in{i}", f"/data/in{i}")
        job = api.Job("T", _id=f"j{i}").add_inputs(f_in).add_outputs(f_out)
        if i < 2:
            job.add_inputs(shared)
        wf.add_jobs(job)
    wf.add_replica_catalog(rc)
    paths = write(tmp_path, wf, transformations("local", {"T": "/bin/true"}))
    res = run_plan(tmp_path, paths, tc=paths["tc"])
    dag = read_dag(res.emitted[0].dag)
    stage_in = [t.name for t in dag if t.name.startswith("stage_in_")]
    stage_out = [t.name for t in dag if t.name.startswith("stage_out_")]
    assert stage_in == [f"stage_in_local_local_0_{n}" for n in range(3)]
    assert stage_out == [f"stage_out_local_local_0_{n}" for n in range(3)]
    moved = [
        e["lfn"] for n in range(3) for e in entries(tmp_path / "submit", "merge_many", f"stage_in_local_local_0_{n}")
    ]
    assert sorted(moved) == sorted([f"in{i}" for i in range(25)] + ["shared.txt"])  # shared.txt once
    assert [len(entries(tmp_path / "submit", "merge_many", f"stage_in_local_local_0_{n}")) for n in range(3)] == [
        9,
        9,
        8,
    ]
    # shared.txt moved once, by a job both of its readers wait for
    (both,) = {p.name for p in dag["T_j0"].parents} & {p.name for p in dag["T_j1"].parents}
    assert "shared.txt" in [e["lfn"] for e in entries(tmp_path / "submit", "merge_many", both)]
    cleanup = [t.name for t in dag if t.name.startswith("clean_up_")]
    # levels from 1 with the data jobs: the 25 jobs (level 3) remove their inputs, ceil(25/5) cleanup jobs;
    # the 3 stage-out jobs (level 4) remove the outputs, one cleanup job
    assert cleanup == [f"clean_up_local_level_3_{n}" for n in range(5)] + ["clean_up_local_level_4_0"]


def test_properties_set_the_number_of_transfer_jobs_and_symlinks(tmp_path):
    paths = data_workflow(tmp_path, props={"pegasus.stagein.clusters": "1", "pegasus.transfer.links": "true"})
    res = run_plan(tmp_path, paths)
    dag = read_dag(res.emitted[0].dag)
    assert [t.name for t in dag if t.name.startswith("stage_in_")] == [
        "stage_in_local_local_0_0",
        "stage_in_local_local_1_0",
    ]
    (fa,) = entries(tmp_path / "submit", "merge_data", "stage_in_local_local_0_0")
    assert fa["dest_urls"][0]["url"].startswith("symlink:///")  # same site: a symlink
    (exe,) = entries(tmp_path / "submit", "merge_data", "stage_in_local_local_1_0")
    assert exe["dest_urls"][0]["url"].startswith("file:///")  # an executable is always copied


@pytest.mark.parametrize(
    "mode,expected",
    [
        ("none", []),
        ("leaf", ["cleanup_data_0_local"]),
        (
            "inplace",
            [
                "clean_up_local_level_3_0",
                "clean_up_local_level_4_0",
                "clean_up_local_level_5_0",
                "cleanup_data_0_local",
            ],
        ),
    ],
)
def test_cleanup_modes(tmp_path, mode, expected):
    res = run_plan(tmp_path, data_workflow(tmp_path), cleanup=mode)
    assert [t.name for t in read_dag(res.emitted[0].dag) if t.name.startswith("clean")] == expected


def test_no_output_site_stages_nothing_out_and_registers_nothing(tmp_path):
    res = run_plan(tmp_path, data_workflow(tmp_path), output_site=None)
    names = [t.name for t in read_dag(res.emitted[0].dag)]
    assert not [n for n in names if n.startswith(("stage_out", "register"))]
    # an output meant for a stage-out that is not planned is never removed by in-place cleanup
    removed = [
        e["target"]["url"].rsplit("/", 1)[1]
        for n in names
        if n.startswith("clean_up_")
        for e in entries(tmp_path / "submit", "merge_data", n)
    ]
    assert "f.c" not in removed and "f.b" in removed


def test_replicas_from_a_file_in_the_working_directory_or_given(tmp_path, monkeypatch):
    paths = data_workflow(tmp_path, inline=False)
    given = paths.pop("replicas")
    with pytest.raises(ConfigError, match=r"uses\[\d\]: input 'f.a' has no replica in the replica catalog"):
        run_plan(tmp_path, paths, dir="a")
    monkeypatch.chdir(tmp_path)  # replicas.yml is there, as pegasus-plan looks for it
    assert run_plan(tmp_path, paths, dir="b")
    os.rename(given, tmp_path / "elsewhere.yml")
    assert run_plan(tmp_path, {**paths, "replicas": str(tmp_path / "elsewhere.yml")}, dir="c")


def test_rc_txt_regex_entries_and_relative_paths(tmp_path, monkeypatch):
    paths = data_workflow(tmp_path, inline=False)
    os.remove(paths.pop("replicas"))
    (tmp_path / "rc.txt").write_text("# Pegasus File format\n" 'f\\.(a|z) input/[0] site="local" regex="true"\n')
    monkeypatch.chdir(tmp_path)
    run_plan(tmp_path, paths)
    (fa,) = entries(tmp_path / "submit", "merge_data", "stage_in_local_local_0_0")
    # [0] is the whole name; a path without a scheme is read from the catalog's own directory
    assert fa["src_urls"][0]["url"] == f"file://{tmp_path}/input/f.a"


def test_data_reuse_prunes_jobs_whose_outputs_exist_and_force_keeps_them(tmp_path):
    paths = data_workflow(tmp_path)
    doc = yaml.safe_load(Path(paths["workflow"]).read_text())
    doc["replicaCatalog"]["replicas"].append({"lfn": "f.b", "pfns": [{"site": "local", "pfn": f"{tmp_path}/old/f.b"}]})
    Path(paths["workflow"]).write_text(yaml.safe_dump(doc))
    res = run_plan(tmp_path, paths)
    names = [t.name for t in read_dag(res.emitted[0].dag)]
    assert res.pruned == 1 and "cp_j1" not in names and "mine_j2" in names
    staged = [
        e["lfn"] for n in names if n.startswith("stage_in_") for e in entries(tmp_path / "submit", "merge_data", n)
    ]
    assert "f.b" in staged and "f.a" not in staged  # j2 reads the existing f.b; nobody needs f.a any more
    res = run_plan(tmp_path, paths, dir="forced", force=True)
    assert res.pruned == 0 and "cp_j1" in [t.name for t in read_dag(res.emitted[0].dag)]


def test_pilot_plan_says_how_many_jobs_were_pruned(tmp_path):
    paths = data_workflow(tmp_path)
    doc = yaml.safe_load(Path(paths["workflow"]).read_text())
    for lfn in ("f.b", "f.c", "j2.out"):
        doc["replicaCatalog"]["replicas"].append({"lfn": lfn, "pfns": [{"site": "local", "pfn": f"/old/{lfn}"}]})
    Path(paths["workflow"]).write_text(yaml.safe_dump(doc))
    out = subprocess.run(
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
            str(tmp_path / "s"),
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert "2 jobs left out: their outputs are in the replica catalog (--force runs them)" in out.stdout
    # the existing outputs marked stageOut go from their replicas to the output site (Pegasus' level 1000)
    assert (tmp_path / "s" / "merge_data" / "stage_out_local_local_1000_0.in").exists()


def test_stage_out_to_the_default_local_site(tmp_path):
    """No site catalog: pegasus-plan's local site, scratch and storage beside the submit directory."""
    paths = data_workflow(tmp_path, site_catalog=False)
    res = run_plan(tmp_path, paths)
    assert read_dag(res.emitted[0].dag)["cp_j1"].cwd.startswith(f"{tmp_path}/wf-scratch/LOCAL/")
    out = entries(tmp_path / "submit", "merge_data", "stage_out_local_local_1_0")
    assert {e["dest_urls"][0]["url"] for e in out} == {
        f"file://{tmp_path}/wf-output/f.c",
        f"file://{tmp_path}/wf-output/j2.out",
    }


def test_site_config_names_the_shared_scratch_where_the_catalog_does_not(tmp_path, monkeypatch):
    paths = data_workflow(tmp_path, site_catalog=False)
    site = load_site("local", {"pegasus_site": "hpc", "shared_scratch": "$MYSCRATCH/pilot"})
    monkeypatch.setenv("MYSCRATCH", str(tmp_path / "big"))
    doc = yaml.safe_load(Path(paths["workflow"]).read_text())
    for tx in doc["transformationCatalog"]["transformations"]:
        tx["sites"].append({**tx["sites"][0], "name": "hpc"})
    Path(paths["workflow"]).write_text(yaml.safe_dump(doc))
    req = PlanRequest(workflow=paths["workflow"], site=site, submit_dir=str(tmp_path / "s"), conf=paths["conf"])
    dag = read_dag(plan(req).emitted[0].dag)
    assert dag["cp_j1"].cwd.startswith(f"{tmp_path}/big/pilot/") and "stage_in_remote_hpc_0_0" in dag.tasks


BAD = [
    (
        "missing input",
        lambda d: d["replicaCatalog"]["replicas"].clear(),
        r"data.yml: jobs\[0\] \(id j1\): uses\[\d\]: input 'f.a' has no replica in the replica catalog and no job of the "
        r"workflow writes it",
    ),
    (
        "unknown site",
        lambda d: d["replicaCatalog"]["replicas"][0]["pfns"][0].update(site="mars"),
        r"data.yml: replicaCatalog.replicas\[0\].pfns\[0\]: replica 'file://.*/f.a' of 'f.a' is a path on site 'mars', "
        r"which no catalog knows",
    ),
    (
        "scheme",
        lambda d: d["replicaCatalog"]["replicas"][0]["pfns"][0].update(pfn="gopher://x/f.a"),
        r"data.yml: jobs\[0\] \(id j1\): uses\[\d\]: pegasus-transfer cannot move gopher://x/f.a to file://.* \(gopher->file",
    ),
    (
        "no storage",
        lambda d: d["siteCatalog"]["sites"][0]["directories"].pop(1),
        r"data.yml: jobs\[1\] \(id j2\): uses\[\d\]: output '(f.c|j2.out)' is to be staged out, but output site 'local' has "
        r"no storage directory",
    ),
    (
        "two writers",
        lambda d: d["jobs"][1]["uses"].append({"lfn": "f.b", "type": "output"}),
        r"data.yml: jobs\[1\] \(id j2\): uses\[\d\]: writes 'f.b', which \S*data.yml: jobs\[0\] \(id j1\) writes too",
    ),
    (
        "inout",
        lambda d: d["jobs"][0]["uses"].append({"lfn": "f.x", "type": "inout"}),
        r"data.yml: jobs\[0\].uses\[2\].type: file 'f.x' is listed as input and output \(inout\), which Pegasus refuses",
    ),
    (
        "absolute lfn",
        lambda d: d["jobs"][0]["uses"][0].update(lfn="/etc/passwd"),
        r"data.yml: jobs\[0\].uses\[0\].lfn: '/etc/passwd': a logical file name is a relative path",
    ),
]


@pytest.mark.parametrize("name,change,message", BAD, ids=[b[0] for b in BAD])
def test_bad_data_is_one_line_before_anything_is_written(tmp_path, name, change, message):
    paths = data_workflow(tmp_path)
    doc = yaml.safe_load(Path(paths["workflow"]).read_text())
    change(doc)
    Path(paths["workflow"]).write_text(yaml.safe_dump(doc))
    out = subprocess.run(
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
            str(tmp_path / "s"),
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert re.search(message, out.stderr), out.stderr
    assert not (tmp_path / "s").exists()  # nothing half written


def test_sharedfs_said_outright_is_fine(tmp_path):
    assert run_plan(tmp_path, data_workflow(tmp_path, props={"pegasus.data.configuration": "sharedfs"}))


def test_data_jobs_carry_pegasus_dagman_categories_and_their_maxjobs(tmp_path):
    paths = data_workflow(tmp_path, props={"dagman.stageout.maxjobs": "3"})
    run_plan(tmp_path, paths, "label")
    data = yaml.safe_load((tmp_path / "submit" / "clusters.yml").read_text())
    got = {c["name"]: (c.get("category"), c.get("maxjobs")) for c in data["clusters"]}
    assert got["stage_in_local_local_0_0"] == ("stagein", 10) and got["stage_out_local_local_1_0"] == ("stageout", 3)
    assert got["clean_up_local_level_3_0"] == ("cleanup", 4) and got["register_local_1_0"] == ("registration", None)
    assert got["create_dir_data_0_local"] == (None, None) and got["cp_j1"] == (None, None)


def test_a_missing_pegasus_transfer_is_one_line_at_plan_time(tmp_path, monkeypatch):
    from pilot.planner import datalayout

    monkeypatch.setattr(datalayout.importlib.util, "find_spec", lambda name: None)
    monkeypatch.setattr(datalayout.shutil, "which", lambda name: None)
    with pytest.raises(
        ConfigError,
        match=r"^pegasus-transfer not found, which stages the workflow's files .*: pip install "
        r"'pegasus-wms.worker==5.1.\*'",
    ):
        run_plan(tmp_path, data_workflow(tmp_path))
    assert not (tmp_path / "submit").exists()


def test_an_optional_input_without_a_replica_is_not_staged(tmp_path):
    paths = data_workflow(tmp_path)
    doc = yaml.safe_load(Path(paths["workflow"]).read_text())
    doc["jobs"][0]["uses"].append({"lfn": "maybe.cfg", "type": "input", "optional": True})
    Path(paths["workflow"]).write_text(yaml.safe_dump(doc))
    res = run_plan(tmp_path, paths)
    names = [t.name for t in read_dag(res.emitted[0].dag)]
    moved = [
        e["lfn"] for n in names if n.startswith("stage_in_") for e in entries(tmp_path / "submit", "merge_data", n)
    ]
    assert "maybe.cfg" not in moved and "f.a" in moved


def test_a_stageable_executable_of_another_site_is_staged_from_there(tmp_path):
    paths = data_workflow(tmp_path)
    doc = yaml.safe_load(Path(paths["workflow"]).read_text())
    doc["siteCatalog"]["sites"].append({"name": "depot"})
    mine = next(t for t in doc["transformationCatalog"]["transformations"] if t["name"] == "mine")
    mine["sites"][0]["name"] = "depot"  # the only copy is on another site: staged to the execution site
    Path(paths["workflow"]).write_text(yaml.safe_dump(doc))
    run_plan(tmp_path, paths)
    (exe,) = entries(tmp_path / "submit", "merge_data", "stage_in_local_local_1_0")
    assert exe["lfn"] == "mine" and exe["src_urls"] == [
        {"site_label": "depot", "url": f"file://{tmp_path}/bin/mine.sh", "priority": 1}
    ]


def test_every_braindump_names_the_properties_file_the_plan_wrote(tmp_path):
    """monitord and pegasus-analyzer read the braindump's properties file, and warn on every call when it is missing."""
    run_plan(tmp_path, data_workflow(tmp_path), "label")
    submit = tmp_path / "submit"
    for braindump in (submit / "braindump.yml", submit / "cp_j1" / "braindump.yml"):
        path = Path(yaml.safe_load(braindump.read_text())["properties"])
        assert path == submit / "pegasus.properties"
    assert "pegasus.transfer.arguments = -m 1" in (submit / "pegasus.properties").read_text().splitlines()
