"""Torque/PBS through Parsl's TorqueProvider (also Slurm's qsub/qstat/qdel wrappers).

Its default launcher is aprun; pilot always passes SimpleLauncher. Through the
torque wrappers every finished job shows as COMPLETED, and the wrapper's qsub
adds its own -o/-e: outcomes come from the pilot's result file.
"""

from __future__ import annotations

from typing import Any

from pilot.jobrequest import JobRequest
from pilot.sites import SiteConfig


def make_provider(site: SiteConfig) -> Any:
    from parsl.launchers import SimpleLauncher
    from parsl.providers import TorqueProvider

    return TorqueProvider(
        account=site.account,
        queue=site.queue,
        scheduler_options=site.scheduler_options,
        worker_init=site.worker_init,
        nodes_per_block=site.nodes,
        walltime=site.walltime,
        cmd_timeout=site.cmd_timeout,
        launcher=SimpleLauncher(),
        init_blocks=0,
        min_blocks=0,
        max_blocks=max(1, site.max_queued),
    )


def size(provider: Any, req: JobRequest) -> None:
    provider.nodes_per_block = req.nodes
    provider.walltime = req.walltime


def track(provider: Any, jobs: list[tuple[str, str, str]]) -> None:
    from providers import track_generic

    track_generic(provider, jobs)


def find(site: SiteConfig, workdir: str, job_name: str) -> str | None:
    """``qstat -f`` lists Job_Name in full (plain qstat truncates names)."""
    from providers import run_query

    job_id = None
    for line in run_query(["qstat", "-f"], site.cmd_timeout).splitlines():
        if line.startswith("Job Id:"):
            job_id = line.split(":", 1)[1].strip()
        elif line.strip().startswith("Job_Name =") and line.split("=", 1)[1].strip().startswith(job_name):
            return job_id
    return None
