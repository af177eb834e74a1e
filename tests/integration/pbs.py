"""Helpers for tests against the real single-node OpenPBS (bash .ci/pbs/start-pbs.sh)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

PBS_BIN = "/opt/pbs/bin"


def pbs_env() -> dict[str, str]:
    """This process's environment with OpenPBS's clients before Slurm's qsub/qstat wrappers."""
    env = dict(os.environ)
    env["PATH"] = f"{PBS_BIN}:{env.get('PATH', '')}"
    return env


@pytest.fixture
def pbs(monkeypatch):
    """Skip without a running OpenPBS; put its clients first in PATH for this test and its children."""
    if not os.path.exists(os.path.join(PBS_BIN, "qsub")):
        pytest.skip("no OpenPBS here: start it with bash .ci/pbs/start-pbs.sh")
    monkeypatch.setenv("PATH", pbs_env()["PATH"])
    ping = subprocess.run(["qstat", "-B"], capture_output=True, text=True)
    if ping.returncode != 0:
        pytest.skip(f"the PBS server does not answer: {ping.stderr.strip()}")
    assert shutil.which("qsub") == os.path.join(PBS_BIN, "qsub")


def ncpus() -> int:
    """CPUs of the PBS node (the machine's real count)."""
    out = subprocess.run(["pbsnodes", "-a", "-F", "json"], capture_output=True, text=True, check=True).stdout
    nodes = json.loads(out)["nodes"]
    return min(int(n["resources_available"]["ncpus"]) for n in nodes.values())


def live(job_ids: set[str]) -> list[str]:
    """Those of ``job_ids`` that qstat still lists as not finished."""
    if not job_ids:
        return []
    out = subprocess.run(["qstat", "-x", "-f", "-F", "json", *sorted(job_ids)], capture_output=True, text=True).stdout
    jobs = json.loads(out).get("Jobs", {}) if out.strip() else {}
    return [j for j, v in jobs.items() if v.get("job_state") not in ("F", "X")]
