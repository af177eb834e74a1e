"""A scheduler out of reach (stub scheduler commands on PATH): said at once with the time retrying ends, a line at
least every minute, Parsl's own lines in the submit directory's log, and at the end the truth about what reached a
queue; pilot cancel names a job it could not cancel, and only one still in the queue."""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pilot.sites import SiteConfig
from pilot.submit.options import OUTAGE_EVERY, UNREACHABLE_LIMIT
from tests.unit.test_submit_driver import setup
from tests.waiting import wait_for

EXAMPLE = str(Path(__file__).resolve().parents[2] / "examples" / "diamond.yml")
PILOT = [sys.executable, "-m", "pilot"]
SAID = {
    "fails": 'echo "$(basename "$0"): error: Unable to contact slurm controller (connect failure)" >&2; exit 1',
    "hangs": "exec sleep 300",
}


class Lines(logging.Handler):
    """The driver's lines with the fake clock's time when each was said."""

    def __init__(self, clock) -> None:
        super().__init__()
        self.clock = clock
        self.said: list[tuple[float, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.said.append((self.clock.now, record.getMessage()))


def test_an_outage_is_said_at_once_then_at_least_every_minute_until_the_limit(tmp_path):
    driver, queue, clock = setup(tmp_path, {"a": []})
    queue.submit_errors["a"] = [False] * 10
    queue.find_outages = 1000
    lines = Lines(clock)
    logging.getLogger("pilot.submit").addHandler(lines)
    try:
        start = clock.now
        driver.recover()
        assert driver.run() is False
    finally:
        logging.getLogger("pilot.submit").removeHandler(lines)
    outage = [(t, m) for t, m in lines.said if m.startswith("a: the scheduler")]
    assert outage[0][0] == start and re.search(
        r"^a: the scheduler does not answer \(a: submitting a failed: timed out\); "
        r"retrying with back-off until \d\d:\d\d:\d\d, when",
        outage[0][1],
    )
    times = [t for t, _ in outage] + [clock.now]
    assert max(b - a for a, b in zip(times, times[1:])) <= OUTAGE_EVERY + 1
    assert "1 cluster(s) waiting to be submitted" in outage[1][1]
    assert clock.now - start == pytest.approx(UNREACHABLE_LIMIT, abs=2)  # failed when the time said was up
    assert driver.state.clusters["a"].state.value == "failed"


def stub_scheduler(tmp_path: Path, how: str) -> dict[str, str]:
    """An environment whose PATH has sbatch, squeue, scancel and sinfo that cannot reach their controller."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("sbatch", "squeue", "scancel", "sinfo", "sacct"):
        path = bin_dir / name
        path.write_text(f"#!/bin/sh\n{SAID[how]}\n")
        path.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def submit_argv(tmp_path: Path, limit: int) -> list[str]:
    return [
        *PILOT,
        "submit",
        "--site",
        "container",
        "--set",
        "pegasus_site=local",
        "--set",
        f"unreachable_limit={limit}",
        "--set",
        "cmd_timeout=1",
        "--cluster",
        "label",
        "--poll",
        "0.2",
        "--no-monitord",
        EXAMPLE,
        "--dir",
        str(tmp_path / "sub"),
    ]


@pytest.mark.parametrize("how", ["fails", "hangs"])
def test_pilot_submit_against_an_unreachable_scheduler(tmp_path, how):
    pytest.importorskip("Pegasus.api")
    res = subprocess.run(
        submit_argv(tmp_path, 3), env=stub_scheduler(tmp_path, how), capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 1, res.stderr
    err = res.stderr
    first = next(line for line in err.splitlines() if "the scheduler" in line)
    assert re.search(
        r"container: the scheduler does not answer \(container: submitting \S+ failed: .+\); retrying with "
        r"back-off until \d\d:\d\d:\d\d",
        first,
    ), err
    assert "Submit command failed" not in err and "Retcode" not in err and "parsl" not in err  # Parsl's own lines...
    log = (tmp_path / "sub" / "submit.log").read_text()
    assert "parsl" in log  # ...are in the submit directory's log
    assert re.search(
        r"^create_dir_diamond_0_local: failed: container's scheduler could not be reached for [34] s", err, re.M
    ), err
    assert re.search(r"^create_dir_diamond_0_local +failed +0/1 +- ", res.stdout, re.M), res.stdout  # no job id: none


def test_ctrl_c_during_an_outage_says_that_no_job_is_known_to_be_in_a_queue(tmp_path):
    pytest.importorskip("Pegasus.api")
    proc = subprocess.Popen(
        submit_argv(tmp_path, 600),
        env=stub_scheduler(tmp_path, "fails"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        err: list[str] = []
        wait_for(
            lambda: err.append(proc.stderr.readline()) or "retrying with back-off until" in err[-1],
            60,
            "the outage said",
            detail=lambda: err,
        )
        proc.send_signal(signal.SIGINT)
        out, rest = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 130
    last = rest.strip().splitlines()[-1]
    assert "batch jobs keep running" not in rest and "keep running" not in last
    assert re.match(
        r"pilot submit: stopped; 1 submission\(s\) the scheduler did not confirm \(e\.g\. pilot-\w+-"
        r"create_dir_diamond_0_local-1\): a restart or pilot cancel looks for them by name",
        last,
    ), last


def test_cancel_names_the_job_it_could_not_cancel_and_leaves_its_cluster_as_it_is(tmp_path):
    pytest.importorskip("Pegasus.api")
    from pilot.contracts.clusters import read_clusters
    from pilot.contracts.queue import QueueState
    from pilot.contracts.submitstate import ClusterRecord, ClusterState, SubmitState, state_path

    sub = tmp_path / "sub"
    plan = subprocess.run(
        [
            *PILOT,
            "plan",
            "--site",
            "container",
            "--set",
            "pegasus_site=local",
            "--cluster",
            "label",
            EXAMPLE,
            "--dir",
            str(sub),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert plan.returncode == 0, plan.stderr
    names = [s.name for s in read_clusters(str(sub))]
    state = SubmitState(
        state_path(str(sub)),
        plan_id="0badcafe",
        sites={"container": {"file": "container", "set": {"pegasus_site": "local", "cmd_timeout": "1"}}},
    )
    state.clusters = {n: ClusterRecord(n) for n in names}
    running = state.clusters[names[0]]  # its job runs in a queue whose controller cannot be reached now
    running.state, running.site, running.attempts, running.job_ids = ClusterState.QUEUED, "container", 1, ["4242"]
    running.job_name, running.queue = f"pilot-0badcafe-{names[0]}-1", QueueState.RUNNING
    state.save()
    res = subprocess.run(
        [*PILOT, "cancel", str(sub)], env=stub_scheduler(tmp_path, "fails"), capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 1, res.stdout + res.stderr
    assert res.stdout == "pilot cancel: cancelled 0 batch job(s)\n"
    assert res.stderr == (
        f"pilot cancel: cluster {names[0]}: job 4242 on container could not be cancelled: container: "
        "the cancel command failed for job(s) 4242\n"
    )
    after = SubmitState.load(str(sub)).clusters
    assert after[names[0]].state is ClusterState.QUEUED  # not called cancelled: it may well run on
    assert {after[n].state for n in names[1:]} == {ClusterState.CANCELLED}
    status = subprocess.run([*PILOT, "status", str(sub)], capture_output=True, text=True, timeout=60).stdout
    assert re.search(rf"^{names[0]} +running ", status, re.M), status


@pytest.mark.parametrize(
    "scancel, squeue, left",
    [
        ("exit 0", "exit 0", []),  # cancelled
        (
            'echo "scancel: error: Kill job error on job id 4242: Job/step already completing or completed" >&2; exit 1',
            'echo "slurm_load_jobs error: Invalid job id specified" >&2; exit 1',
            [],
        ),  # it had just ended: nothing is left
        ('echo "scancel: error: Unable to contact slurm controller" >&2; exit 1', "echo '4242|RUNNING|None'", ["4242"]),
    ],
)
def test_a_slurm_cancel_is_reported_failed_only_for_a_job_still_in_the_queue(
    tmp_path, monkeypatch, scancel, squeue, left
):
    from pilot.errors import SubmitError
    from pilot.submit.backend import JobRef, SchedulerBackend

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in (("scancel", scancel), ("squeue", squeue), ("sacct", "exit 1")):
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    site = SiteConfig(name="s", scheduler="slurm", partition="debug", cmd_timeout=5)
    job = JobRef("4242", str(tmp_path), "pilot-x-a-1")
    if not left:
        assert SchedulerBackend().cancel(site, [job]) == ["4242"]
        return
    with pytest.raises(SubmitError, match=r"^s: the cancel command failed for job\(s\) 4242$"):
        SchedulerBackend().cancel(site, [job])


def test_a_stopped_driver_names_what_it_leaves_in_queues(tmp_path):
    from pilot.cli.submit import _left_text
    from pilot.contracts.submitstate import ClusterState
    from pilot.submit.session import left_in_queues

    driver, queue, _ = setup(tmp_path, {"a": [], "b": [], "c": ["a"]})
    queue.submit_errors["b"] = [False]
    driver.recover()
    driver.step()  # a queued; b's submission failed: in doubt; c waits for a
    assert driver.state.clusters["b"].state is ClusterState.SUBMITTING
    queued, in_doubt = left_in_queues(driver)
    assert queued == [queue.latest("a").job_id] and in_doubt == [driver.state.clusters["b"].job_name]
    assert _left_text(queued, in_doubt, "/s") == (
        f"1 batch job(s) keep running ({queued[0]}); 1 submission(s) the scheduler did not confirm (e.g. {in_doubt[0]}): "
        "a restart or pilot cancel looks for them by name (pilot cancel /s ends them)"
    )
    assert _left_text([], [], "/s") == "no batch job of this run is in a queue"
