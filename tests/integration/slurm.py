"""Helpers for tests against the real single-node Slurm (containers/start-slurm.sh)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.waiting import wait_for


def require_slurm() -> None:
    if shutil.which("sbatch") is None:
        pytest.skip("no Slurm here: start it with containers/start-slurm.sh")
    ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True)
    if "UP" not in ping.stdout:
        pytest.skip("slurmctld is not running: containers/start-slurm.sh")


def sbatch(script: str, *extra: str, cwd: str | None = None) -> str:
    res = subprocess.run(["sbatch", "--parsable", *extra, script], capture_output=True, text=True, check=True, cwd=cwd)
    return res.stdout.strip().split(";")[0]


def wait_gone(job_ids: list[str], timeout: float = 180) -> None:
    """Wait until Slurm no longer lists the jobs; those still there after ``timeout`` s are cancelled, and the test fails."""

    def gone() -> bool:
        out = subprocess.run(
            ["squeue", "-h", "-o", "%i", "-j", ",".join(job_ids)], capture_output=True, text=True
        ).stdout
        return not out.split()

    try:
        wait_for(gone, timeout, f"Slurm jobs {job_ids} to finish", every=0.5)
    except AssertionError:
        subprocess.run(["scancel", *job_ids])
        raise
