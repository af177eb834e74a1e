"""Keys that say how Pegasus would have done what pilot does its own way plan as written, with one warning line per
key per plan (pilot.planner.replaced); the keys pilot honours in their place act (docs/pegasus-fields.md)."""

from __future__ import annotations

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


def edit(path: str, change) -> None:
    doc = yaml.safe_load(Path(path).read_text())
    change(doc)
    Path(path).write_text(yaml.safe_dump(doc))


def pilot_plan(tmp_path: Path, paths: dict, name: str = "s") -> subprocess.CompletedProcess:
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
            str(tmp_path / name),
            "--cluster",
            "none",
        ],
        capture_output=True,
        text=True,
    )


def texts(submit: Path) -> list[str]:
    """Every file of a plan, its directory's name taken out."""
    return [
        p.read_text(errors="replace").replace(str(submit), "DIR")
        for p in sorted(submit.rglob("*"))
        if p.is_file() and (p.suffix in (".dag", ".sh", ".in") or p.name == "clusters.yml")
    ]


def test_a_value_that_is_no_data_configuration_is_refused_in_one_line(tmp_path):
    out = pilot_plan(tmp_path, data_workflow(tmp_path, props={"pegasus.data.configuration": "sharefs"}))
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert "pegasus.data.configuration = 'sharefs' is not a data configuration: use sharedfs" in out.stderr


def with_site_profiles(paths: dict, profiles: dict) -> None:
    def change(doc):
        doc["siteCatalog"]["sites"][0]["profiles"] = profiles

    edit(paths["workflow"], change)


@pytest.mark.parametrize("style", ["condor", "glidein", "condorc", "creamce"])
def test_an_htcondor_style_on_the_site_is_its_batch_system_said_once(tmp_path, style):
    paths = data_workflow(tmp_path)
    with_site_profiles(
        paths,
        {
            "pegasus": {"style": style, "data.configuration": "condorio"},
            "condor": {
                "requirements": 'OpSys == "LINUX"',
                "+ProjectName": '"wf"',
                "+SingularityImage": '"/cvmfs/singularity.opensciencegrid.org/x:latest"',
            },
        },
    )
    out = pilot_plan(tmp_path, paths)
    assert out.returncode == 0, out.stderr
    lines = out.stderr.splitlines()
    assert sorted(line.split(" (")[0] for line in lines) == [
        "pilot plan: warning: condor::+ProjectName",
        "pilot plan: warning: condor::+SingularityImage",
        "pilot plan: warning: condor::requirements",
        "pilot plan: warning: pegasus::style",
    ], lines
    assert any(
        "siteCatalog.sites[0].profiles.pegasus.style): pilot submits the site's jobs to its batch system" in x
        for x in lines
    ), lines


def test_a_style_pegasus_does_not_know_is_refused(tmp_path):
    paths = data_workflow(tmp_path)
    with_site_profiles(paths, {"pegasus": {"style": "slurmish"}})
    out = pilot_plan(tmp_path, paths)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "is no style of Pegasus'" in out.stderr, out.stderr


def test_replaced_keys_on_every_job_give_one_line_each_and_the_plan_of_the_workflow_without_them(tmp_path):
    def workflow(where: Path, keyed: bool) -> dict:
        where.mkdir()
        wf = api.Workflow("many", infer_dependencies=False)
        for n in range(20):
            job = api.Job("T", _id=f"j{n}").add_args(str(n))
            if keyed:
                job.add_profiles(api.Namespace.PEGASUS, key="gridstart.arguments", value="-f")
                job.add_profiles(api.Namespace.DAGMAN, key="priority", value=n)
                job.add_profiles(api.Namespace.CONDOR, key="requirements", value="Memory > 2")
            wf.add_jobs(job)
        props = {"dagman.maxidle": "100", "dagman.maxpre": "2", "dagman.compute.maxjobs": "5"} if keyed else {}
        return write(where, wf, transformations("local", {"T": "/bin/echo"}), props=props)

    plain = workflow(tmp_path / "a", False)
    keyed = workflow(tmp_path / "b", True)
    for paths, name in ((plain, "a"), (keyed, "b")):
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "pilot",
                "plan",
                paths["workflow"],
                "--tc",
                paths["tc"],
                *(["--conf", paths["conf"]] if paths.get("conf") else []),
                "--site",
                "local",
                "--dir",
                str(tmp_path / name / "s"),
                "--cluster",
                "none",
            ],
            capture_output=True,
            text=True,
        )
        assert out.returncode == 0, out.stderr
        if name == "a":
            assert out.stderr == ""
        else:
            keys = [line.split(" (")[0].rpartition(" ")[2] for line in out.stderr.splitlines()]
            assert sorted(keys) == sorted(
                [
                    "pegasus::gridstart.arguments",
                    "dagman::priority",
                    "condor::requirements",
                    "dagman.maxpre",
                    "dagman.compute.maxjobs",
                ]
            ), out.stderr
            assert "max_queued" in out.stderr and "kickstart record" in out.stderr
    assert texts(tmp_path / "b" / "s") == [
        t.replace(str(tmp_path / "a"), str(tmp_path / "b")) for t in texts(tmp_path / "a" / "s")
    ]


def run_plan(tmp_path: Path, paths: dict, name: str = "s"):
    return plan(
        PlanRequest(
            workflow=paths["workflow"],
            site=load_site("local"),
            cluster=["none"],
            submit_dir=str(tmp_path / name),
            conf=paths.get("conf"),
        )
    )


def stage_in(result):
    return next(e for e in result.emitted if e.cluster.jobs[0].id.startswith("stage_in_"))


@pytest.mark.parametrize(
    "site, workflow, prop, threads",
    [("5", "4", "3", "5"), (None, "4", "3", "4"), (None, None, "3", "3"), (None, None, None, "2")],
)
def test_transfer_threads_profile_sets_the_data_jobs_threads(tmp_path, site, workflow, prop, threads):
    """The execution site's entry, else the workflow's profiles, else the property, else Pegasus' default 2."""
    paths = data_workflow(tmp_path, props={"pegasus.transfer.threads": prop} if prop else {})

    def change(doc):
        if site:
            doc["siteCatalog"]["sites"][0]["profiles"] = {"pegasus": {"transfer.threads": site}}
        if workflow:
            doc["profiles"] = {"pegasus": {"transfer.threads": workflow}}

    edit(paths["workflow"], change)
    command = " ".join(stage_in(run_plan(tmp_path, paths)).cluster.jobs[0].command)
    assert f"--threads {threads} " in command, command


def test_transfer_threads_of_the_pegasus_transfer_transformation_comes_first(tmp_path):
    """1000genome's site catalog for cori gives pegasus::transfer a transformation entry with transfer.threads 8:
    Pegasus gives a transformation's profiles to the jobs that run it, the transfer jobs."""
    paths = data_workflow(tmp_path, props={"pegasus.transfer.threads": "3"})

    def change(doc):
        doc["siteCatalog"]["sites"][0]["profiles"] = {"pegasus": {"transfer.threads": "5"}}
        doc["transformationCatalog"]["transformations"].append(
            {
                "namespace": "pegasus",
                "name": "transfer",
                "sites": [{"name": "local", "pfn": "/opt/pegasus-transfer"}],
                "profiles": {"pegasus": {"transfer.threads": "8"}},
            }
        )

    edit(paths["workflow"], change)
    command = " ".join(stage_in(run_plan(tmp_path, paths)).cluster.jobs[0].command)
    assert "--threads 8 " in command, command


def test_keys_of_the_data_jobs_on_a_compute_job_are_said_to_act_on_nothing(tmp_path):
    paths = data_workflow(tmp_path)

    def change(doc):
        for job in doc["jobs"]:
            job["profiles"] = {"pegasus": {"transfer.threads": "9", "ssh_private_key": "/k"}}

    edit(paths["workflow"], change)
    result = run_plan(tmp_path, paths)
    assert "--threads 2 " in " ".join(stage_in(result).cluster.jobs[0].command)
    assert sorted(w.split(" (")[0] for w in result.warnings) == [
        "warning: pegasus::ssh_private_key",
        "warning: pegasus::transfer.threads",
    ]
    assert all("no effect on a compute job" in w for w in result.warnings)


def test_transfer_threads_that_is_no_count_is_refused(tmp_path):
    paths = data_workflow(tmp_path)
    with_site_profiles(paths, {"pegasus": {"transfer.threads": "many"}})
    with pytest.raises(ConfigError, match=r"profiles.pegasus.transfer.threads: 'many' is not a whole number"):
        run_plan(tmp_path, paths)


def test_a_sites_ssh_key_reaches_the_data_jobs_as_pegasus_transfer_reads_it(tmp_path):
    """pegasus-transfer reads SSH_PRIVATE_KEY_<site label> for a URL of that site (Pegasus/transfer.py); the
    compute jobs do not get it."""
    paths = data_workflow(tmp_path)

    def change(doc):
        doc["siteCatalog"]["sites"][0]["profiles"] = {"pegasus": {"SSH_PRIVATE_KEY": "/home/me/.ssh/wf"}}
        doc["siteCatalog"]["sites"].append(
            {"name": "remote-host", "profiles": {"env": {"X509_USER_PROXY": "/tmp/x"}}, "directories": []}
        )

    edit(paths["workflow"], change)
    result = run_plan(tmp_path, paths)
    dag = read_dag(stage_in(result).dag)
    (task,) = dag.tasks.values()
    assert dict(task.env) == {"SSH_PRIVATE_KEY_local": "/home/me/.ssh/wf", "X509_USER_PROXY_remote_host": "/tmp/x"}
    compute = next(e for e in result.emitted if e.cluster.jobs[0].id == "j1")
    assert all("SSH_PRIVATE_KEY_local" not in dict(t.env or ()) for t in read_dag(compute.dag).tasks.values())
