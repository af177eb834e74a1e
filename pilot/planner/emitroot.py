"""The submit directory's own files: clusters.yml (the cluster DAG) and the root workflow's monitoring files,
whose jobs are the clusters and whose tasks are their jobs (a task table of a million rows, built a column at
a time). Written by the plan after each cluster's directory (planner.emit)."""

from __future__ import annotations

import itertools
import operator
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from operator import attrgetter
from typing import Protocol

from pilot.contracts.clusters import ClusterKind, ClusterSpec, PlanInfo, write_clusters
from pilot.contracts.rootfiles import RootJob, TaskTable, write_root_files
from pilot.errors import ConfigError
from pilot.jobrequest import pilot_args, request_for
from pilot.planner import subworkflow
from pilot.planner.batchopts import BatchOptions
from pilot.planner.dagfile import roots_of
from pilot.planner.model import DEFAULT_MAXJOBS, Catalogs, Cluster, JobType, children_of, uses_of
from pilot.planner.resolve import Template
from pilot.sites import SiteConfig


@dataclass
class Emitted:
    cluster: Cluster
    dag: str
    script: str
    ranks: int
    critical_path: float | None
    batch: BatchOptions = BatchOptions()
    roots: int | None = None  # its tasks with no parent in it (None: not counted yet)
    run_options: tuple[str, ...] = ()  # its own pilot run options (its task files: planner.taskdirs)


class Templates(Protocol):
    """Where a cluster's templates come from: the plan's (planner.resolve.Resolved), or a PMC DAG's own."""

    def of_cluster(self, cluster: Cluster) -> Iterable[Template]: ...


# A job's fields read by C-level accessors: a cluster's task table is built a column at a time (a million jobs).
_id, _name, _namespace, _version = attrgetter("id"), attrgetter("name"), attrgetter("namespace"), attrgetter("version")
_args_line, _command, _metadata = attrgetter("args_line"), attrgetter("command"), attrgetter("metadata")
_kind = attrgetter("type._value_")
_request = attrgetter("request")  # a template's

CHUNK = 4096  # jobs whose columns are read at a time: they stay in the processor's cache across the columns


def write_root_monitoring(
    submit_dir: str,
    emitted: list[Emitted],
    site: SiteConfig,
    workflow_name: str,
    planner_arguments: str,
    templates: Templates,
    properties: dict[str, str] | None = None,
    metadata: dict[str, str] | None = None,
    catalogs: Catalogs | None = None,
) -> None:
    """The submit directory as one Pegasus workflow (pilot.contracts.rootfiles): clusters are its jobs, and
    ``templates`` give each task its request (planner.resolve)."""
    jobs = []
    data_ids: set[str] = set()  # the data jobs' ids, which task_table adds to
    for e in emitted:
        c = e.cluster
        # A cluster's tasks are its compute jobs: as in a Pegasus plan, the workflow's tasks are its own jobs, and
        # a data job (create-dir, stage-in-tx, ...) is a job with no task (task_table leaves it out; its
        # invocation record names no task). A data job alone (all clusterings but whole) is a job of its own
        # type, which pegasus-statistics counts jobs by.
        alone = len(c.jobs) == 1 and c.jobs[0].type is not JobType.COMPUTE
        tasks = task_table(c, templates.of_cluster(c), data_ids)
        cdir = os.path.dirname(e.dag)
        if c.kind is ClusterKind.SUBWORKFLOW:  # driven by a nested pilot submit, as Pegasus runs a nested DAGMan
            command = [sys.executable, "-m", "pilot", "submit", subworkflow.nested_dir(c)]
        else:
            size = e.batch.size
            command = request_for(
                site,
                c.name,
                cdir,
                pilot_args(site, os.path.basename(e.dag), size.walltime_minutes, e.run_options),
                ranks=e.ranks,
                nodes=size.nodes,
                ranks_per_node=size.ranks_per_node,
                walltime_minutes=size.walltime_minutes,
            ).command()
        job = RootJob(c.name, c.site, tasks, [p.name for p in c.parents], command)
        if alone:
            job.kind, job.transformation = c.jobs[0].type.value, c.jobs[0].tx_label
        jobs.append(job)
    if data_ids:  # a task's edges to a data job (stage-out, cleanup, ...) are no edges between tasks
        for job in jobs:
            _drop_edges_to(job.tasks, data_ids)
    write_root_files(
        submit_dir,
        workflow_name,
        jobs,
        planner_arguments,
        properties=properties,
        metadata=metadata,
        workflow_hooks=catalogs.workflow_hooks if catalogs else None,
        job_hooks=job_hooks(emitted, catalogs) if catalogs else None,
    )


def task_table(cluster: Cluster, templates: Iterable[Template], data_ids: set[str] | None = None) -> TaskTable:
    """The cluster's compute jobs as tasks of the root workflow: each with its files that have metadata, and the
    outputs it registers, as Pegasus maps them; ``templates`` are the jobs' by their places (their requests).
    A data job is no task (Pegasus' tasks are the workflow's own jobs), but what it asks for is asked of the
    batch job all the same. Built a column at a time with C-level accessors, CHUNK jobs at a time (the columns
    of a chunk are read while its jobs are in the processor's cache): a cluster may hold a million.
    ``data_ids``: where the ids of the data jobs left out are added."""
    table = TaskTable()
    metadata, files = table.metadata, table.files
    table.requests.update(map(_request, templates))
    for start in range(0, len(cluster.jobs), CHUNK):
        jobs = cluster.jobs[start : start + CHUNK]
        data = list(itertools.compress(jobs, map(_command, jobs)))  # data jobs: a command of the planner's
        if data:
            if data_ids is not None:
                data_ids.update(map(_id, data))
            jobs = list(itertools.filterfalse(_command, jobs))
        base = len(table.ids)
        places = range(base, base + len(jobs))
        ids = list(map(_id, jobs))
        argvs = list(map(_args_line, jobs))
        labels = list(map(_name, jobs))  # tx_label: the name, unless a namespace or version is set
        qualified = {
            *itertools.compress(range(len(jobs)), map(_namespace, jobs)),
            *itertools.compress(range(len(jobs)), map(_version, jobs)),
        }
        for k in qualified:
            labels[k] = jobs[k].tx_label
        children = list(map(children_of, jobs))
        table.ids += ids
        table.transformations += labels
        table.argvs += argvs
        table.kinds += map(_kind, jobs)
        table.edge_parents += itertools.chain.from_iterable(map(itertools.repeat, ids, map(len, children)))
        table.edge_children += map(_id, itertools.chain.from_iterable(children))
        metadata.update((k, jobs[k - base].metadata) for k in itertools.compress(places, map(_metadata, jobs)))
        for k in itertools.compress(places, map(uses_of, jobs)):
            mapped = _mapped_files(jobs[k - base].uses)
            if mapped:
                files[k] = mapped
    return table


def _drop_edges_to(table: TaskTable, ids: set[str]) -> None:
    """The table without its edges to the jobs named in ``ids`` (tested at C speed: a table may hold millions)."""
    named, children = ids.__contains__, table.edge_children
    if any(map(named, children)):  # no list of flags: a million edges would hold one more list of that size
        table.edge_parents = list(itertools.compress(table.edge_parents, map(operator.not_, map(named, children))))
        table.edge_children = list(itertools.filterfalse(named, children))


def _mapped_files(uses) -> tuple[tuple[str, dict[str, str]], ...]:
    return tuple((u.lfn, u.metadata or {}) for u in uses if u.metadata or (u.writes and u.register))


def job_hooks(emitted: list[Emitted], catalogs: Catalogs) -> dict[str, list[tuple[str, str]]]:
    """Each batch job's shell hooks: those of its one Pegasus job and that job's transformation. monitord runs
    a job's hooks when the job (here: its cluster) starts and ends; for a job clustered with others it could
    only go by the order the tasks' records come in, which is the order they end, so that is refused."""
    out: dict[str, list[tuple[str, str]]] = {}
    tx_hooks: dict[tuple, list[tuple[str, str]]] = {}
    any_tx_hooks = any(tx.hooks for tx in catalogs.transformations.values())
    for e in emitted:
        for job in e.cluster.jobs:
            if job.command is not None or not (job.hooks or any_tx_hooks):
                continue  # a data job of the planner's own has none; most jobs have none
            mine = tx_hooks.get(job.tx_key)
            if mine is None:
                tx = catalogs.find_transformation(job.tx_key)
                mine = tx_hooks[job.tx_key] = tx.hooks if tx is not None else []
            hooks = [*job.hooks, *mine]
            if not hooks:
                continue
            if len(e.cluster.jobs) > 1:
                raise ConfigError(
                    f"{job.where}: shell hooks of a job clustered with {len(e.cluster.jobs) - 1} other "
                    f"job(s) in {e.cluster.name} cannot be told apart from theirs; give the job a "
                    "label of its own (--cluster label) or plan with --cluster none, or drop the hooks"
                )
            out[e.cluster.name] = hooks
    return out


def category_of(cluster: Cluster, properties: dict[str, str]) -> tuple[str | None, int | None]:
    """A data job's DAGMan category and its MAXJOBS (``dagman.<category>.maxjobs``, else Pegasus' default)."""
    if cluster.kind is not ClusterKind.DATA or not cluster.jobs:
        return None, None
    category = cluster.jobs[0].type.category
    if category is None:
        return None, None
    raw = properties.get(f"dagman.{category}.maxjobs")
    if raw is None:
        return category, DEFAULT_MAXJOBS.get(category)
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"pegasus.properties: dagman.{category}.maxjobs = {raw!r} is not a whole number") from None
    return category, value if value > 0 else None


def write_cluster_dag(
    submit_dir: str,
    emitted: list[Emitted],
    site: SiteConfig,
    workflow_name: str,
    retries: list[int | None] | None = None,
    properties: dict[str, str] | None = None,
    subplans: dict[int, subworkflow.SubPlan] | None = None,
) -> None:
    """clusters.yml (pilot.contracts.clusters), one entry per emitted cluster, parents first."""
    specs = []
    for k, e in enumerate(emitted):
        c, b = e.cluster, e.batch
        cdir = os.path.join(submit_dir, c.name)
        category, maxjobs = category_of(c, properties or {})
        sub = (
            subworkflow.spec_of(subplans[c.jobs[0].index], os.path.dirname(e.dag), submit_dir)
            if c.kind is ClusterKind.SUBWORKFLOW and subplans
            else None
        )
        specs.append(
            ClusterSpec(
                name=c.name,
                kind=c.kind,
                dir=cdir,
                dag=e.dag,
                tasks=len(c.jobs),
                ranks=e.ranks,
                parents=tuple(p.name for p in c.parents),
                retry=retries[k] if retries else None,
                runtime=c.runtime,
                critical_path=e.critical_path,
                category=category,
                maxjobs=maxjobs,
                roots=roots_of(c) if e.roots is None else e.roots,
                queue=b.queue,
                account=b.account,
                directives=tuple(b.directives),
                nodes=b.size.nodes,
                ranks_per_node=b.size.ranks_per_node,
                walltime_minutes=b.size.walltime_minutes,
                subworkflow=sub,
                script=e.script or None,
                run_options=e.run_options,
            )
        )
    plan = PlanInfo(
        workflow=workflow_name, site=site.name, site_file=os.path.abspath(site.path), scheduler=site.scheduler
    )
    write_clusters(submit_dir, plan, specs)
