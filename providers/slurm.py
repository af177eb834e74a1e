"""Slurm through Parsl's SlurmProvider.

``exclusive`` follows the site config (Parsl defaults to exclusive nodes, which
on a small cluster runs one pilot at a time); ``script_dir`` is set before
every submit (Parsl would otherwise write into the current directory).
"""

from __future__ import annotations

from typing import Any

from pilot.jobrequest import JobRequest
from pilot.sites import SiteConfig


def make_provider(site: SiteConfig) -> Any:
    from parsl.launchers import SimpleLauncher
    from parsl.providers import SlurmProvider

    return SlurmProvider(
        partition=site.partition,
        account=site.account,
        qos=site.qos,
        constraint=site.constraint,
        nodes_per_block=site.nodes,
        walltime=site.walltime,
        scheduler_options=site.scheduler_options,
        worker_init=site.worker_init,
        exclusive=bool(site.exclusive),
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
    from providers import job_by_name, run_query

    return job_by_name(run_query(["squeue", "-h", "-o", "%i %j"], site.cmd_timeout), job_name)
