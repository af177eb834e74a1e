"""Which cluster each data job goes in once the workflow is clustered (planner's data-job clustering; not the
runtime's matching of tasks to worker slots, pilot.runtime.slotmatch).

Pegasus adds its data jobs after clustering, to the clustered workflow:

- under ``--cluster whole`` (PMC-only mode, where pegasus-plan clusters
  nothing and writes the whole planned workflow, data jobs included, as one
  pegasus-mpi-cluster DAG) they are tasks of the one cluster, and the nodes
  that transfers are grouped by are the jobs;
- under any other clustering they are jobs of the root DAG of their own, one
  batch job each, under their Pegasus names, and the nodes are the clusters.
"""

from __future__ import annotations

from pilot.contracts.clusters import ClusterKind
from pilot.planner.clustering import check_acyclic, link, node_levels
from pilot.planner.model import Cluster, Job, Unit, Workflow, children_of, parents_of
from pilot.util import graphs


def _whole(clusters: list[Cluster]) -> bool:
    return len(clusters) == 1 and clusters[0].kind is ClusterKind.WHOLE


def transfer_units(wf: Workflow, clusters: list[Cluster]) -> list[Unit]:
    """The nodes transfers are grouped by, each with its level (roots 0)."""
    if _whole(clusters):
        level = graphs.levels(wf.jobs, parents_of, children_of)
        return [Unit(jobs=(job,), level=level[id(job)] - 1) for job in wf.jobs]
    by_node = node_levels(clusters)
    return [Unit(jobs=c.jobs, level=by_node[id(c)] - 1) for c in clusters]


def attach_data_jobs(wf: Workflow, clusters: list[Cluster], made: list[Job], site: str) -> list[Cluster]:
    """``clusters`` with the data jobs ``made`` in them (see the module doc), linked and checked."""
    if not made:
        return clusters
    if _whole(clusters):
        whole = clusters[0]
        whole.jobs = graphs.topological_order([*whole.jobs, *made], parents_of, children_of)
        return clusters
    names = {c.name for c in clusters}
    out = list(clusters)
    for job in made:
        name = job.id
        while name in names:
            name += "_data"
        names.add(name)
        out.append(Cluster(name=name, jobs=[job], kind=ClusterKind.DATA, site=site))
    node_of: list[Cluster] = [None] * (len(wf.jobs) + len(made))  # type: ignore[list-item]  # every slot is filled before the list is read
    for c in out:
        for j in c.jobs:
            node_of[j.index] = c
    link(out, node_of)
    check_acyclic(out)
    return graphs.topological_order(out, parents_of, children_of)  # parents first, as clusters.yml lists them
