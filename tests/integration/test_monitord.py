"""The real pegasus-monitord, -statistics, -analyzer and -status on a pilot run (pip pegasus-wms)."""

from __future__ import annotations

import importlib.util
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from pilot.contracts.submitdir import write_monitoring_files
from pilot.dag import read_dag
from tests.conftest import DIAMOND_DAG
from tests.mpi.helpers import run_pilot
from tests.waiting import wait_for

pytestmark = [pytest.mark.monitord, pytest.mark.mpi]

DIAMOND = DIAMOND_DAG.replace('TASK B /bin/echo "I am B"', "TASK B /bin/sh -c 'echo B-is-broken >&2; exit 3'")


def pegasus_cli(tool: str) -> list[str]:
    spec = importlib.util.find_spec("Pegasus")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("pegasus-wms is not installed (pip install 'pegasus-wms==5.1.*')")
    path = Path(list(spec.submodule_search_locations)[0]) / "cli" / f"{tool}.py"
    return [sys.executable, str(path)]


@pytest.fixture
def submit_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # monitord also writes ~/.pegasus
    (tmp_path / "home").mkdir()
    sub = tmp_path / "submit"
    sub.mkdir()
    dag = sub / "diamond.dag"
    dag.write_text(DIAMOND)
    write_monitoring_files(read_dag(str(dag)), str(dag))
    return sub


def tool(name: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*pegasus_cli(name), *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def check_results(sub: Path) -> None:
    db = sqlite3.connect(sub / "diamond.stampede.db")
    rows = dict(
        (job, (code, dur))
        for job, code, dur in db.execute(
            "select j.exec_job_id, ji.exitcode, i.remote_duration from job_instance ji "
            "join job j on j.job_id = ji.job_id join invocation i on i.job_instance_id = ji.job_instance_id"
        )
    )
    db.close()
    assert set(rows) == {"A", "B", "C"}  # D never ran: its parent B failed
    assert rows["A"][0] == 0 and rows["C"][0] == 0 and rows["B"][0] == 3 << 8  # stampede stores raw statuses
    assert all(dur is not None and dur >= 0 for _, dur in rows.values())

    stats = tool("pegasus-statistics", "-s", "all", ".", cwd=sub)
    assert stats.returncode == 0, stats.stderr
    summary = (sub / "statistics" / "summary.txt").read_text()
    jobs = next(line.split() for line in summary.splitlines() if line.startswith("Jobs"))
    assert jobs[1:5] == ["2", "1", "1", "4"]  # succeeded, failed, incomplete, total

    analyzer = tool("pegasus-analyzer", ".", cwd=sub)
    assert analyzer.returncode != 0
    assert "# jobs failed      :      1" in analyzer.stdout
    assert re.search(r"^=+B=+$", analyzer.stdout, re.M)  # the failed job's section
    assert "exitcode    : 3" in analyzer.stdout and "B-is-broken" in analyzer.stdout

    status = tool("pegasus-status", "-Q", "-l", ".", cwd=sub)
    assert status.returncode == 0, status.stderr
    row = next(line.split() for line in status.stdout.splitlines() if line.strip().endswith("diamond.dag"))
    assert row[:8] == ["1", "0", "0", "0", "0", "2", "1", "50.0"] and row[8] == "Failure"


def test_replay(submit_dir):
    res = run_pilot(["--jobstate-log", "--monitord-hack", str(submit_dir / "diamond.dag")])
    assert res.returncode == 1
    mon = tool("pegasus-monitord", "-r", "diamond.dag.dagman.out", cwd=submit_dir)
    assert mon.returncode == 0, mon.stderr
    check_results(submit_dir)


def test_live_monitord_follows_the_run(submit_dir):
    slow = DIAMOND.replace('TASK A /bin/echo "I am A"', "TASK A /bin/sh -c 'sleep 2; echo I am A'")
    (submit_dir / "diamond.dag").write_text(slow)
    monitord = subprocess.Popen(
        [*pegasus_cli("pegasus-monitord"), "diamond.dag.dagman.out"],
        cwd=submit_dir,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_for(lambda: (submit_dir / "monitord.pid").exists(), 60, "pegasus-monitord started")
        res = run_pilot(["--monitord-hack", str(submit_dir / "diamond.dag")])
        assert res.returncode == 1
        out, _ = monitord.communicate(timeout=90)
    finally:
        if monitord.poll() is None:
            monitord.kill()
    assert monitord.returncode == 0, out
    check_results(submit_dir)
