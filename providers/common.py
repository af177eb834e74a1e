"""What the per-scheduler modules share: Parsl block settings, sizing, restart tracking, qstat lookup."""

from __future__ import annotations

import glob
import os
import subprocess
from typing import Any

from pilot.jobrequest import JobRequest
from pilot.sites import SiteConfig


def block_kwargs(site: SiteConfig) -> dict[str, Any]:
    """Settings every provider takes: pilot submits blocks itself, one per cluster, with SimpleLauncher."""
    from parsl.launchers import SimpleLauncher

    return {
        "cmd_timeout": site.cmd_timeout,
        "launcher": SimpleLauncher(),
        "init_blocks": 0,
        "min_blocks": 0,
        "max_blocks": max(1, site.max_queued),
    }


def size(provider: Any, req: JobRequest) -> None:
    provider.nodes_per_block = req.nodes
    provider.walltime = req.walltime


def track(provider: Any, jobs: list[tuple[str, str, str]]) -> None:
    """Batch providers keep a record per job, including where its stdout and stderr go."""
    from parsl.jobs.states import JobState, JobStatus

    for job_id, workdir, job_name in jobs:
        base = sorted(glob.glob(os.path.join(glob.escape(workdir), glob.escape(job_name) + ".*.stdout")))
        stdout = base[-1] if base else os.devnull
        stderr = stdout[: -len(".stdout")] + ".stderr" if base else os.devnull
        provider.resources.setdefault(job_id, {"job_id": job_id, "status": JobStatus(JobState.PENDING),
                                               "job_stdout_path": stdout, "job_stderr_path": stderr})


def run_query(cmd: list[str], timeout: int) -> str | None:
    """One place that runs scheduler commands (never through a shell); None when the command failed."""
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return res.stdout if res.returncode == 0 else None


def find_qstat(site: SiteConfig, workdir: str, job_name: str) -> str | None:
    """PBS: the id of job ``job_name``.<timestamp> ("" if none; None if qstat failed).

    ``qstat -f`` lists Job_Name in full (plain qstat truncates names).
    """
    out = run_query(["qstat", "-f"], site.cmd_timeout)
    if out is None:
        return None
    job_id = ""
    for line in out.splitlines():
        if line.startswith("Job Id:"):
            job_id = line.split(":", 1)[1].strip()
        elif line.strip().startswith("Job_Name =") and line.split("=", 1)[1].strip().startswith(job_name + "."):
            return job_id
    return ""
