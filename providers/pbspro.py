"""PBS Pro through Parsl's PBSProProvider (ALCF's Polaris and Aurora).

``select`` asks for ``nodes`` chunks of ``mpiprocs`` ranks each, as the
planner's script does. Parsl's status call uses ``qstat -x -f -F json``, which
PBS Pro has but Slurm's torque wrappers do not (there it stays PENDING): the
PBS path is tested end to end through TorqueProvider and the wrappers, and
``pilot submit`` decides a cluster's outcome from the pilot's result file in
any case.
"""

from __future__ import annotations

from typing import Any

from pilot.jobrequest import JobRequest
from pilot.sites import SiteConfig


def make_provider(site: SiteConfig) -> Any:
    from parsl.launchers import SimpleLauncher
    from parsl.providers import PBSProProvider

    return PBSProProvider(
        account=site.account,
        queue=site.queue,
        scheduler_options=site.scheduler_options,
        select_options=f"mpiprocs={site.ranks_per_node}",
        worker_init=site.worker_init,
        nodes_per_block=site.nodes,
        cpus_per_node=site.cores_per_node or site.ranks_per_node,
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
    provider.select_options = f"mpiprocs={req.ranks_per_node}"


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
