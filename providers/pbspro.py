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
from providers.common import block_kwargs, find_qstat, track

__all__ = ["make_provider", "size", "track", "find"]


def make_provider(site: SiteConfig) -> Any:
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
        **block_kwargs(site),
    )


def size(provider: Any, req: JobRequest) -> None:
    provider.nodes_per_block = req.nodes
    provider.walltime = req.walltime
    provider.select_options = f"mpiprocs={req.ranks_per_node}"


find = find_qstat
