"""How large pilot jobs are, and what fits in them: the options and site keys of ``pilot submit --pilots`` made
one size per site, checked against the plan's clusters before anything is submitted.

A block larger than the site, more blocks kept than allowed, a launcher that
cannot start a cluster inside a block, or a cluster larger than a block would
each leave clusters waiting for ever: each is one line naming the value and
the fix (exit 2), before the first pilot job is submitted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pilot.contracts.clusters import ClusterSpec
from pilot.errors import ConfigError
from pilot.jobrequest import request_for
from pilot.sites import SiteConfig
from pilot.siteschema import parse_walltime
from pilot.submit import blocks
from pilot.submit.options import Options


@dataclass(frozen=True)
class PilotSettings:
    pilots: int  # at most this many blocks at once
    nodes: int
    walltime_minutes: float
    min_blocks: int
    idle_timeout: float  # seconds
    apps: int = 1  # at most this many clusters at once in one block: its pool's workers

    @classmethod
    def resolve(cls, site: SiteConfig, opts: Options, specs: Sequence[ClusterSpec] = ()) -> PilotSettings:
        """The options over the site's keys, checked against the site and the plan's clusters ``specs``."""
        where = site.path or site.name
        nodes = opts.pilot_nodes or site.pilot_nodes or site.nodes
        if nodes > site.nodes:
            raise ConfigError(
                f"{where}: pilot jobs of {nodes} nodes: the site has {site.nodes} (nodes); ask for at "
                f"most {site.nodes} (--pilot-nodes or pilot_nodes)"
            )
        walltime = opts.pilot_walltime or site.pilot_walltime or site.max_walltime or site.walltime
        minutes = parse_walltime(walltime, f"{where}: pilot_walltime")
        least = opts.pilot_min if opts.pilot_min is not None else site.pilot_min_blocks
        cap = min(opts.pilots, site.max_queued)
        if least > cap:
            raise ConfigError(
                f"{where}: {least} pilot jobs kept (--pilot-min or pilot_min_blocks) but at most {cap} "
                f"at once (--pilots {opts.pilots}, max_queued {site.max_queued}): keep fewer"
            )
        idle = opts.pilot_idle if opts.pilot_idle is not None else site.pilot_idle_timeout
        ranks = fewest_ranks(site, nodes, specs)
        return cls(cap, nodes, minutes, least, float(idle), nodes * (blocks.node_slots(site) // ranks))


def fewest_ranks(site: SiteConfig, nodes: int, specs: Sequence[ClusterSpec]) -> int:
    """The fewest ranks a node of one of the clusters runs (how many clusters a block may hold at once); a
    launcher other than srun/mpiexec, or a cluster of more nodes than a block, is refused."""
    try:
        blocks.mpi_launcher(site)
    except ValueError as exc:
        raise ConfigError(f"{site.path or site.name}: {exc}; run without --pilots there") from None
    least = blocks.node_slots(site)
    for spec in specs:
        if spec.subworkflow is None:
            req = request_for(
                site, spec.name, spec.dir, [], ranks=spec.ranks, nodes=spec.nodes, ranks_per_node=spec.ranks_per_node
            )
            if req.nodes > nodes:
                raise ConfigError(
                    f"cluster {spec.name} needs {req.nodes} nodes ({spec.ranks} ranks), pilot jobs on "
                    f"{site.name} have {nodes}: ask for larger ones (--pilot-nodes {req.nodes})"
                )
            least = min(least, req.ranks_per_node)
    return max(1, least)


def makespan(spec: ClusterSpec | None) -> float:
    """A cluster's estimated run: its longest chain of runtimes, or its summed runtime over its workers."""
    if spec is None:
        return 0.0
    workers = max(1, spec.ranks - 1)
    return max(spec.critical_path or 0.0, (spec.runtime or 0.0) / workers)
