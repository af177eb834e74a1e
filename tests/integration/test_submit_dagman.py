"""pilot submit as DAGMan's equal on real Slurm: failure semantics, rescue reruns, retries, jobs that never start,
and the submit directory exactly as documented."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.slurm import require_slurm
from tests.waiting import wait_for

api = pytest.importorskip("Pegasus.api")
PILOT = [sys.executable, "-m", "pilot"]
VENV_PILOT = f"pilot_command={sys.executable} -m pilot"
DOC = Path(__file__).resolve().parents[2] / "docs" / "submit-dir.md"


def pilot(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([*PILOT, *args], capture_output=True, text=True, timeout=timeout)


def state(sub: Path) -> dict:
    return {c["name"]: c for c in json.loads((sub / "submit.state.json").read_text())["clusters"]}


def our_jobs(sub: Path) -> list[str]:
    ids = {j for c in state(sub).values() for j in c["job_ids"]}
    out = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True).stdout.split()
    return [j for j in out if j in ids]


def documented_patterns() -> list[tuple[re.Pattern[str], bool]]:
    """(path regex relative to the submit dir, optional?) for every entry of the file list in docs/submit-dir.md."""
    text = DOC.read_text()
    block = text.split("```\nSUBMIT/\n", 1)[1].split("```", 1)[0]
    out = []
    for line in block.splitlines():
        indent = len(line) - len(line.lstrip())
        names, _, description = line.strip().partition("  ")
        if not names or names.endswith("/"):
            continue
        for name in names.split(" | "):
            rx = re.escape(name.strip())
            rx = rx.replace(re.escape("<job>"), r"pilot-[0-9a-f]+-(?P=cluster)-\d+\.[0-9.]+")
            rx = rx.replace(re.escape("<task>"), r"[^/]+").replace("NNN", r"\d{3}")
            rx = rx.replace(re.escape("<wf>"), r"[^/]+").replace(re.escape("<rank>"), r"\d+")
            rx = rx.replace(re.escape("<cluster>"), "(?P=cluster)")
            rx = (r"(?P<cluster>[^/]+)/" if indent > 2 else "") + rx.replace(
                "(?P=cluster)", "(?P<cluster>[^/]+)", 1 if indent <= 2 else 0
            )
            out.append((re.compile(rx + r"\Z"), "only" in description.split(":")[0]))
    return out


def assert_files_as_documented(sub: Path, scheduler: str) -> None:
    files = sorted(str(p.relative_to(sub)) for p in sub.rglob("*") if p.is_file())
    patterns = documented_patterns()
    undocumented = [f for f in files if not any(rx.match(f) for rx, _ in patterns)]
    assert undocumented == [], f"files docs/submit-dir.md does not list: {undocumented}"
    other_scripts = {r"\.slurm\Z", r"\.pbs\Z", r"\.sh\Z"} - {{"slurm": r"\.slurm\Z", "local": r"\.sh\Z"}[scheduler]}
    required = [rx for rx, optional in patterns if not optional and not rx.pattern.endswith(tuple(other_scripts))]
    missing = [rx.pattern for rx in required if not any(rx.match(f) for f in files)]
    assert missing == [], f"documented files a run did not write: {missing}"
    batch_output = {"slurm": ".stdout", "local": ".sh.ec"}[scheduler]  # the scheduler's own "only" entries
    assert any(re.search(r"/pilot-[0-9a-f]+-.*" + re.escape(batch_output) + r"\Z", f) for f in files)


def flaky_workflow(tmp_path: Path, flag: Path, site: str = "container") -> str:
    """Two independent branches: 'mixed' (an echo and a check that fails until ``flag`` exists) with a child
    'after', and 'other'."""
    wf = api.Workflow("branches", infer_dependencies=False)
    tc = api.TransformationCatalog()
    tc.add_transformations(
        api.Transformation("echo", site=site, pfn="/bin/echo", is_stageable=False),
        api.Transformation("check", site=site, pfn="/usr/bin/test", is_stageable=False),
    )
    wf.add_transformation_catalog(tc)
    echo = api.Job("echo", _id="good").add_args("good").add_profiles(api.Namespace.PEGASUS, key="label", value="mixed")
    check = (
        api.Job("check", _id="chk")
        .add_args("-e", str(flag))
        .add_profiles(api.Namespace.PEGASUS, key="label", value="mixed")
    )
    after = api.Job("echo", _id="after").add_args("after")
    other = api.Job("echo", _id="other").add_args("other")
    wf.add_jobs(echo, check, after, other)
    wf.add_dependency(check, children=[after])
    path = tmp_path / "branches.yml"
    wf.write(str(path))
    return str(path)


@pytest.mark.slurm
def test_slurm_failure_stops_only_descendants_and_a_rerun_retries_exactly_it(tmp_path):
    require_slurm()
    sub, flag = tmp_path / "sub", tmp_path / "flag"
    res = pilot(
        "submit",
        "--site",
        "container",
        "--cluster",
        "label",
        "--retry",
        "0",
        "--poll",
        "0.3",
        "--set",
        VENV_PILOT,
        flaky_workflow(tmp_path, flag),
        "--dir",
        str(sub),
    )
    assert res.returncode == 1, res.stderr
    st = state(sub)
    assert {n: c["state"] for n, c in st.items()} == {
        "merge_mixed": "failed",
        "echo_after": "waiting",
        "echo_other": "done",
        "create_dir_branches_0_container": "done",
        "cleanup_branches_0_container": "waiting",
    }
    lines = res.stderr.splitlines()
    # no file per task: the attempt's job stderr, and the job output with the task's invocation record
    assert (
        "merge_mixed: task check_chk failed with exit 1 (stderr: merge_mixed/merge_mixed.err.000, "
        "invocation record in merge_mixed/merge_mixed.out.000)"
    ) in lines
    assert (sub / "merge_mixed" / "merge_mixed.err.000").exists() and not list(sub.glob("merge_mixed/check_chk.*"))
    record = (sub / "merge_mixed" / "merge_mixed.out.000").read_text()
    assert 'derivation="chk"' in record and '<regular exitcode="1"/>' in record
    # pegasus-status' view: the failed cluster failed, the one below it not run (Un-Ready), the other done
    rows = [
        line.split()[2:]
        for line in (sub / "branches-0.dag.dagman.out").read_text().splitlines()
        if re.fullmatch(r"\S+ \S+(\s+\d+){7}", line)
    ]
    # (with the workflow's create-dir, done, and its cleanup, waiting for every branch)
    assert rows[-1] == ["2", "0", "0", "0", "0", "2", "1"]  # Done Pre Queued Post Ready Un-Ready Failed
    batch = next(line for line in lines if line.startswith("merge_mixed: batch job "))
    out, err = re.search(r"stdout (\S+), stderr (\S+)$", batch).groups()
    assert (sub / out).exists() and (sub / err).exists()
    assert "echo_after: not run (merge_mixed failed)" in lines
    status = pilot("status", str(sub))
    assert status.returncode == 1 and "not run (merge_mixed failed)" in status.stdout
    assert status.stdout.splitlines()[-1].split() == ["2", "0", "0", "3", "1", "50.0", "Failure"]

    flag.write_text("")  # the cause is fixed: the rerun needs neither --site nor --set again
    again = pilot("submit", "--poll", "0.3", str(sub))
    assert again.returncode == 0, again.stderr
    st = state(sub)
    assert all(c["state"] == "done" for c in st.values())
    assert [len(st[n]["job_ids"]) for n in ("merge_mixed", "echo_after", "echo_other")] == [2, 1, 1]
    rescue = (sub / "merge_mixed" / "merge_mixed.dag.rescue").read_text().split()
    assert rescue.count("echo_good") == 1 and rescue.count("check_chk") == 1  # the good task did not run again
    assert pilot("status", str(sub)).returncode == 0


@pytest.mark.slurm
def test_slurm_job_that_can_never_start_fails_in_one_line(tmp_path):
    require_slurm()
    cpus = int(subprocess.run(["sinfo", "-h", "-o", "%c"], capture_output=True, text=True).stdout.split()[0])
    site = tmp_path / "toobig.yaml"
    site.write_text(
        f"description: asks for more ranks per node than the node has\nscheduler: slurm\npegasus_site: container\n"
        f"launcher: srun\nlauncher_options: --mpi=pmi2\npartition: debug\nnodes: 1\nranks_per_node: {2 * cpus}\n"
        f"cores_per_node: {cpus}\nwalltime: '00:05:00'\npilot_command: {sys.executable} -m pilot\n"
    )
    wf = api.Workflow("wide", infer_dependencies=False)
    tc = api.TransformationCatalog()
    tc.add_transformations(api.Transformation("echo", site="container", pfn="/bin/echo", is_stageable=False))
    wf.add_transformation_catalog(tc)
    for i in range(2 * cpus):
        wf.add_jobs(
            api.Job("echo", _id=f"e{i}").add_args(str(i)).add_profiles(api.Namespace.PEGASUS, key="label", value="wide")
        )
    wf.write(str(tmp_path / "wide.yml"))
    sub = tmp_path / "sub"
    res = pilot(
        "submit",
        "--site",
        str(site),
        "--cluster",
        "label",
        "--poll",
        "0.3",
        str(tmp_path / "wide.yml"),
        "--dir",
        str(sub),
        timeout=120,
    )
    assert res.returncode == 1, res.stderr
    assert (
        f"asks for {2 * cpus} MPI ranks per node, but a node of site toobig has {cpus} cores" in res.stderr
    )  # at plan time
    c = state(sub)["merge_wide"]
    assert c["state"] == "failed" and "can never start on toobig: PartitionConfig" in c["reason"]
    assert any(
        line.startswith("merge_wide: failed: job ") and "PartitionConfig" in line for line in res.stderr.splitlines()
    )
    assert our_jobs(sub) == []  # cancelled


@pytest.mark.mpi
def test_dagman_retry_profile_retries_a_cluster_from_its_rescue_log(tmp_path):
    script = tmp_path / "once.sh"
    script.write_text('#!/bin/sh\n[ -e "$1" ] && exit 0\ntouch "$1"\nexit 2\n')
    os.chmod(script, 0o755)
    site = tmp_path / "here.yaml"
    site.write_text("scheduler: local\nlauncher: mpiexec\npegasus_site: local\nnodes: 1\nranks_per_node: 2\n")
    wf = api.Workflow("flaky", infer_dependencies=False)
    tc = api.TransformationCatalog()
    tc.add_transformations(
        api.Transformation("once", site="local", pfn=str(script), is_stageable=False),
        api.Transformation("echo", site="local", pfn="/bin/echo", is_stageable=False),
    )
    wf.add_transformation_catalog(tc)
    first = api.Job("echo", _id="first").add_args("x").add_profiles(api.Namespace.PEGASUS, key="label", value="L")
    once = (
        api.Job("once", _id="once")
        .add_args(str(tmp_path / "seen"))
        .add_profiles(api.Namespace.PEGASUS, key="label", value="L")
    )
    once.add_dagman_profile(retry="1")
    wf.add_jobs(first, once)
    wf.write(str(tmp_path / "flaky.yml"))
    sub = tmp_path / "sub"
    res = pilot(
        "submit",
        "--site",
        str(site),
        "--cluster",
        "label",
        "--retry",
        "0",
        "--poll",
        "0.2",
        str(tmp_path / "flaky.yml"),
        "--dir",
        str(sub),
    )
    assert res.returncode == 0, res.stderr
    c = state(sub)["merge_L"]
    assert (c["attempts"], c["retries"], c["resubmits"]) == (2, 1, 0)
    assert "retry 1 of 1" in res.stderr
    assert (sub / "merge_L" / "merge_L.dag.rescue").read_text().split().count("echo_first") == 1
    assert_files_as_documented(sub, "local")


@pytest.mark.slurm
def test_slurm_held_job_is_shown_held_and_runs_once_released(tmp_path):
    require_slurm()
    site = tmp_path / "held.yaml"
    site.write_text(
        "description: the container site, every job submitted held\nscheduler: slurm\npegasus_site: container\n"
        "launcher: srun\nlauncher_options: --mpi=pmi2\npartition: debug\nnodes: 1\nranks_per_node: 3\n"
        f"walltime: '00:05:00'\nscheduler_options: ['#SBATCH --hold']\npilot_command: {sys.executable} -m pilot\n"
    )
    sub = tmp_path / "sub"
    example = str(Path(__file__).resolve().parents[2] / "examples" / "diamond.yml")
    res = pilot(
        "submit", "--site", str(site), "--cluster", "whole", "--poll", "0.3", "--detach", example, "--dir", str(sub)
    )
    assert res.returncode == 0, res.stderr

    def wait(what: str, check) -> subprocess.CompletedProcess:
        seen: list[subprocess.CompletedProcess] = []

        def status() -> subprocess.CompletedProcess | None:
            seen[:] = [pilot("status", str(sub))]
            return seen[0] if check(seen[0]) else None

        return wait_for(
            status, 120, what, every=0.3, detail=lambda: f"{seen[0].stdout} {(sub / 'submit.log').read_text()}"
        )

    try:
        held = wait("the job held", lambda r: "held (JobHeldUser)" in r.stdout)
        # the 4 jobs and 9 data jobs of the example: READY only its root (the create-dir job), the rest UNREADY
        assert held.returncode == 3 and held.stdout.splitlines()[-2].split()[:4] == ["12", "1", "0", "0"]
        subprocess.run(["scontrol", "release", state(sub)["merge_diamond"]["job_ids"][0]], check=True)
        done = wait("the released job done", lambda r: r.returncode != 3)
    finally:
        pilot("cancel", str(sub))  # a held job would wait forever
    assert done.returncode == 0 and state(sub)["merge_diamond"]["attempts"] == 1
    assert_files_as_documented(sub, "slurm")
