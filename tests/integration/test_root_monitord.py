"""The submit directory as ONE Pegasus workflow, read by the real pegasus-monitord and friends.

A label-clustered workflow written with the real Pegasus.api is planned; the
driver's sequence of events (submitted, running, ended, resubmitted) is fed to
the root writers while each cluster's batch command really runs under
mpiexec, with a live pegasus-monitord following the root dagman.out as
``pilot submit`` starts it. One task fails; one cluster runs out of wall time
once and is resubmitted. The numbers of pegasus-statistics, -analyzer and
-status are asserted.
"""

from __future__ import annotations

import json
import re
import shlex
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from pilot.monitor.root import RootMonitor
from pilot.submit.monitord import Monitord, pegasus_cli
from tests.conftest import mpiexec
from tests.waiting import wait_for

pytestmark = [pytest.mark.monitord, pytest.mark.mpi]

api = pytest.importorskip("Pegasus.api")


def tool(name: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    cmd = pegasus_cli(name)
    if cmd is None:
        pytest.skip("pegasus-wms is not installed (pip install 'pegasus-wms==5.1.*')")
    return subprocess.run([*cmd, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


# The data jobs every plan has: the workflow's directory made first, removed last (--cleanup, default inplace).
CREATE_DIR, CLEANUP = "create_dir_blackdiamond_0_local", "cleanup_blackdiamond_0_local"


def workflow(tmp: Path, slow: int = 3) -> Path:
    """Label clusters: first (2 tasks of 2 CPUs and 256 MB each), second (2 tasks, ID3 fails with exit 3); ID5 (sleeps
    SLOW seconds) alone in its label."""
    wf = api.Workflow("blackdiamond")
    tc = api.TransformationCatalog()
    for name, pfn in (("preprocess", "/bin/echo"), ("sh", "/bin/sh")):
        tc.add_transformations(api.Transformation(name, site="local", pfn=pfn, is_stageable=False))

    def job(tx, ident, label, *args):  # the list joined into one line, as Pegasus passes it: quote a shell body
        return api.Job(tx, _id=ident).add_args(*args).add_profiles(api.Namespace.PEGASUS, key="label", value=label)

    a = job("preprocess", "ID1", "first", "a-out").add_pegasus_profile(pmc_request_cpus=2, pmc_request_memory="256 MB")
    b = job("sh", "ID2", "first", "-c", "'echo b-ok'").add_pegasus_profile(
        pmc_request_cpus=2, pmc_request_memory="256 MB"
    )
    c = job("sh", "ID3", "second", "-c", "'echo c-is-broken >&2; exit 3'")
    d = job("sh", "ID4", "second", "-c", "'echo d-ok'")
    e = job("sh", "ID5", "third", "-c", f"'sleep {slow}; echo e-ok'")
    wf.add_jobs(a, b, c, d, e)
    wf.add_dependency(a, children=[b])
    wf.add_dependency(b, children=[c, e])
    wf.write(str(tmp / "workflow.yml"))
    tc.write(str(tmp / "transformations.yml"))
    return tmp / "workflow.yml"


def plan(tmp: Path, slow: int = 3) -> Path:
    if mpiexec() is None:
        pytest.skip("no mpiexec (pip install mpich)")
    wfile = workflow(tmp, slow)
    sub = tmp / "submit"
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "pilot",
            "plan",
            "--site",
            "local",
            "--cluster",
            "label",
            str(wfile),
            "--tc",
            str(tmp / "transformations.yml"),
            "--dir",
            str(sub),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    return sub


def run_cluster(sub: Path, name: str, wall_minutes: str | None = None) -> None:
    """The cluster's batch command, as its script runs it (optionally with a shorter wall time)."""
    script = (sub / name / f"{name}.sh").read_text().strip().splitlines()[-1]
    argv = shlex.split(script)
    if wall_minutes:
        argv[-1:-1] = ["--max-wall-time", wall_minutes]  # the last --max-wall-time wins
    subprocess.run(argv, cwd=sub / name, capture_output=True, timeout=120)


def status_row(sub: Path) -> list[str]:
    out = tool("pegasus-status", "-Q", "-l", ".", cwd=sub)
    assert out.returncode == 0, out.stderr
    return next(line.split() for line in out.stdout.splitlines() if line.strip().endswith("blackdiamond-0.dag"))


def test_one_workflow_per_submit_directory(tmp_path):
    sub = plan(tmp_path)
    monitor = RootMonitor(str(sub))
    monitord = Monitord(str(sub), monitor.path)
    monitor.start()
    assert monitord.start(recover=False)
    try:
        monitor.submitted(CREATE_DIR, "9000", "local")
        monitor.running(CREATE_DIR)
        run_cluster(sub, CREATE_DIR)
        monitor.ended(CREATE_DIR, retry=False, retry_limit=3)
        monitor.submitted("merge_first", "9001", "local")
        monitor.running("merge_first")
        # While the first cluster runs: UNREADY READY PRE IN_Q POST DONE FAIL %DONE (the cleanup job waits for all)
        assert status_row(sub)[:8] == ["3", "0", "0", "1", "0", "1", "0", "20.0"]
        run_cluster(sub, "merge_first")
        monitor.ended("merge_first", retry=False, retry_limit=3)
        assert status_row(sub)[:8] == ["1", "2", "0", "0", "0", "2", "0", "40.0"]

        monitor.submitted("sh_ID5", "9002", "local")
        monitor.running("sh_ID5")
        run_cluster(sub, "sh_ID5", wall_minutes="0.02")  # out of wall time: resubmitted, resumes
        monitor.ended("sh_ID5", retry=True, retry_limit=3)
        monitor.submitted("merge_second", "9003", "local")  # never seen running: ended() adds EXECUTE
        run_cluster(sub, "merge_second")
        monitor.ended("merge_second", retry=False, retry_limit=3)
        monitor.submitted("sh_ID5", "9004", "local")
        monitor.running("sh_ID5")
        run_cluster(sub, "sh_ID5")
        monitor.ended("sh_ID5", retry=False, retry_limit=3)
    finally:
        monitor.finished(1)
        monitor.close()
    assert monitord.finish(window=90) == 0, (sub / "monitord.out").read_text()[-3000:]

    # Every attempt's job output kept where monitord reads it, and no file per task.
    assert sorted(p.name for p in (sub / "sh_ID5").glob("sh_ID5.out.*")) == ["sh_ID5.out.000", "sh_ID5.out.001"]
    # (the per-worker DAG.out.<rank> of the failed cluster stay for inspection, as after any failed pilot run)
    assert {p.name for p in sub.glob("*/*.out.[0-9][0-9][0-9]")} == {
        f"{CREATE_DIR}.out.000",
        "merge_first.out.000",
        "merge_second.out.000",
        "sh_ID5.out.000",
        "sh_ID5.out.001",
    }

    # pegasus-status after the run.
    row = status_row(sub)
    assert row[:9] == ["1", "0", "0", "0", "0", "3", "1", "60.0", "Failure"]  # the cleanup job never became ready

    # pegasus-statistics: tasks are the workflow's own jobs, jobs are the clusters and the data jobs (create-dir,
    # done, and the cleanup job, which never ran), as of a Pegasus run.
    stats = tool("pegasus-statistics", "-s", "all", ".", cwd=sub)
    assert stats.returncode == 0, stats.stderr
    summary = (sub / "statistics" / "summary.txt").read_text()
    table = {line.split()[0]: line.split()[1:] for line in summary.splitlines() if line.startswith(("Tasks", "Jobs"))}
    # Type: Succeeded Failed Incomplete Total Retries Total+Retries
    assert table["Tasks"] == ["4", "1", "0", "5", "1", "6"]  # ID5 killed at the wall time, then run again
    assert table["Jobs"] == ["3", "1", "1", "5", "1", "5"]  # sh_ID5 retried once
    wall = float(re.search(r"Workflow wall time\s*:\s*([\d.]+)", summary).group(1))
    cumulative = float(re.search(r"Cumulative job wall time\s*:\s*([\d.]+)", summary).group(1))
    assert wall >= 3 and cumulative >= 3  # ID5 sleeps 3 s in its second attempt

    jobs = [
        line.split()
        for line in (sub / "statistics" / "jobs.txt").read_text().splitlines()
        if line.startswith(("merge_", "sh_"))
    ]
    # Job Try Site Kickstart Mult ... : each cluster attempt, its site and the CPUs its tasks ask for.
    assert sorted((j[0], j[1], j[2], j[4]) for j in jobs) == [
        ("merge_first", "1", "local", "2"),
        ("merge_second", "1", "local", "1"),
        ("sh_ID5", "1", "local", "1"),
        ("sh_ID5", "2", "local", "1"),
    ]
    breakdown = (sub / "statistics" / "breakdown.txt").read_text()
    # sh failed twice (ID3; ID5 killed at the wall time), ran well three times; runtimes are the tasks' own
    assert re.search(r"^sh\s+failed\s+2\s", breakdown, re.M) and re.search(r"^sh\s+successful\s+3\s", breakdown, re.M)
    assert re.search(r"^preprocess\s+successful\s+1\s", breakdown, re.M)

    db = sqlite3.connect(next(sub.glob("*.stampede.db")))
    tasks = dict(db.execute("select t.abs_task_id, j.exec_job_id from task t join job j on t.job_id = j.job_id"))
    kinds = dict(db.execute("select exec_job_id, type_desc || ' ' || task_count from job"))
    db.close()
    # the data jobs have no task, as in a Pegasus run
    assert tasks == {
        "ID1": "merge_first",
        "ID2": "merge_first",
        "ID3": "merge_second",
        "ID4": "merge_second",
        "ID5": "sh_ID5",
    }
    assert kinds[CREATE_DIR] == "create-dir 0" and kinds[CLEANUP] == "cleanup 0" and kinds["merge_first"] == "compute 2"

    # pegasus-analyzer names the failed task: exit code, site, arguments, stderr, files that exist.
    analyzer = tool("pegasus-analyzer", ".", cwd=sub)
    out = analyzer.stdout
    assert analyzer.returncode != 0
    assert "# jobs failed      :      1" in out
    assert re.search(r"^=+merge_second=+$", out, re.M)
    assert re.search(r"^site\s+: local$", out, re.M)
    assert 'arguments   : -c "echo c-is-broken >&2; exit 3"' in out
    assert "exitcode    : 3" in out and "c-is-broken" in out and " - sh - ID3 - " in out
    for label in ("submit file", "output file", "error file"):
        path = re.search(rf"^\s*{label}: (\S+)$", out, re.M).group(1)
        assert (sub / path).exists(), f"{label} {path}"


def test_task_requests_reach_monitord_composite_events(tmp_path):
    """What each task asks for, read by the real monitord from the .sub files into its job_inst.composite events.

    pegasus-statistics has no column for a requested amount of memory; monitord
    reports +pegasus_memory_mb / +pegasus_cores / +pegasus_gpus as req_memory_mb
    / req_cpus / req_gpus of each job instance, written here to an event file.
    """
    sub = plan(tmp_path)
    run = subprocess.run(
        [sys.executable, "-m", "pilot", "submit", "--site", "local", "--poll", "0.2", "--no-monitord", str(sub)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 1, run.stderr  # ID3 fails
    events = tmp_path / "events.json"
    out = tool(
        "pegasus-monitord",
        "-r",
        "-j",
        str(tmp_path / "monitord-jobstate.log"),
        "-e",
        "json",
        "--dest",
        str(events),
        "blackdiamond-0.dag.dagman.out",
        cwd=sub,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    requests: dict[str, set[tuple]] = {}
    for line in events.read_text().splitlines():
        event = json.loads(line)
        if event["event"] == "stampede.job_inst.composite":
            requests.setdefault(event["job_id"], set()).add(
                (event.get("req_cpus"), event.get("req_memory_mb"), event.get("req_gpus"))
            )
    # every attempt of a cluster: the first asks for 2 CPUs and 256 MB per task, the others for nothing but 1 CPU
    assert requests == {
        "merge_first": {("2", "256", None)},
        "merge_second": {("1", None, None)},
        "sh_ID5": {("1", None, None)},
        CREATE_DIR: {("1", None, None)},
    }


def test_pilot_submit_runs_monitord_live_and_a_restart_counts_nothing_twice(tmp_path):
    """pilot submit --site local: monitord beside it; stopped mid-run and restarted, every count stays single."""
    sub = plan(tmp_path)
    cmd = [sys.executable, "-m", "pilot", "submit", "--site", "local", "--poll", "0.2", str(sub)]
    first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    dagman_out = sub / "blackdiamond-0.dag.dagman.out"
    try:
        wait_for(
            lambda: dagman_out.exists() and "ULOG_SUBMIT for HTCondor Node sh_ID5" in dagman_out.read_text(),
            what="the slow cluster's submission",
        )
        wait_for(lambda: (sub / "monitord.pid").exists(), what="pegasus-monitord")
        row = status_row(sub)  # during the run: the slow cluster queued, create-dir and the first cluster done
        # (the state may already say Failure: DAGMan's status is NODE_FAILED as soon as ID3's cluster failed)
        assert int(row[3]) >= 1 and row[5] == "2" and row[8] in ("Running", "Failure")
        first.send_signal(signal.SIGTERM)
        _, err = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert first.returncode == 130, err
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert again.returncode == 1, again.stderr  # ID3 fails
    log = dagman_out.read_text()
    assert log.count("STARTING UP") == 2 and log.count("Submitting HTCondor Node sh_ID5") == 1

    stats = tool("pegasus-statistics", "-s", "all", ".", cwd=sub)
    assert stats.returncode == 0, stats.stderr
    summary = (sub / "statistics" / "summary.txt").read_text()
    table = {line.split()[0]: line.split()[1:] for line in summary.splitlines() if line.startswith(("Tasks", "Jobs"))}
    # merge_second (ID3 fails) is retried once (--retry 1), and once more by the restart when it had
    # already failed for good before it (a rerun retries what failed): every attempt counted once.
    tries = log.count("Submitting HTCondor Node merge_second")
    assert tries in (2, 4)
    # (the jobs with create-dir, done, and the cleanup job, which never ran: Total+Retries counts the runs)
    assert table["Tasks"] == ["4", "1", "0", "5", str(tries - 1), str(5 + tries - 1)]
    assert table["Jobs"] == ["3", "1", "1", "5", str(tries - 1), str(4 + tries - 1)]
    db = sqlite3.connect(next(sub.glob("*.stampede.db")))
    restarts = db.execute("select count(*) from workflowstate where state = 'WORKFLOW_STARTED'").fetchone()[0]
    db.close()
    assert restarts == 2  # the restart is a DAGMan restart of the same workflow


def test_pilot_cancel_shows_as_aborted_jobs(tmp_path):
    sub = plan(tmp_path, slow=300)  # ID5 runs until cancelled, however slow the machine is to get there
    cmd = [sys.executable, "-m", "pilot", "submit", "--site", "local", "--poll", "0.2", str(sub)]
    driver = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    dagman_out = sub / "blackdiamond-0.dag.dagman.out"
    try:
        wait_for(
            lambda: dagman_out.exists() and "ULOG_EXECUTE for HTCondor Node sh_ID5" in dagman_out.read_text(),
            what="the slow cluster running",
        )
        cancel = subprocess.run(
            [sys.executable, "-m", "pilot", "cancel", str(sub)], capture_output=True, text=True, timeout=120
        )
        _, said = driver.communicate(timeout=120)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    assert cancel.returncode == 0, cancel.stderr
    # the driver knows its batch jobs are being cancelled: it never says they keep running
    assert "stopped by pilot cancel, which cancels its batch jobs" in said and "keep running" not in said, said
    log = dagman_out.read_text()
    assert "ULOG_JOB_ABORTED for HTCondor Node sh_ID5" in log
    assert "EXITING WITH STATUS 2" in log.splitlines()[-1]
    row = status_row(sub)
    assert row[1:5] == ["0", "0", "0", "0"] and row[6] != "0"  # nothing left queued; the removed job failed
    stats = tool("pegasus-statistics", "-s", "all", ".", cwd=sub)
    assert stats.returncode == 0, stats.stderr
    summary = (sub / "statistics" / "summary.txt").read_text()
    jobs = next(line.split() for line in summary.splitlines() if line.startswith("Jobs"))
    assert jobs[2] != "0" and jobs[4] == "5"  # the aborted cluster counts as failed, of 5 jobs (2 data jobs)


@pytest.mark.slurm
def test_slurm_run_is_one_pegasus_workflow(tmp_path):
    """pilot submit through the real Slurm: monitord beside it, every cluster a job that ran on the site."""
    from tests.integration.slurm import require_slurm

    require_slurm()
    wfile = workflow(tmp_path)
    sub = tmp_path / "submit"
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "pilot",
            "submit",
            "--site",
            "container",
            "--cluster",
            "label",
            "--poll",
            "0.5",
            "--set",
            f"pilot_command={sys.executable} -m pilot",
            "--set",
            "pegasus_site=local",
            str(wfile),
            "--tc",
            str(tmp_path / "transformations.yml"),
            "--dir",
            str(sub),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 1, res.stderr  # ID3 fails
    log = (sub / "blackdiamond-0.dag.dagman.out").read_text()
    # merge_second (ID3 fails) is tried twice (--retry 1): a DAGMan retry of its node
    assert log.count("ULOG_EXECUTE") == 5 and log.count("POST Script of Node") == 5  # and create-dir's
    assert "Retrying node merge_second (retry #1 of 4)..." in log  # --retry 1 + --max-resubmits 3
    stats = tool("pegasus-statistics", "-s", "all", ".", cwd=sub)
    assert stats.returncode == 0, stats.stderr
    summary = (sub / "statistics" / "summary.txt").read_text()
    table = {line.split()[0]: line.split()[1:] for line in summary.splitlines() if line.startswith(("Tasks", "Jobs"))}
    # the jobs with create-dir, done, and the cleanup job, which never ran; the tasks are the workflow's own jobs
    assert table["Tasks"] == ["4", "1", "0", "5", "1", "6"] and table["Jobs"] == ["3", "1", "1", "5", "1", "5"]
    js = [line.split() for line in (sub / "jobstate.log").read_text().splitlines() if " SUBMIT " in line]
    slurm_ids = {c["name"]: c["job_ids"] for c in json.loads((sub / "submit.state.json").read_text())["clusters"]}
    logged: dict[str, list[str]] = {}
    for row in js:
        logged.setdefault(row[1], []).append(row[3])
    # the batch job id of every attempt, for squeue/sacct (the cleanup job never ran: ID3's cluster failed)
    assert logged == {name: ids for name, ids in slurm_ids.items() if ids} and slurm_ids[CLEANUP] == []


def _db_picture(db_path: Path) -> dict:
    """What the stampede DB says of the run: each job's attempts with their states, and each task's invocations."""
    db = sqlite3.connect(db_path)
    try:
        jobs = db.execute(
            "select j.exec_job_id, ji.job_submit_seq, js.state from job j join job_instance ji on "
            "ji.job_id = j.job_id join jobstate js on js.job_instance_id = ji.job_instance_id"
        ).fetchall()
        calls = db.execute("select abs_task_id, exitcode from invocation where abs_task_id is not null").fetchall()
    finally:
        db.close()
    picture: dict = {"jobs": {}, "invocations": sorted(calls)}
    for name, seq, state in jobs:
        picture["jobs"].setdefault((name, seq), set()).add(state)
    return picture


def test_a_driver_sigkilled_mid_run_and_restarted_leaves_the_db_a_replay_makes(tmp_path):
    """pilot submit SIGKILLed while a cluster runs, then run again: the live monitoring DB equals an offline
    replay of the same dagman.out into a DB of its own, and says how the run ended."""
    sub = plan(tmp_path)
    cmd = [sys.executable, "-m", "pilot", "submit", "--site", "local", "--poll", "0.2", str(sub)]
    first = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    dagman_out = sub / "blackdiamond-0.dag.dagman.out"
    try:
        wait_for(
            lambda: dagman_out.exists() and "ULOG_EXECUTE for HTCondor Node sh_ID5" in dagman_out.read_text(),
            what="the slow cluster running",
        )
    finally:
        first.kill()
        first.wait()
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert again.returncode == 1, again.stderr  # ID3 fails
    assert not (sub / "monitord.incomplete").exists(), again.stderr
    replay_db = tmp_path / "replay.db"
    (sub / "monitord.recover").write_text("line_processed 1\n")
    out = tool(
        "pegasus-monitord",
        "-r",
        "-j",
        str(tmp_path / "replay-jobstate.log"),
        "--dest",
        f"sqlite:///{replay_db}",
        dagman_out.name,
        cwd=sub,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    live = _db_picture(next(sub.glob("*.stampede.db")))
    assert live == _db_picture(replay_db)
    assert ("sh_ID5", 4) in live["jobs"] and "POST_SCRIPT_SUCCESS" in live["jobs"][("sh_ID5", 4)]
