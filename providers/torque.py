"""Torque/PBS through Parsl's TorqueProvider (also Slurm's qsub/qstat/qdel wrappers).

Its default launcher is aprun; pilot always passes SimpleLauncher. Through the
torque wrappers every finished job shows as COMPLETED, and the wrapper's qsub
adds its own -o/-e: outcomes come from the pilot's result file.
"""

from __future__ import annotations

from typing import Any

from pilot.sites import SiteConfig
from providers.common import block_kwargs, find_qstat, size, track

__all__ = ["make_provider", "size", "track", "find"]


def make_provider(site: SiteConfig) -> Any:
    from parsl.providers import TorqueProvider

    return TorqueProvider(
        account=site.account,
        queue=site.queue,
        scheduler_options=site.scheduler_options,
        worker_init=site.worker_init,
        nodes_per_block=site.nodes,
        walltime=site.walltime,
        **block_kwargs(site),
    )


find = find_qstat
