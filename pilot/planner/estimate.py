"""How long will a planned cluster take? The real master, run in virtual time.

The estimate is not a formula: the cluster's DAG goes through the very
``Master`` that ``pilot run`` uses (engine, scheduling policy, prefetching),
talking to simulated workers (``pilot.runtime.simulate.SimCluster``) laid
out like the batch job's ranks on the site's nodes. A simulated task takes
its expected run time: the ``#pilot runtime=<s>`` line the planner writes
from the Pegasus ``runtime`` profile (a hand-written DAG may carry it too),
plus the measured cost of dispatching one task (``DISPATCH_OVERHEAD``). The
makespan is the virtual time from the first dispatch to the last task's end,
the same span ``pilot run`` reports as its makespan; MPI start-up and queue
wait are not in it.

A cluster estimated to run longer than the pilot's ``--max-wall-time`` gets a
fix: the fewest ranks that would fit (simulated too), or the
``clusters.maxruntime`` under which runtime clustering keeps every cluster
inside the limit.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import io
import logging
import math
import os
import tempfile
from dataclasses import dataclass

from pilot.dag.cycles import widest_level
from pilot.dag.model import Dag
from pilot.dag.parser import read_dag
from pilot.errors import PilotError
from pilot.jobrequest import pilot_wall_time, request_for
from pilot.sites import SiteConfig
from pilot.siteschema import format_walltime
from pilot.util.graphs import longest_paths
from pilot.util.tables import table
from providers import scheduler_for

# Seconds a task costs beyond its own run time under pilot run: the master's
# round trip and the worker's spawn (bench/latency.py measures about 4 ms per
# dependent step).
DISPATCH_OVERHEAD = 0.004
# Memory of a node whose size the site config does not give: no request is refused.
UNKNOWN_MEMORY_MB = 1 << 40


@dataclass
class Layout:
    """Where a batch job's worker ranks sit: rank 0 (the master) takes one rank slot on the first node."""

    nodes: int
    ranks_per_node: int
    cpus: int
    memory: int
    gpus: int

    @property
    def ranks(self) -> int:
        return self.nodes * self.ranks_per_node


def layout_for(site: SiteConfig, ranks: int, min_cpus: int = 1) -> Layout:
    """The nodes and per-node resources ``pilot submit`` would request for ``ranks`` ranks on ``site``
    (given nodes enough: the "more ranks" fix may ask for more than the site config has)."""
    rpn = site.ranks_per_node or 2  # never None once the site config is made (its cores_per_node, else 2)
    if scheduler_for(site).single_host:  # one machine: more ranks are more ranks per node
        grown = dataclasses.replace(site, nodes=1, ranks_per_node=max(rpn, ranks))
    else:
        grown = dataclasses.replace(site, nodes=max(site.nodes, -(-ranks // rpn)))
    req = request_for(grown, "estimate", ".", [], ranks=ranks)
    cpus = site.cores_per_node or max(req.ranks_per_node, min_cpus)
    memory = site.memory_per_node_mb or UNKNOWN_MEMORY_MB
    return Layout(req.nodes, req.ranks_per_node, cpus, memory, site.gpus_per_node or 0)


def simulate(dag: Dag, layout: Layout, tries: int = 1, max_wall_time: float | None = None) -> float:
    """Makespan in seconds of ``dag`` (read from ``dag.path``) under the real master on simulated workers.

    Every task must have a runtime (``Task.runtime``). The master runs in a
    scratch directory, so its rescue log and result file land there; its log
    lines and summary are swallowed. With ``max_wall_time`` (minutes) the
    master reads the virtual clock for its limit, as ``pilot run
    --max-wall-time`` would: the result is then when that run would end (at
    the limit, or sooner when the tasks left cannot finish in the time left).
    """
    from pilot.runtime.master import Master
    from pilot.runtime.options import RunOptions
    from pilot.runtime.simulate import SimCluster, SimHost

    hosts = []
    for i in range(layout.nodes):
        slots = layout.ranks_per_node - (1 if i == 0 else 0)
        if slots > 0:
            hosts.append(
                SimHost(f"node{i}", layout.cpus, layout.memory, tuple(str(g) for g in range(layout.gpus)), slots)
            )
    if not hosts:
        raise ValueError("a pilot needs at least 2 ranks")
    runtimes = {t.name: (t.runtime or 0.0) + DISPATCH_OVERHEAD for t in dag}
    with tempfile.TemporaryDirectory(prefix="pilot-estimate-") as tmp:
        link = os.path.join(tmp, os.path.basename(dag.path))
        os.symlink(os.path.abspath(dag.path), link)
        cluster = SimCluster(hosts, duration=runtimes.__getitem__, timeouts=max_wall_time is not None)
        opts = RunOptions(
            dag=link,
            nolock=True,
            resource_log=False,
            per_task_stdio=True,
            skip_rescue=True,
            tries=tries,
            max_wall_time=max_wall_time,
        )
        logger = logging.getLogger("pilot.master")
        was_disabled = logger.disabled
        logger.disabled = True
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                Master(opts, cluster.transport, clock=cluster.now).run()
        except PilotError as exc:  # e.g. a task that fits no node: say it of the real DAG, not the scratch link
            raise EstimateError(str(exc).replace(link, dag.path)) from None
        finally:
            logger.disabled = was_disabled
            # The master freezes what it parsed (a run keeps its DAG to the end); here the
            # simulated DAG is garbage once the estimate is known, so let the collector have it.
            gc.unfreeze()
    return cluster.clock


class EstimateError(PilotError):
    """The simulated run could not go on (a task that fits no node of the site)."""


@dataclass
class ClusterEstimate:
    name: str
    ranks: int
    makespan: float | None  # None: not every task has a runtime, or the DAG cannot run
    limit: float  # seconds the pilot may run (its --max-wall-time)
    note: str = ""  # why there is no estimate, or how to make the cluster fit

    @property
    def too_long(self) -> bool:
        return self.makespan is not None and self.makespan > self.limit


def estimate_cluster(name: str, dag_path: str, ranks: int, site: SiteConfig) -> ClusterEstimate:
    """The cluster's makespan with ``ranks`` ranks on ``site`` and, when it exceeds the wall time, a fix."""
    limit = pilot_wall_time(site.walltime_minutes) * 60.0
    dag = read_dag(dag_path)
    missing = [t for t in dag if t.runtime is None]
    if missing:
        return ClusterEstimate(
            name, ranks, None, limit, f"{len(missing)} task(s) without a runtime, e.g. {missing[0].name}"
        )
    min_cpus = max((t.cpus for t in dag), default=1)
    try:
        makespan = simulate(dag, layout_for(site, ranks, min_cpus))
    except PilotError as exc:
        return ClusterEstimate(name, ranks, None, limit, str(exc))
    est = ClusterEstimate(name, ranks, makespan, limit)
    if est.too_long:
        est.note = _fix(dag, ranks, site, limit, min_cpus)
    return est


def _fix(dag: Dag, ranks: int, site: SiteConfig, limit: float, min_cpus: int) -> str:
    """More ranks (the fewest that fit, trying up to the widest level + 1, the most the planner
    would give it), or a clusters.maxruntime that fits."""
    longest = max(dag, key=lambda t: t.runtime or 0.0)
    if (longest.runtime or 0.0) + DISPATCH_OVERHEAD > limit:
        return (
            f"task {longest.name} alone runs {longest.runtime:g} s: ask for a longer walltime "
            f"(the site's walltime {site.walltime} leaves the pilot {limit:g} s)"
        )
    useful = widest_level(dag) + 1
    options = []
    if useful > ranks:
        best = simulate(dag, layout_for(site, useful, min_cpus))
        if best <= limit:
            lo, hi = ranks + 1, useful  # the fewest ranks that fit: hi always fits
            while lo < hi:
                mid = (lo + hi) // 2
                if simulate(dag, layout_for(site, mid, min_cpus)) <= limit:
                    hi = mid
                else:
                    lo = mid + 1
            nodes = layout_for(site, hi, min_cpus).nodes
            if scheduler_for(site).single_host:
                how = f", e.g. --set ranks_per_node={hi}"
            else:
                how = f", e.g. --set nodes={nodes}" if nodes > site.nodes else ""
            options.append(f"more ranks: {hi}{how}")
        else:
            options.append(
                f"more ranks do not suffice (with {useful}, its widest level + 1, it still takes {best:.1f} s)"
            )
    options.append(f"clusters.maxruntime <= {math.floor(limit)} with pegasus.clusterer.preference=Runtime")
    return "; ".join(options)


@dataclass
class PlanEstimate:
    site: SiteConfig
    clusters: list[ClusterEstimate]
    end_to_end: float | None  # longest chain of cluster makespans; None when a cluster has no estimate

    def lines(self) -> list[str]:
        """What ``pilot plan`` prints: per cluster the estimate with its ranks, the workflow's, the warnings."""
        known = [e for e in self.clusters if e.makespan is not None]
        if not known:
            return []
        out = ["estimated makespan (real scheduling policy in virtual time, from the tasks' runtime profiles):"]
        shown = self.clusters[:60]
        out += table(
            [
                (e.name, f"{e.ranks} ranks", f"{e.makespan:.1f} s" if e.makespan is not None else f"- ({e.note})")
                for e in shown
            ],
            indent="  ",
        )
        if len(self.clusters) > len(shown):
            out.append(f"  ... and {len(self.clusters) - len(shown)} more clusters")
        if self.end_to_end is not None:
            out.append(f"workflow end to end: {self.end_to_end:.1f} s (without queue wait and batch job start-up)")
        for e in self.clusters:
            if e.too_long:
                out.append(
                    f"warning: cluster {e.name}: estimated {e.makespan:.1f} s with {e.ranks} ranks exceeds the {e.limit:g} s "
                    f"the pilot gets on {self.site.name} (walltime {self.site.walltime} minus margin); it would be cut and resubmitted. "
                    f"Fix: {e.note}"
                )
        return out


def estimate_plan(emitted, site: SiteConfig, from_dag: bool = False) -> PlanEstimate:
    """Estimates for the clusters ``pilot plan`` wrote (``pilot.planner.emitroot.Emitted``), in cluster-DAG order.

    A cluster planned from a Pegasus workflow has runtimes for all its jobs
    exactly when the planner found a critical path; only those DAGs are read
    again. A PMC .dag given as input (``from_dag``) is read for its own
    ``#pilot runtime=`` lines.
    """
    estimates = []
    for e in emitted:
        c = e.cluster
        minutes = e.batch.size.walltime_minutes  # the aggregator's runtime, where it sets the batch job's walltime
        own = site if minutes is None else dataclasses.replace(site, walltime=format_walltime(minutes))
        if e.critical_path is None and not from_dag:
            est = ClusterEstimate(
                c.name, e.ranks, None, pilot_wall_time(own.walltime_minutes) * 60.0, "no runtime profiles"
            )
        else:
            est = estimate_cluster(c.name, e.dag, e.ranks, own)
        estimates.append(est)
    makespans = [est.makespan for est in estimates if est.makespan is not None]
    if not estimates or len(makespans) < len(estimates):
        return PlanEstimate(site, estimates, None)
    at = {e.cluster.name: k for k, e in enumerate(emitted)}
    chains = longest_paths(makespans, lambda k: [at[p.name] for p in emitted[k].cluster.parents])
    return PlanEstimate(site, estimates, max(chains.finish))
