"""A Pegasus.api generator script, unchanged, run through pilot with pilot pegasus-shims' directory first in PATH."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.waiting import wait_for

pytest.importorskip("Pegasus.api")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PILOT = [sys.executable, "-m", "pilot"]

# examples/make_diamond.py's workflow (a stage-in of f.a, a stage-out of f.d), ending as pegasus-isi's scripts end
DIAMOND = (EXAMPLES / "make_diamond.py").read_text().replace(
    'wf.write("diamond.yml")', ""
) + 'wf.plan(sites=["local"], output_sites=["local"], submit=True).wait(delay=1)\n'

# one job that runs long enough to be seen running and removed
SLEEPER = """
import json
from Pegasus.api import Job, Transformation, TransformationCatalog, Workflow

tc = TransformationCatalog().add_transformations(Transformation("sleep", site="local", pfn="/bin/sleep",
                                                                is_stageable=False))
wf = Workflow("sleeper").add_transformation_catalog(tc).add_jobs(Job("sleep").add_args("{seconds}"))
wf.plan(sites=["local"], submit=True)
print("STATUS", json.dumps(wf.status(json=True)["dags"]["root"]))
wf.status()
wf.remove()
"""


def _user_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a user who ran pilot pegasus-shims DIR and put DIR/bin first in PATH."""
    res = subprocess.run([*PILOT, "pegasus-shims", str(tmp_path / "shims")], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith(f"export PATH={tmp_path / 'shims' / 'bin'}:")
    path = os.pathsep.join([str(tmp_path / "shims" / "bin"), os.path.dirname(sys.executable), os.environ["PATH"]])
    return {**os.environ, "PATH": path}


def _script(tmp_path: Path, text: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    (tmp_path / "gen.py").write_text(text)
    return subprocess.run(
        [sys.executable, "gen.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )


def _run_dir(tmp_path: Path, name: str) -> Path:
    found = sorted(tmp_path.glob(f"*/pegasus/{name}/run0001"))
    assert len(found) == 1, list(tmp_path.rglob("run*"))
    return found[0]


@pytest.mark.mpi
def test_plan_submit_wait_runs_the_diamond_through_pilot(tmp_path):
    shutil.copy(EXAMPLES / "f.a", tmp_path / "f.a")
    res = _script(tmp_path, DIAMOND, _user_env(tmp_path))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "100.0% ..Success" in res.stdout  # .wait()'s progress bar reached its end condition
    sub = _run_dir(tmp_path, "diamond")
    clusters = json.loads((sub / "submit.state.json").read_text())["clusters"]
    assert clusters and all(c["state"] == "done" for c in clusters)
    staged = list(tmp_path.rglob("wf-output/f.d"))
    assert len(staged) == 1 and staged[0].read_text().splitlines()[:2] == ["1 one", "1 one"]
    assert subprocess.run([*PILOT, "status", str(sub)], capture_output=True, timeout=120).returncode == 0


@pytest.mark.mpi
def test_status_and_remove_of_a_running_workflow(tmp_path):
    # A duration no other test's sleep has: the test waits until no such sleep of the machine is left.
    seconds = f"300.{os.getpid()}"
    res = _script(tmp_path, SLEEPER.replace("{seconds}", seconds), _user_env(tmp_path))
    assert res.returncode == 0, res.stdout + res.stderr
    line = next(x for x in res.stdout.splitlines() if x.startswith("STATUS "))
    assert json.loads(line[len("STATUS ") :])["state"] == "Running"
    sub = _run_dir(tmp_path, "sleeper")
    wait_for(
        lambda: subprocess.run([*PILOT, "status", str(sub)], capture_output=True, timeout=120).returncode == 1,
        timeout=120,
        what="pilot status says the removed run ended",
    )
    wait_for(
        lambda: not any(b"/bin/sleep\x00" + seconds.encode() + b"\x00" in _cmdline(pid) for pid in _pids()),
        timeout=60,
        what="the removed run's job ended",
    )


def _pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""
