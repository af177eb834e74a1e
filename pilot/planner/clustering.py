"""Pegasus job clustering: horizontal (by size, number or runtime), label, whole.

``--cluster`` names techniques as a comma list, applied in the order given
(``label,horizontal`` is Pegasus' recursive clustering: first by label, then
what is left horizontally). Every job starts as its own node; each technique
merges nodes that are still single jobs (a cluster made by an earlier
technique is not split or re-clustered, as in Pegasus). Levels are recomputed
on the current node graph: a node's level is its longest path from a root
(roots are level 1). ``none`` leaves every job its own cluster.

- horizontal: per (level, transformation ns::name:version, site); clusters.num
  beats clusters.size; size s gives chunks of s in workflow order (the last
  may be smaller), num b gives b clusters of near-equal size; neither leaves
  the jobs single.
- horizontal with pegasus.clusterer.preference=Runtime (every clustered job
  needs a ``runtime``): clusters.maxruntime packs first-fit decreasing by
  runtime and leaves a job longer than maxruntime alone (maxruntime wins over
  num, per the Pegasus manual); clusters.num deals jobs in decreasing runtime
  onto the least loaded of b clusters. With neither, pegasus-plan
  (Horizontal.java) merges the whole group into one clustered job and logs a
  warning saying so, and so do we; as there, a group without any clustering
  factor (no clusters.size either) is not clustered, which is logged too.
  Unlike pegasus-plan, clusters.maxruntime alone is enough to cluster (the
  manual's example sets only it; Horizontal.java would also want clusters.size).
- label: one cluster per label value (profile key pegasus.clusterer.label.key,
  default "label"), jobs in topological order; unlabelled jobs stay single.
  Every cross-cluster job edge becomes a cluster edge (Pegasus drops edges into
  non-root members; we do not), and a cycle between clusters is an error
  naming the labels.
- whole: everything in one cluster (PMC-only mode: one batch job); with
  sub-workflows, one cluster per stage between them (see _whole).

A sub-workflow job (pegasusWorkflow) is never clustered: it is planned and
driven on its own when it becomes ready (pilot.planner.subworkflow).
"""

from __future__ import annotations

import graphlib
import heapq
import logging
import re
from collections.abc import Sequence
from typing import TypeVar

from pilot.contracts.clusters import ClusterKind
from pilot.errors import ConfigError
from pilot.planner.model import Cluster, Job, JobType, Workflow, children_of, parents_of, type_of
from pilot.planner.resolve import Template
from pilot.util import graphs

T = TypeVar("T")

TECHNIQUES = ("horizontal", "label", "whole")
NO_CLUSTERING = "none"
# What `pilot plan` and `pilot submit` do without --cluster: the whole workflow
# as one batch job, pegasus-mpi-cluster's PMC-only mode. Without clustering
# every job would be its own batch job, queued on its own: pegasus-plan can
# default to that because HTCondor runs short jobs cheaply, a batch queue does not.
DEFAULT_CLUSTER = "whole"

log = logging.getLogger("pilot.planner")


def parse_techniques(words: list[str]) -> list[str]:
    """``--cluster`` split at commas -> techniques in order; ``none`` (alone) means no clustering, nothing is an error."""
    techniques = [w.strip() for w in words if w.strip()]
    if not techniques:
        raise ConfigError(
            f"--cluster {','.join(words)!r}: name a technique (whole, label, horizontal, a comma list of "
            "them) or none"
        )
    if techniques == [NO_CLUSTERING]:
        return []
    spec = ",".join(techniques)
    for t in techniques:
        if t == NO_CLUSTERING:
            raise ConfigError(f"--cluster {spec}: none (no clustering) stands alone; drop it or the other techniques")
        if t not in TECHNIQUES:
            raise ConfigError(
                f"--cluster {spec}: unknown clustering technique {t!r}; "
                "use whole, label, horizontal, a comma list of them, or none"
            )
    return techniques


class Clusterer:
    """Clusters a workflow's jobs by what their templates (planner.resolve, by Job.index) say: site, label,
    runtime, clusters.num, clusters.size and clusters.maxruntime; it reads no profile itself."""

    def __init__(self, wf: Workflow, templates: Sequence[Template], runtime_preference: bool) -> None:
        self.wf = wf
        self.templates = templates
        self.runtime_pref = runtime_preference
        self.topo = topological_positions(wf)
        self._names: set[str] = set()

    # -- driver ---------------------------------------------------------------
    def run(self, techniques: list[str]) -> list[Cluster]:
        """Cluster with ``techniques`` (as parse_techniques gives them), in order."""
        if techniques == ["whole"] and JobType.DAX not in map(type_of, self.wf.jobs):
            return self._whole_only()
        nodes = [
            Cluster(name=j.task_id, jobs=[j], kind=ClusterKind.SUBWORKFLOW, site=self.templates[j.index].site)
            if j.type is JobType.DAX
            else Cluster(name=f"{j.name}_{j.id}", jobs=[j], kind=ClusterKind.SINGLE, site=self.templates[j.index].site)
            for j in self.wf.jobs
        ]
        self._names = {n.name for n in nodes}
        if len(self._names) < len(nodes):  # jobs a_b + c and a + b_c: one directory, one DAG for two clusters
            self._names = set()
            for n in nodes:
                n.name = self._unique(n.name)  # the second a_b_c becomes a_b_c_2, as merge_ clusters are counted
        for technique in techniques:
            node_of = self._index(nodes)
            link(nodes, node_of)
            if technique == "horizontal":
                groups = self._horizontal(nodes)
            elif technique == "label":
                groups = self._label(nodes)
            else:
                groups = self._whole(nodes)
            nodes = self._merge(nodes, groups)
        link(nodes, self._index(nodes))
        check_acyclic(nodes)
        for n in nodes:
            runtimes = [self._runtime(j) for j in n.jobs]
            known = [r for r in runtimes if r is not None]
            n.runtime = sum(known) if known else None
        return nodes

    def _whole_only(self) -> list[Cluster]:
        """``--cluster whole`` without sub-workflows: what run() makes of it (one cluster of every job in
        topological order, named as _unique would), without a node per job first, which for a million jobs
        costs gigabytes."""
        jobs = self.wf.jobs
        if not jobs:
            return []
        ordered: list[Job] = [None] * len(jobs)  # type: ignore[list-item]  # every slot is filled before the list is read
        for job in jobs:
            ordered[self.topo[job.index]] = job
        base = f"merge_{self.wf.name}"
        near = {n for n in {j.name for j in jobs} if base.startswith(n) or n.startswith(base)}
        self._names = {f"{j.name}_{j.id}" for j in jobs if j.name in near}  # the single nodes' names it could meet
        cluster = Cluster(
            name=self._unique(base),
            jobs=ordered,
            kind=ClusterKind.WHOLE,
            site=self.templates[jobs[0].index].site,
        )
        known = [r for r in map(self._runtime, ordered) if r is not None]
        cluster.runtime = sum(known) if known else None
        return [cluster]

    def _runtime(self, job: Job) -> float | None:
        """The job's runtime profile (seconds), or None."""
        return self.templates[job.index].runtime

    def _index(self, nodes: list[Cluster]) -> list[Cluster]:
        node_of: list[Cluster] = [None] * len(self.wf.jobs)  # type: ignore[list-item]  # every slot is filled before the list is read
        for n in nodes:
            for j in n.jobs:
                node_of[j.index] = n
        return node_of

    def _unique(self, name: str) -> str:
        base, k = name, 1
        while name in self._names:
            k += 1
            name = f"{base}_{k}"
        self._names.add(name)
        return name

    def _merge(self, nodes: list[Cluster], groups: list[tuple[ClusterKind, str, list[Cluster]]]) -> list[Cluster]:
        merged: dict[int, Cluster] = {}
        replaced: set[int] = set()
        for kind, name, members in groups:
            if (kind is not ClusterKind.WHOLE and len(members) < 2) or not members:
                continue
            jobs = [j for m in members for j in m.jobs]
            if kind in (ClusterKind.LABEL, ClusterKind.WHOLE):
                jobs.sort(key=lambda j: self.topo[j.index])
            sites = {m.site for m in members}
            if len(sites) > 1 and kind is ClusterKind.LABEL:
                raise ConfigError(
                    f"{self.wf.path}: jobs of label {name[len('merge_'):]!r} are on sites {', '.join(sorted(sites))}; a label cluster runs on one site"
                )
            cluster = Cluster(name=self._unique(name), jobs=jobs, kind=kind, site=members[0].site)
            merged[id(members[0])] = cluster
            replaced.update(id(m) for m in members)
        out = []
        for n in nodes:
            if id(n) in merged:
                out.append(merged[id(n)])
            elif id(n) not in replaced:
                out.append(n)
        return out

    # -- horizontal -----------------------------------------------------------
    def _horizontal(self, nodes: list[Cluster]) -> list[tuple[ClusterKind, str, list[Cluster]]]:
        levels = node_levels(nodes)
        groups: dict[tuple, list[Cluster]] = {}
        for n in nodes:
            if n.kind is not ClusterKind.SINGLE:
                continue
            job = n.jobs[0]
            groups.setdefault((levels[id(n)], job.tx_key, n.site), []).append(n)
        out: list[tuple[ClusterKind, str, list[Cluster]]] = []
        for (level, _, site), members in groups.items():
            job = members[0].jobs[0]
            template = self.templates[job.index]
            name = f"merge_{job.name}_L{level}"
            if self.runtime_pref:
                chunks = self._by_runtime(members, template, job, level, site)
            else:
                chunks = split_by_count(members, template.clusters_num, template.clusters_size)
            out += [(ClusterKind.HORIZONTAL, f"{name}_{k}", chunk) for k, chunk in enumerate(chunks, 1)]
        return out

    def _by_runtime(
        self, members: list[Cluster], template: Template, job: Job, level: int, site: str
    ) -> list[list[Cluster]]:
        """``members``' jobs by runtime, clusters.maxruntime and clusters.num as the first job's template says."""
        maxruntime, num = template.clusters_maxruntime, template.clusters_num
        if len(members) < 2:
            return [members]
        if maxruntime is None and num is None:
            what = f"{self.wf.path}: runtime clustering of the {len(members)} {job.tx_label} jobs on level {level}, site {site}"
            if (template.clusters_size or 1) <= 1:
                log.info("%s: no clusters.maxruntime, clusters.num or clusters.size: not clustered", what)
                return [[m] for m in members]
            log.warning(
                "%s: neither clusters.maxruntime nor clusters.num is set, so they become one clustered job, "
                "as pegasus-plan does; set one of them to split it",
                what,
            )
            num = 1
        timed = []
        for m in members:
            rt = self._runtime(m.jobs[0])
            if rt is None:
                raise ConfigError(
                    f"{m.jobs[0].where}: runtime clustering (pegasus.clusterer.preference=Runtime) needs the "
                    f"pegasus profile 'runtime' (seconds) on every job of {job.tx_label}"
                )
            timed.append((rt, m))
        timed.sort(key=lambda p: -p[0])  # stable: equal runtimes keep workflow order
        if maxruntime is not None:
            return first_fit_decreasing(timed, maxruntime)
        return balanced(timed, 1 if num is None else num)  # never None here: without maxruntime, num is set above

    # -- whole ----------------------------------------------------------------
    def _whole(self, nodes: list[Cluster]) -> list[tuple[ClusterKind, str, list[Cluster]]]:
        """Everything in one cluster; with sub-workflows, which run as jobs of their own, one cluster per stage:
        a node's stage counts the sub-workflows on its longest path from a root, so every edge goes to the same
        stage, into a sub-workflow of that stage, or out of one to a later stage, and no cycle can form."""
        if not any(n.kind is ClusterKind.SUBWORKFLOW for n in nodes):
            return [(ClusterKind.WHOLE, f"merge_{self.wf.name}", nodes)]
        order = graphs.topological_order(nodes, parents_of, children_of)
        at = {id(n): k for k, n in enumerate(order)}
        subs = [int(n.kind is ClusterKind.SUBWORKFLOW) for n in order]
        paths = graphs.longest_paths(subs, lambda k: [at[id(p)] for p in order[k].parents])
        stage = {id(n): int(paths.finish[k]) - subs[k] for k, n in enumerate(order)}  # the sub-workflows before it
        groups: dict[int, list[Cluster]] = {}
        for n in nodes:
            if n.kind is not ClusterKind.SUBWORKFLOW:
                groups.setdefault(stage[id(n)], []).append(n)
        return [(ClusterKind.WHOLE, f"merge_{self.wf.name}", members) for _, members in sorted(groups.items())]

    # -- label ----------------------------------------------------------------
    def _label(self, nodes: list[Cluster]) -> list[tuple[ClusterKind, str, list[Cluster]]]:
        groups: dict[str, list[Cluster]] = {}
        for n in nodes:
            if n.kind is not ClusterKind.SINGLE:
                continue
            label = self.templates[n.jobs[0].index].cluster_label
            if label:
                groups.setdefault(label, []).append(n)
        return [(ClusterKind.LABEL, f"merge_{safe_name(label)}", members) for label, members in groups.items()]


def split_by_count(members: list, num: int | None, size: int | None) -> list[list]:
    """clusters.num beats clusters.size; neither means no clustering."""
    n = len(members)
    if num is not None:
        num = min(num, n)
        q, r = divmod(n, num)
        out, start = [], 0
        for k in range(num):
            end = start + q + (1 if k < r else 0)
            out.append(members[start:end])
            start = end
        return out
    if size is not None and size > 1:
        return [members[i : i + size] for i in range(0, n, size)]
    return [[m] for m in members]


def first_fit_decreasing(timed: Sequence[tuple[float, T]], maxruntime: float) -> list[list[T]]:
    bins: list[list[T]] = []
    loads: list[float] = []
    alone: list[list[T]] = []
    for rt, m in timed:
        if rt > maxruntime:
            alone.append([m])
            continue
        for k, load in enumerate(loads):
            if load + rt <= maxruntime:
                bins[k].append(m)
                loads[k] += rt
                break
        else:
            bins.append([m])
            loads.append(rt)
    return bins + alone


def balanced(timed: Sequence[tuple[float, T]], num: int) -> list[list[T]]:
    num = min(num, len(timed))
    bins: list[list[T]] = [[] for _ in range(num)]
    heap = [(0.0, k) for k in range(num)]
    for rt, m in timed:
        load, k = heapq.heappop(heap)
        bins[k].append(m)
        heapq.heappush(heap, (load + rt, k))
    return [b for b in bins if b]


def safe_name(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.+-]", "_", label) or "label"


def link(nodes: list[Cluster], node_of: list[Cluster]) -> None:
    """Node edges from every cross-node job edge."""
    for n in nodes:
        n.parents, n.children = [], []
    for n in nodes:
        jobs = n.jobs
        if len(jobs) == 1:
            targets = {node_of[c.index] for c in jobs[0].children}
        else:
            targets = {node_of[c.index] for j in jobs for c in j.children}
        targets.discard(n)
        if targets:
            children = sorted(targets, key=lambda t: t.jobs[0].index)
            n.children = children
            for t in children:
                t.parents.append(n)


def node_levels(nodes: list[Cluster]) -> dict[int, int]:
    """Longest path from a root, roots at level 1 (keyed by ``id``)."""
    return graphs.levels(nodes, parents_of, children_of)


def check_acyclic(nodes: list[Cluster]) -> None:
    try:
        graphs.topological_order(nodes, parents_of, children_of)
    except graphlib.CycleError as exc:
        names = [c.name[len("merge_") :] if c.kind is ClusterKind.LABEL else c.name for c in exc.args[1]]
        raise ConfigError(
            "clusters form a cycle: "
            + " -> ".join(names)
            + "; jobs outside a label sit between jobs of that label: give them the label too, or split the label"
        ) from None


def topological_positions(wf: Workflow) -> list[int]:
    """Position of each job in a topological order (ties in workflow order); a cycle is an error naming its jobs."""
    try:
        order = graphs.topological_order(wf.jobs, parents_of, children_of)
    except graphlib.CycleError as exc:
        raise ConfigError(
            f"{wf.path}: jobDependencies form a cycle: {' -> '.join(j.id for j in exc.args[1])}"
        ) from None
    pos = [-1] * len(wf.jobs)
    for k, job in enumerate(order):
        pos[job.index] = k
    return pos
