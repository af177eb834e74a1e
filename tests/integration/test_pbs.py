"""pilot submit on a real OpenPBS through Parsl's PBSProProvider (``pbs`` marker).

The site file is written here: the machine's OpenPBS has queue ``workq`` and
one node with the machine's CPUs. Jobs start in $HOME with PBS's own
environment, so these runs also prove that the scripts run pilot and the
mpich wheel's mpiexec by absolute path.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.pbs import live, ncpus, pbs  # noqa: F401 - pbs is a fixture
from tests.integration.test_submit import DIAMOND_DATA_JOBS, EXAMPLE, pilot, sleeper_workflow, state
from tests.waiting import wait_for

pytestmark = pytest.mark.pbs


def pbs_site(tmp_path: Path, walltime: str = "00:05:00", name: str = "pbs", **extra: str) -> str:
    path = tmp_path / f"{name}.yaml"
    keys = {
        "description": "the OpenPBS of this machine",
        "scheduler": "pbspro",
        "pegasus_site": "container",
        "queue": "workq",
        "nodes": "1",
        "cores_per_node": str(ncpus()),
        "walltime": f"'{walltime}'",
        **extra,
    }
    path.write_text("".join(f"{k}: {v}\n" for k, v in keys.items()))  # a key once: a repeated key is refused
    return str(path)


def job_ids(sub: Path) -> set[str]:
    return {j for c in state(sub).values() for j in c["job_ids"]}


def test_example_workflow_runs_with_mpi_in_pbs_jobs(tmp_path, pbs):
    sub = tmp_path / "sub"
    res = pilot(
        "submit", "--site", pbs_site(tmp_path), "--cluster", "label", "--poll", "0.3", EXAMPLE, "--dir", str(sub)
    )
    assert res.returncode == 0, res.stderr
    st = state(sub)
    assert all(c["state"] == "done" for c in st.values()) and len(st) == 3 + DIAMOND_DATA_JOBS
    assert {"preprocess_preprocess", "merge_middle", "analyze_analyze", "stage_in_remote_container_0_0"} < set(st)
    assert (tmp_path / "wf-output" / "f.d").exists()  # staged out by a job of its own, in PBS's environment
    assert all(len(c["job_ids"]) == 1 and c["job_ids"][0].split(".")[0].isdigit() for c in st.values())
    script = (sub / "merge_middle" / "merge_middle.pbs").read_text()
    mpiexec = str(Path(sys.executable).parent / "mpiexec")
    ranks = min(3, ncpus())  # master + one worker per task of the widest level (2), at most the node's CPUs
    assert (
        f"\n{mpiexec} -n {ranks} -ppn {ranks} " in script
        and f"#PBS -l select=1:ncpus={ranks}:mpiprocs={ranks}\n" in script
    )
    # One MPI job of two ranks ran the cluster: a master and its worker on the PBS node.
    said = " ".join(p.read_text() for p in (sub / "merge_middle").glob("pilot-*.stderr"))
    assert f"Master starting with {ranks - 1} workers" in said and "Workflow succeeded" in said, said
    events = (sub / "merge_middle" / "jobstate.log").read_text()
    assert "findrange_left JOB_SUCCESS" in events and "findrange_right JOB_SUCCESS" in events, events
    finished = json.loads(
        subprocess.run(
            ["qstat", "-x", "-f", "-F", "json", *job_ids(sub)], capture_output=True, text=True, check=True
        ).stdout
    )["Jobs"]
    assert all(j["job_state"] == "F" and j["Exit_status"] == 0 for j in finished.values())


def test_too_short_walltime_is_aborted_resubmitted_and_resumed(tmp_path, pbs):
    sub = tmp_path / "sub"
    wf = sleeper_workflow(tmp_path, 4, 6, label_each=False)  # 24 s of work; the pilot gets 15 s per job
    res = pilot(
        "submit",
        "--site",
        pbs_site(tmp_path, walltime="00:00:30"),
        "--cluster",
        "label",
        "--poll",
        "0.5",
        wf,
        "--dir",
        str(sub),
        timeout=400,
    )
    assert res.returncode == 0, res.stderr
    c = state(sub)["merge_chain"]
    assert c["state"] == "done" and c["attempts"] >= 2 and len(c["job_ids"]) == c["attempts"]
    rescue = (sub / "merge_chain" / "merge_chain.dag.rescue").read_text().split("\n")
    assert sorted(x for x in rescue if x) == [f"DONE sleep_s{i}" for i in range(4)]  # each task done once
    assert live(job_ids(sub)) == []


def test_status_shows_pbs_states_and_cancel_leaves_no_job(tmp_path, pbs):
    sub = tmp_path / "sub"
    wf = sleeper_workflow(tmp_path, 2, 120, label_each=True)
    site = pbs_site(tmp_path)
    res = pilot("submit", "--site", site, "--cluster", "label", "--detach", "--poll", "0.3", wf, "--dir", str(sub))
    assert res.returncode == 0, res.stderr
    try:
        wait_for(lambda: (sub / "submit.state.json").exists() and live(job_ids(sub)), 60, "a PBS job")
        wait_for(
            lambda: any(
                line.startswith("sleep_s0 ") and " running " in f"{line} "
                for line in pilot("status", str(sub)).stdout.splitlines()
            ),
            60,
            "pilot status shows the cluster's PBS job running",
        )
    finally:
        cancel = pilot("cancel", str(sub), "--site", site)
    assert cancel.returncode == 0, cancel.stderr
    wait_for(lambda: live(job_ids(sub)) == [], 60, "qstat without the run's jobs")
    assert all(c["state"] in ("cancelled", "waiting", "done") for c in state(sub).values())  # create-dir: done
    assert state(sub)["sleep_s0"]["state"] == "cancelled"
    assert "cancelled" in pilot("status", str(sub)).stdout


def test_job_pbs_can_never_run_fails_with_its_reason(tmp_path, pbs):
    """More CPUs per chunk than the node has: PBS keeps the job queued as "Can Never Run"; the run fails with that."""
    sub = tmp_path / "sub"
    site = pbs_site(tmp_path, ranks_per_node=str(ncpus() + 2), cores_per_node=str(ncpus() + 2))
    try:
        res = pilot(
            "submit", "--site", site, "--cluster", "whole", "--poll", "0.3", EXAMPLE, "--dir", str(sub), timeout=90
        )
    finally:
        pilot("cancel", str(sub), "--site", site)
    assert res.returncode == 1
    assert "Can Never Run" in res.stderr and "ncpus" in res.stderr
    assert state(sub)["merge_diamond"]["state"] == "failed"
    assert live(job_ids(sub)) == []  # the job does not stay queued forever


def wide_workflow(tmp_path: Path, site: str, n: int) -> str:
    """``n`` independent jobs: clustered whole, one pilot of n + 1 ranks."""
    from tests.integration.test_submit import api

    wf = api.Workflow("wide", infer_dependencies=False)
    tc = api.TransformationCatalog()
    tc.add_transformations(api.Transformation("true", site=site, pfn="/bin/true", is_stageable=False))
    wf.add_transformation_catalog(tc)
    for i in range(n):
        wf.add_jobs(api.Job("true", _id=f"t{i}"))
    path = tmp_path / "wide.yml"
    wf.write(str(path))
    return str(path)


@pytest.mark.parametrize("name,per_node", [("polaris", 32), ("aurora", 102)])
def test_alcf_scripts_pass_qsub(tmp_path, pbs, name, per_node):
    """The ALCF scripts' directives as this qsub checks them, for a two-node pilot; only the queue (workq
    here) and ALCF's own custom resource (filesystems) are overridden. PALS' launcher line is checked as text."""
    sub = tmp_path / "sub"
    res = pilot(
        "plan",
        wide_workflow(tmp_path, name, 120),
        "--site",
        name,
        "--cluster",
        "whole",
        "--dir",
        str(sub),
        "--set",
        "account=proj42",
        "--set",
        "queue=workq",
        "--set",
        "nodes=2",
    )
    assert res.returncode == 0, res.stderr
    text = (sub / "merge_wide" / "merge_wide.pbs").read_text()
    assert f"#PBS -l select=2:ncpus={per_node}:mpiprocs={per_node}\n" in text
    assert "#PBS -A proj42\n" in text and "#PBS -q workq\n" in text and "#PBS -l place=scatter:excl\n" in text
    assert "#PBS -l filesystems=" in text
    # PALS' mpiexec, from the job's PATH after worker_init, one rank per core on both nodes
    launch = [line for line in text.splitlines() if line.startswith("mpiexec ")]
    assert len(launch) == 1 and f" -n {2 * per_node} -ppn {per_node} " in launch[0], launch
    checked = tmp_path / "checked.pbs"
    checked.write_text("".join(line for line in text.splitlines(True) if not line.startswith("#PBS -l filesystems=")))
    qsub = subprocess.run(["qsub", "-h", str(checked)], capture_output=True, text=True)
    assert qsub.returncode == 0, qsub.stderr
    subprocess.run(["qdel", qsub.stdout.strip()], check=True)


def test_pilot_jobs_run_every_cluster_in_one_pbs_job(tmp_path, pbs):
    """--pilots 1 on OpenPBS: Parsl's PBSProProvider submits one pilot job, every cluster runs in it, and the
    job has ended (F) once the run is over."""
    sub = tmp_path / "sub"
    res = pilot(
        "submit",
        "--site",
        pbs_site(tmp_path),
        "--cluster",
        "label",
        "--poll",
        "0.3",
        "--pilots",
        "1",
        EXAMPLE,
        "--dir",
        str(sub),
    )
    assert res.returncode == 0, res.stderr
    st = state(sub)
    assert all(c["state"] == "done" and c["job_ids"][0].startswith("pilot:") for c in st.values())
    blocks = [p for p in (sub / "pilots").iterdir() if p.is_dir()]
    assert len(blocks) == 1 and json.loads((sub / "pilots.json").read_text())["blocks"] == []
    # PBS_NODEFILE names the node once per rank (mpiprocs): the block names it once, and counts its slots
    assert len((blocks[0] / "hosts").read_text().split()) == 1
    assert len((blocks[0] / "units").read_text().split()) == ncpus()
    said = [line for line in res.stderr.splitlines() if ": pilot job " in line and " submitted (" in line]
    assert len(said) == 1
    block_job = said[0].split(": pilot job ")[1].split()[0]
    wait_for(lambda: not live({block_job}), 60, "the pilot job to leave PBS")


def test_a_pilot_job_lost_to_qdel_costs_only_its_cluster_which_resumes_in_a_new_one(tmp_path, pbs):
    from tests.integration.test_pilots import chain, started

    sub = tmp_path / "sub"
    site = pbs_site(tmp_path, pegasus_site="local")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pilot",
            "submit",
            "--site",
            site,
            "--cluster",
            "label",
            "--poll",
            "0.3",
            "--no-monitord",
            "--pilots",
            "1",
            str(chain(tmp_path)),
            "--dir",
            str(sub),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        wait_for(lambda: started(sub / "sh_a"), 180, "the first cluster to start in a pilot job")
        job = json.loads((sub / "pilots.json").read_text())["blocks"][0]["job_id"]
        subprocess.run(["qdel", "-W", "force", job], check=True)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    records = state(sub)
    assert records["sh_a"]["attempts"] == 2 and records["sh_a"]["retries"] == 0
    assert records["sh_b"]["attempts"] == 1
    assert (tmp_path / "ran.txt").read_text().split() == ["a", "b"]  # each once
    assert not live({b["job_id"] for b in json.loads((sub / "pilots.json").read_text())["blocks"]} | {job})


def test_a_cluster_whose_pbs_pilot_job_is_held_is_withdrawn_to_the_other_site_and_runs_there(tmp_path, pbs):
    """Two OpenPBS sites: "held"'s pilot jobs are submitted held (-h); past its pending_limit the first cluster, which
    waits there, is withdrawn to "ok" (one line, once), runs there, and the held pilot job is qdel'd; the clusters
    after it go to "ok" first, as nothing of the run runs at "held"."""
    from tests.integration.test_pilots import chain

    held = pbs_site(tmp_path, name="held", pegasus_site="local", pending_limit="10", scheduler_options='["#PBS -h"]')
    ok = pbs_site(tmp_path, name="ok", pegasus_site="local")
    sub = tmp_path / "sub"
    res = pilot(
        "submit",
        "--site",
        f"{held},{ok}",
        "--cluster",
        "label",
        "--poll",
        "0.3",
        "--no-monitord",
        "--pilots",
        "1",
        str(chain(tmp_path, 1)),
        "--dir",
        str(sub),
    )
    assert res.returncode == 0, res.stderr
    records = state(sub)
    first = records.pop("create_dir_chain_0_local")
    assert first["state"] == "done" and first["site"] == "ok" and first["withdrawn_from"] == "held", first
    assert first["attempts"] == 2, first
    assert all(
        c["state"] == "done" and c["site"] == "ok" and c.get("withdrawn_from") is None and c["attempts"] == 1
        for c in records.values()
    ), records
    said = [line for line in res.stderr.splitlines() if "withdrawn and bound to ok" in line]
    assert len(said) == 1 and "create_dir_chain_0_local" in said[0], res.stderr  # one line, once
    cancelled = {
        line.split("pilot job ")[1].split()[0]
        for line in res.stderr.splitlines()
        if "no cluster waits for it there any more: cancelled" in line
    }
    assert len(cancelled) == 1, res.stderr
    wait_for(lambda: not live(cancelled), 60, "the held pilot jobs to leave PBS")
    assert (tmp_path / "ran.txt").read_text().split() == ["a", "b"]
