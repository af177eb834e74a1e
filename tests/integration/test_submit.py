"""pilot submit end to end: LocalProvider with the MPI wheel, SlurmProvider and TorqueProvider on real Slurm."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.slurm import require_slurm
from tests.integration.test_submit_dagman import assert_files_as_documented
from tests.waiting import wait_for

api = pytest.importorskip("Pegasus.api")
EXAMPLE = str(Path(__file__).resolve().parents[2] / "examples" / "diamond.yml")
PILOT = [sys.executable, "-m", "pilot"]
VENV_PILOT = f"pilot_command={sys.executable} -m pilot"


def pilot(*args: str, timeout: float = 300, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([*PILOT, *args], capture_output=True, text=True, timeout=timeout, **kw)


def state(sub: Path) -> dict:
    return {c["name"]: c for c in json.loads((sub / "submit.state.json").read_text())["clusters"]}


@pytest.mark.mpi
def test_local_site_runs_the_example(tmp_path):
    sub = tmp_path / "sub"
    res = pilot("submit", "--site", "local", "--cluster", "label", "--poll", "0.3", EXAMPLE, "--dir", str(sub))
    assert res.returncode == 0, res.stderr
    st = state(sub)
    assert all(c["state"] == "done" for c in st.values()) and len(st) == 3 + DIAMOND_DATA_JOBS
    assert {"preprocess_preprocess", "merge_middle", "analyze_analyze", "stage_in_local_local_0_0"} < set(st)
    # f.a came from the replica catalog, f.d went to the output site's storage and was registered
    assert (tmp_path / "wf-output" / "f.d").read_text().splitlines()[:2] == ["1 one", "1 one"]
    db = sqlite3.connect(sub / "diamond-0.replicas.db")
    assert db.execute("select lfn, pfn, site from rc_lfn natural join rc_pfn").fetchall() == [
        ("f.d", f"file://{tmp_path}/wf-output/f.d", "local")
    ]
    db.close()
    table = pilot("status", str(sub)).stdout
    assert "merge_middle" in table and "2/2" in table
    again = pilot("submit", "--site", "local", "--poll", "0.3", str(sub))  # all done: nothing is submitted again
    assert again.returncode == 0 and state(sub) == st


# The data jobs of the example's label plan: create-dir, a stage-in, a stage-out and a registration (of f.d), four
# in-place cleanup jobs and the leaf cleanup: each a batch job of its own, as Pegasus makes them jobs of the root DAG.
DIAMOND_DATA_JOBS = 9


def sleeper_workflow(tmp_path: Path, n: int, seconds: int, label_each: bool) -> str:
    wf = api.Workflow("sleepers", infer_dependencies=False)
    tc = api.TransformationCatalog()
    tc.add_transformations(api.Transformation("sleep", site="container", pfn="/bin/sleep", is_stageable=False))
    wf.add_transformation_catalog(tc)
    jobs = []
    for i in range(n):
        j = api.Job("sleep", _id=f"s{i}").add_args(str(seconds))
        j.add_profiles(api.Namespace.PEGASUS, key="label", value=f"stage{i}" if label_each else "chain")
        jobs.append(j)
        wf.add_jobs(j)
    for a, b in zip(jobs, jobs[1:]):
        wf.add_dependency(a, children=[b])
    path = tmp_path / "sleepers.yml"
    wf.write(str(path))
    return str(path)


def our_squeue(sub: Path) -> list[str]:
    ids = {j for c in state(sub).values() for j in c["job_ids"]}
    out = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True).stdout.split()
    return [j for j in out if j in ids]


def processes_of(sub: Path) -> list[str]:
    """What still runs of a submit directory on this host: its job scripts, mpiexec, pilot runs (by their command
    lines or working directories) and their tasks (by the mark pilot run gives them); zombies are not counted."""
    from pilot.runtime.reaper import _mark_of
    from pilot.util.procs import cmdline

    root = str(sub.resolve())
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        args = b" ".join(cmdline(pid) or []).decode(errors="replace")
        mark = _mark_of(pid) or ""
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")  # pilot run and mpiexec name their DAG relative to it
        except OSError:
            cwd = ""
        if args and (root in args or mark.startswith(root) or cwd == root or cwd.startswith(root + os.sep)):
            found.append(f"{pid} {args}")
    return found


def driver_killed_while_a_task_runs(tmp_path, seconds: int):
    """A chain of two ``sleep SECONDS`` tasks in one label cluster, submitted on the local site; the driver SIGKILLed
    once the first task runs (the run goes on without it). Returns the submit directory."""
    sub = tmp_path / "sub"
    wf = sleeper_workflow(tmp_path, 2, seconds, label_each=False)
    plan = pilot(
        "plan", wf, "--site", "local", "--set", "pegasus_site=container", "--cluster", "label", "--dir", str(sub)
    )
    assert plan.returncode == 0, plan.stderr
    driver = subprocess.Popen(
        [*PILOT, "submit", "--poll", "0.3", "--no-monitord", str(sub)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_for(
        lambda: any(p.endswith(f"/bin/sleep {seconds}") for p in processes_of(sub)),
        120,
        "merge_chain's first task running",
        every=0.2,
    )
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    return sub


@pytest.mark.mpi
def test_cancel_after_the_driver_was_killed_ends_the_local_run(tmp_path):
    sub = driver_killed_while_a_task_runs(tmp_path, 300)
    assert processes_of(sub)  # the run goes on without its driver
    cancel = pilot("cancel", "sub", cwd=tmp_path)  # as a user types it: relative to where they stand
    assert cancel.returncode == 0, cancel.stdout + cancel.stderr
    assert re.match(r"pilot cancel: cancelled 1 batch job\(s\): \d+$", cancel.stdout.splitlines()[0]), cancel.stdout
    wait_for(lambda: not processes_of(sub), 30, "nothing of the run left", detail=lambda: processes_of(sub))
    status = pilot("status", str(sub))
    assert re.search(r"^merge_chain +cancelled ", status.stdout, re.M), status.stdout


@pytest.mark.mpi
def test_a_restarted_driver_waits_for_the_run_that_outlived_its_job(tmp_path):
    """The driver and the job's shell are killed, the pilot run goes on: a restart neither calls the job vanished
    nor submits into the locked DAG; it waits for that run and takes its result."""
    sub = driver_killed_while_a_task_runs(tmp_path, 4)
    job = state(sub)["merge_chain"]["job_ids"][-1]  # the pid of the job's shell, whose child shell runs mpiexec
    shells = [int(job), *map(int, Path(f"/proc/{job}/task/{job}/children").read_text().split())]
    for pid in shells:
        os.kill(pid, signal.SIGKILL)
    res = pilot("submit", "--poll", "0.3", "--no-monitord", str(sub), timeout=120)
    assert res.returncode == 0, res.stderr
    assert "vanished" not in res.stderr and "still holds the DAG lock; waiting for it" in res.stderr, res.stderr
    assert state(sub)["merge_chain"]["job_ids"] == [job] and state(sub)["merge_chain"]["state"] == "done"


@pytest.mark.slurm
def test_slurm_label_workflow(tmp_path):
    require_slurm()
    sub = tmp_path / "sub"
    res = pilot(
        "submit",
        "--site",
        "container",
        "--cluster",
        "label",
        "--poll",
        "0.5",
        "--set",
        VENV_PILOT,
        EXAMPLE,
        "--dir",
        str(sub),
    )
    assert res.returncode == 0, res.stderr
    assert "submit with:" not in res.stdout  # it is submitting already
    st = state(sub)
    assert len(st) == 3 + DIAMOND_DATA_JOBS and all(
        c["state"] == "done" and len(c["job_ids"]) == 1 for c in st.values()
    )
    assert "stage_in_remote_container_0_0" in st  # the example's input staged to the site by a job on the site
    assert (tmp_path / "wf-output" / "f.d").exists()
    assert our_squeue(sub) == []
    assert res.stdout.splitlines()[-1].split() == ["0", "0", "0", str(4 + DIAMOND_DATA_JOBS), "0", "100.0", "Success"]
    assert_files_as_documented(sub, "slurm")


@pytest.mark.slurm
def test_slurm_wall_time_abort_is_resubmitted_and_resumes(tmp_path):
    require_slurm()
    sub = tmp_path / "sub"
    wf = sleeper_workflow(tmp_path, 4, 6, label_each=False)  # 24 s of work; the pilot gets 15 s per job
    res = pilot(
        "submit",
        "--site",
        "container",
        "--cluster",
        "label",
        "--poll",
        "0.5",
        "--set",
        VENV_PILOT,
        "--set",
        "walltime=00:00:30",
        wf,
        "--dir",
        str(sub),
        timeout=400,
    )
    assert res.returncode == 0, res.stderr
    c = state(sub)["merge_chain"]
    assert c["state"] == "done" and c["attempts"] >= 2 and len(c["job_ids"]) == c["attempts"]
    assert c["resubmits"] == c["attempts"] - 1 and c["retries"] == 0  # wall time never uses up --retry
    assert "ran out of wall time: resubmit 1 of 3" in res.stderr
    rescue = (sub / "merge_chain" / "merge_chain.dag.rescue").read_text().split("\n")
    assert sorted(x for x in rescue if x) == [f"DONE sleep_s{i}" for i in range(4)]  # each task done once


@pytest.mark.slurm
def test_slurm_killed_driver_resumes_without_duplicates(tmp_path):
    require_slurm()
    sub = tmp_path / "sub"
    wf = sleeper_workflow(tmp_path, 3, 3, label_each=True)
    plan = pilot("plan", wf, "--site", "container", "--cluster", "label", "--dir", str(sub), "--set", VENV_PILOT)
    assert plan.returncode == 0, plan.stderr
    driver = subprocess.Popen(
        [*PILOT, "submit", "--site", "container", "--set", VENV_PILOT, "--poll", "0.3", str(sub)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_for(
        lambda: (sub / "submit.state.json").exists()
        and state(sub)["sleep_s0"]["state"] == "done"
        and state(sub)["sleep_s1"]["job_ids"],
        60,
        "sleep_s0 done and sleep_s1 submitted",
        every=0.1,
    )
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    res = pilot("submit", "--site", "container", "--set", VENV_PILOT, "--poll", "0.3", str(sub))
    assert res.returncode == 0, res.stderr
    st = state(sub)
    assert all(c["state"] == "done" for c in st.values())
    assert [len(c["job_ids"]) for c in st.values()] == [1] * len(st)  # no cluster submitted twice
    jobcomp = Path("/var/log/slurm/jobcomp.log")
    if jobcomp.exists():  # the scheduler's own record agrees
        text = jobcomp.read_text()
        for name in st:
            assert (
                text.count(f"Name=pilot-{json.loads((sub / 'submit.state.json').read_text())['plan_id']}-{name}-") == 1
            )


@pytest.mark.slurm
def test_slurm_cancel_leaves_no_job(tmp_path):
    require_slurm()
    sub = tmp_path / "sub"
    wf = sleeper_workflow(tmp_path, 2, 60, label_each=False)
    res = pilot(
        "submit",
        "--site",
        "container",
        "--cluster",
        "label",
        "--detach",
        "--poll",
        "0.3",
        "--set",
        VENV_PILOT,
        wf,
        "--dir",
        str(sub),
    )
    assert res.returncode == 0, res.stderr
    wait_for(
        lambda: (sub / "submit.state.json").exists() and our_squeue(sub), 60, "a job of the run in the queue", every=0.2
    )
    assert our_squeue(sub)
    wait_for(
        lambda: re.search(r"^merge_chain +running", pilot("status", str(sub)).stdout, re.M),
        60,
        "merge_chain running",
        every=0.2,
    )
    live = pilot("status", str(sub))
    assert live.returncode == 3 and re.search(r"^merge_chain +running +0/2 ", live.stdout, re.M), live.stdout
    assert "driven by pilot submit (pid" in live.stdout
    cancel = pilot("cancel", str(sub))
    assert cancel.returncode == 0, cancel.stderr
    wait_for(lambda: not our_squeue(sub), 30, "no job of the run left in the queue", every=0.2)
    assert our_squeue(sub) == []
    st = state(sub)  # create-dir had finished; the rest is cancelled, nothing left queued or running
    assert st["merge_chain"]["state"] == "cancelled" and st["create_dir_sleepers_0_container"]["state"] == "done"
    assert all(c["state"] in ("cancelled", "done") for c in st.values())


@pytest.mark.slurm
def test_slurm_cancel_after_the_driver_was_killed_leaves_nothing_running(tmp_path):
    require_slurm()
    sub = tmp_path / "sub"
    wf = sleeper_workflow(tmp_path, 2, 60, label_each=False)
    plan = pilot("plan", wf, "--site", "container", "--cluster", "label", "--dir", str(sub), "--set", VENV_PILOT)
    assert plan.returncode == 0, plan.stderr
    driver = subprocess.Popen(
        [*PILOT, "submit", "--site", "container", "--set", VENV_PILOT, "--poll", "0.3", "--no-monitord", str(sub)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_for(
        lambda: any(p.endswith("/bin/sleep 60") for p in processes_of(sub)),
        120,
        "merge_chain's first task running",
        every=0.2,
    )
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    cancel = pilot("cancel", str(sub))
    assert cancel.returncode == 0, cancel.stdout + cancel.stderr
    assert re.match(r"pilot cancel: cancelled 1 batch job\(s\): \d+$", cancel.stdout.splitlines()[0]), cancel.stdout
    wait_for(lambda: not our_squeue(sub), 30, "no job of the run left in the queue", every=0.2)
    wait_for(lambda: not processes_of(sub), 30, "nothing of the run left", detail=lambda: processes_of(sub))
    assert state(sub)["merge_chain"]["state"] == "cancelled"


@pytest.mark.slurm
def test_pbs_path_through_torque_wrappers(tmp_path):
    require_slurm()
    site = tmp_path / "torque.yaml"
    mpiexec = Path(sys.executable).parent / "mpiexec"
    site.write_text(
        f"description: Slurm through its PBS/Torque wrappers\nscheduler: torque\npegasus_site: container\nlauncher: {mpiexec}\n"
        f"queue: debug\nnodes: 1\nranks_per_node: 3\nwalltime: '00:05:00'\npilot_command: {sys.executable} -m pilot\n"
    )
    sub = tmp_path / "sub"
    # Slurm's qsub wrapper sends the job's output to the submitting process's directory: keep it in tmp_path.
    res = pilot(
        "submit",
        "--site",
        str(site),
        "--cluster",
        "label",
        "--poll",
        "0.5",
        EXAMPLE,
        "--dir",
        str(sub),
        cwd=str(tmp_path),
    )
    assert res.returncode == 0, res.stderr
    assert all(c["state"] == "done" for c in state(sub).values()) and len(state(sub)) == 3 + DIAMOND_DATA_JOBS


def local_site(tmp_path: Path, name: str, max_queued: int) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(
        f"description: test site {name}\nscheduler: local\nlauncher: mpiexec\npegasus_site: local\n"
        f"nodes: 1\nranks_per_node: 2\nmax_queued: {max_queued}\n"
    )
    return str(path)


def independent_workflow(tmp_path: Path, n: int, fail: str | None = None) -> str:
    wf = api.Workflow("indep", infer_dependencies=False)
    tc = api.TransformationCatalog()
    tc.add_transformations(api.Transformation("sleep", site="local", pfn="/bin/sleep", is_stageable=False))
    tc.add_transformations(api.Transformation("false", site="local", pfn="/bin/false", is_stageable=False))
    wf.add_transformation_catalog(tc)
    for i in range(n):
        name = "false" if f"j{i}" == fail else "sleep"
        wf.add_jobs(api.Job(name, _id=f"j{i}").add_args(*([] if name == "false" else ["1"])))
    path = tmp_path / "indep.yml"
    wf.write(str(path))
    return str(path)


def spans(sub: Path) -> dict[str, tuple[float, float]]:
    out = {}
    for d in sub.iterdir():
        log = d / "jobstate.log"
        if log.exists():
            times = [float(line.split()[0]) for line in log.read_text().splitlines()]
            out[d.name] = (min(times), max(times))
    return out


@pytest.mark.mpi
def test_site_throttle_and_independent_work_after_a_failure(tmp_path):
    site = local_site(tmp_path, "one", max_queued=1)
    sub = tmp_path / "sub"
    res = pilot(
        "submit",
        "--site",
        site,
        "--poll",
        "0.2",
        "--cluster",
        "horizontal",
        independent_workflow(tmp_path, 3),
        "--dir",
        str(sub),
    )
    assert res.returncode == 0, res.stderr
    runs = sorted(spans(sub).values())
    assert len(runs) == 3 + 2 and all(a[1] <= b[0] for a, b in zip(runs, runs[1:]))  # never two at once (with
    # the workflow's create-dir and cleanup jobs)
    sub2 = tmp_path / "sub2"
    res = pilot(
        "submit",
        "--site",
        site,
        "--poll",
        "0.2",
        "--cluster",
        "horizontal",
        independent_workflow(tmp_path, 3, fail="j0"),
        "--dir",
        str(sub2),
    )
    assert res.returncode == 1
    st = state(sub2)
    assert st["false_j0"]["state"] == "failed" and st["false_j0"]["attempts"] == 2  # the default --retry 1
    assert [c["state"] for n, c in st.items() if n.startswith("sleep_")] == [
        "done",
        "done",
    ]  # independent work still ran
    assert "false_j0: task false_j0 failed with exit 1 (stderr: false_j0/false_j0.err.001)" in res.stderr.splitlines()


@pytest.mark.mpi
def test_several_sites_share_the_work(tmp_path):
    a, b = local_site(tmp_path, "site_a", 1), local_site(tmp_path, "site_b", 1)
    sub = tmp_path / "sub"
    res = pilot(
        "submit",
        "--site",
        f"{a},{b}",
        "--poll",
        "0.2",
        "--cluster",
        "horizontal",
        independent_workflow(tmp_path, 4),
        "--dir",
        str(sub),
    )
    assert res.returncode == 0, res.stderr
    used = [c["site"] for c in state(sub).values()]
    assert sorted(set(used)) == ["site_a", "site_b"] and all(c["attempts"] == 1 for c in state(sub).values())


@pytest.mark.slurm
def test_rejected_submission_fails_after_retries(tmp_path):
    """sbatch refuses the job (no such partition): retried with back-off, never duplicated, then failed."""
    require_slurm()
    from pilot.sites import load_site
    from pilot.submit.backend import SchedulerBackend
    from pilot.submit.driver import Driver, Options

    sub = tmp_path / "sub"
    plan = pilot("plan", EXAMPLE, "--site", "container", "--cluster", "whole", "--dir", str(sub), "--set", VENV_PILOT)
    assert plan.returncode == 0, plan.stderr
    site = load_site("container", {"partition": "nosuchpartition"})
    driver = Driver.load(str(sub), [site], SchedulerBackend(), Options(poll=0.05, backoff=0.05))
    driver.recover()
    assert driver.run() is False
    c = state(sub)["merge_diamond"]
    assert c["state"] == "failed" and c["job_ids"] == [] and c["submit_errors"] >= 5
    assert "failed 5 times" in c["reason"] and "Invalid partition name specified" in c["reason"]


@pytest.mark.mpi
def test_restart_needs_every_site_of_the_run(tmp_path):
    a = local_site(tmp_path, "site_a", 1)
    local_site(tmp_path, "site_b", 1)  # a site that exists, but the restart below does not name it
    sub = tmp_path / "sub"
    assert (
        pilot(
            "plan", independent_workflow(tmp_path, 2), "--site", a, "--cluster", "horizontal", "--dir", str(sub)
        ).returncode
        == 0
    )
    (sub / "submit.state.json").write_text(
        json.dumps(
            {
                "format": 1,
                "plan_id": "x",
                "clusters": [
                    {
                        "name": "sleep_j0",
                        "state": "queued",
                        "site": "site_b",
                        "attempts": 1,
                        "job_ids": ["999999"],
                        "job_name": "pilot-x-sleep_j0-1",
                        "submit_errors": 0,
                        "reason": "",
                    }
                ],
            }
        )
    )
    res = pilot("submit", "--site", a, str(sub))
    assert res.returncode == 2 and "on site(s) site_b: pass them to --site too" in res.stderr
