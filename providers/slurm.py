"""Slurm through Parsl's SlurmProvider.

``exclusive`` follows the site config (Parsl defaults to exclusive nodes, which
on a small cluster runs one pilot at a time); ``script_dir`` is set before
every submit (Parsl would otherwise write into the current directory).
"""

from __future__ import annotations

from typing import Any

from pilot.sites import SiteConfig
from providers.common import block_kwargs, run_query, size, track

__all__ = ["make_provider", "size", "track", "find"]


def make_provider(site: SiteConfig) -> Any:
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
        **block_kwargs(site),
    )


def find(site: SiteConfig, workdir: str, job_name: str) -> str | None:
    """The id of job ``job_name``.<timestamp> (Parsl appends one): "" if not queued, None if squeue failed."""
    out = run_query(["squeue", "-h", "-o", "%i %j"], site.cmd_timeout)
    if out is None:
        return None
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[1].startswith(job_name + "."):
            return parts[0]
    return ""
