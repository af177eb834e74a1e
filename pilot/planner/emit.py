"""Write a submit directory: per cluster a PMC .dag, a batch script and monitoring files.

Layout (documented in docs/submit-dir.md)::

    SUBMIT/clusters.yml          the cluster DAG: clusters, their files, parents
    SUBMIT/<cluster>/<cluster>.dag            PMC DAG (task ids <txname>_<jobid>)
    SUBMIT/<cluster>/<cluster>.slurm|.pbs|.sh batch script running pilot run
    SUBMIT/<cluster>/braindump.yml            for pegasus-monitord
    SUBMIT/<cluster>/<cluster>.static.bp      only where asked for (see cluster_static_bp)

Each cluster has its own directory because a pilot writes jobstate.log and
per-task output next to its DAG, and clusters of one workflow may run at once.
"""

from __future__ import annotations

import itertools
import multiprocessing
import operator
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from operator import attrgetter

from pilot.contracts.clusters import ClusterKind, ClusterSpec, PlanInfo, write_clusters
from pilot.contracts.rootfiles import NOTIFY_FILE, PROPERTIES, RootJob, TaskTable, write_root_files
from pilot.contracts.submitdir import write_monitoring_files
from pilot.dag.parser import read_dag
from pilot.errors import ConfigError
from pilot.jobrequest import pilot_args, request_for
from pilot.planner import subworkflow
from pilot.planner.batchopts import BatchOptions, batch_options
from pilot.planner.dagfile import input_file, roots_of, shape, task_request, write_dag
from pilot.planner.model import DEFAULT_MAXJOBS, Catalogs, Cluster, Job, JobType, tx_key_of
from pilot.planner.profiles import ProfileResolver
from pilot.planner.taskdirs import TaskDirPlan
from pilot.sites import SiteConfig
from pilot.util.safeopen import make_dir, open_file
from providers import script_for


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


# A job's fields read by C-level accessors: a cluster's task table is built a column at a time (a million jobs).
_id, _name, _namespace, _version = attrgetter("id"), attrgetter("name"), attrgetter("namespace"), attrgetter("version")
_args_line, _command, _children = attrgetter("args_line"), attrgetter("command"), attrgetter("children")
_profiles, _metadata, _uses = attrgetter("profiles"), attrgetter("metadata"), attrgetter("uses")
_kind = attrgetter("type._value_")

CHUNK = 4096  # jobs whose columns are read at a time: they stay in the processor's cache across the columns

# Emitting is per cluster and independent: with many clusters, forked workers
# (sharing the plan copy-on-write) write them in parallel.
PARALLEL_FROM = 64
_SHARED: tuple | None = None


def emit(submit_dir: str, clusters: list[Cluster], site: SiteConfig, resolver: ProfileResolver, pfn_of,
         runtime_of, workflow_name: str, planner_arguments: str,
         subplans: dict[int, subworkflow.SubPlan] | None = None, static_bp: bool = False,
         taskdirs: TaskDirPlan | None = None) -> list[Emitted]:
    """``subplans``: each sub-workflow job's plan (by job index), written for pilot submit instead of a DAG;
    ``static_bp``: the user asked for each cluster's own static.bp (see cluster_static_bp); ``taskdirs``: the
    tasks run in directories of their own (nonsharedfs, condorio)."""
    global _SHARED
    os.makedirs(submit_dir, exist_ok=True)
    open_file(os.path.join(submit_dir, NOTIFY_FILE), "a").close()
    _SHARED = (submit_dir, clusters, site, resolver, pfn_of, runtime_of, planner_arguments, subplans or {},
               cluster_static_bp(site, static_bp), taskdirs)
    try:
        workers = min(os.cpu_count() or 1, 8)
        if len(clusters) >= PARALLEL_FROM and workers > 1 and "fork" in multiprocessing.get_all_start_methods():
            with multiprocessing.get_context("fork").Pool(workers) as pool:
                rows = pool.map(_emit_one, range(len(clusters)), chunksize=max(1, len(clusters) // (workers * 8)))
        else:
            rows = [_emit_one(k) for k in range(len(clusters))]
    finally:
        _SHARED = None
    out = [Emitted(clusters[k], dag, script, ranks, critical, batch, roots, run_options)
           for k, dag, script, ranks, critical, batch, roots, run_options in rows]
    memo: dict = {}
    write_cluster_dag(submit_dir, out, site, workflow_name, [cluster_retry(c, resolver, memo) for c in clusters],
                      resolver.catalogs.properties, subplans)
    write_root_monitoring(submit_dir, out, site, workflow_name, planner_arguments, requests_of(resolver),
                          resolver.catalogs.properties, resolver.catalogs.workflow_metadata, resolver.catalogs)
    return out


def requests_of(resolver: ProfileResolver) -> Callable[[Job, str], tuple[int, int, int]]:
    """job, site handle -> the (CPUs, memory MB, GPUs) of its task (task_request), looked up once per transformation
    and site for the jobs without profiles of their own, which share their transformation's."""
    shared: dict[tuple, tuple[int, int, int]] = {}

    def request_of(job: Job, handle: str) -> tuple[int, int, int]:
        if job.profiles:
            return task_request(resolver.pegasus(job, handle))
        key = (job.tx_key, handle)
        found = shared.get(key)
        if found is None:
            found = shared[key] = task_request(resolver.pegasus(job, handle))
        return found

    return request_of


def _retry_in(layer: Mapping[str, str]) -> str | None:
    value = None
    for key, raw in layer.items():
        if key.lower() == "retry":
            value = raw
    return value


def dagman_retry(job: Job, site: str, resolver: ProfileResolver, memo: dict | None = None) -> int | None:
    """Pegasus' ``dagman.retry`` for a job, overloaded as pegasus profiles are (transformation
    catalog > site catalog > job > properties); keys compare case-insensitively (Pegasus.api
    writes ``RETRY``). ``memo`` keeps the catalogs' answer per transformation and site."""
    cat = resolver.catalogs
    key = (job.tx_key, site)
    memo = {} if memo is None else memo
    if key not in memo:
        upper = None
        tx = cat.find_transformation(job.tx_key)
        tx_site = tx.sites.get(site) if tx is not None else None
        site_entry = cat.sites.get(site)
        for layer in (tx_site.profiles if tx_site else {}, tx.profiles if tx else {}, site_entry.profiles if site_entry else {}):
            upper = _retry_in(layer.get("dagman", {}))
            if upper is not None:
                break
        memo[key] = upper
    value = memo[key]
    if value is None:
        value = _retry_in(job.profiles.get("dagman", {})) if job.profiles else None
    if value is None:
        value = cat.properties.get("dagman.retry")
    if value is None or value == "":
        return None
    try:
        retry = int(value)
    except ValueError:
        raise ConfigError(f"{job.where}: profile dagman.retry = {value!r} is not a whole number") from None
    if retry < 0:
        raise ConfigError(f"{job.where}: profile dagman.retry = {value!r} must not be negative")
    return retry


def cluster_retry(cluster: Cluster, resolver: ProfileResolver, memo: dict | None = None) -> int | None:
    """A cluster is retried as often as the most-retried of its jobs asks (None: no job says). Jobs without
    profiles of their own ask what their transformation's first such job asks: each is asked once."""
    memo = {} if memo is None else memo
    asked: set[tuple] = set()  # transformations whose jobs without profiles were asked
    most = None
    for job in cluster.jobs:
        if not job.profiles:
            key = tx_key_of(job)
            if key in asked:
                continue
            asked.add(key)
        retry = dagman_retry(job, cluster.site, resolver, memo)
        if retry is not None and (most is None or retry > most):
            most = retry
    return most


def write_root_monitoring(submit_dir: str, emitted: list[Emitted], site: SiteConfig, workflow_name: str,
                          planner_arguments: str, request_of=lambda job, handle: (1, 0, 0),  # noqa: ARG005 - request_of's signature: one request for every job
                          properties: dict[str, str] | None = None, metadata: dict[str, str] | None = None,
                          catalogs: Catalogs | None = None) -> None:
    """The submit directory as one Pegasus workflow (pilot.contracts.rootfiles): clusters are its jobs.

    ``request_of(job, site handle)``: the (CPUs, memory MB, GPUs) of the job's task.
    """
    jobs = []
    data_ids: set[str] = set()  # the data jobs' ids, which task_table adds to
    for e in emitted:
        c = e.cluster
        # A cluster's tasks are its compute jobs: as in a Pegasus plan, the workflow's tasks are its own jobs, and
        # a data job (create-dir, stage-in-tx, ...) is a job with no task (task_table leaves it out; its
        # invocation record names no task). A data job alone (all clusterings but whole) is a job of its own
        # type, which pegasus-statistics counts jobs by.
        alone = len(c.jobs) == 1 and c.jobs[0].type is not JobType.COMPUTE
        tasks = task_table(c, request_of, data_ids)
        cdir = os.path.dirname(e.dag)
        if c.kind is ClusterKind.SUBWORKFLOW:  # driven by a nested pilot submit, as Pegasus runs a nested DAGMan
            command = [sys.executable, "-m", "pilot", "submit", subworkflow.nested_dir(c)]
        else:
            size = e.batch.size
            command = request_for(site, c.name, cdir, pilot_args(site, os.path.basename(e.dag), size.walltime_minutes,
                                                                 e.run_options),
                                  ranks=e.ranks, nodes=size.nodes, ranks_per_node=size.ranks_per_node,
                                  walltime_minutes=size.walltime_minutes).command()
        job = RootJob(c.name, c.site, tasks, [p.name for p in c.parents], command)
        if alone:
            job.kind, job.transformation = c.jobs[0].type.value, c.jobs[0].tx_label
        jobs.append(job)
    if data_ids:  # a task's edges to a data job (stage-out, cleanup, ...) are no edges between tasks
        for job in jobs:
            _drop_edges_to(job.tasks, data_ids)
    write_root_files(submit_dir, workflow_name, jobs, planner_arguments, properties=properties, metadata=metadata,
                     workflow_hooks=catalogs.workflow_hooks if catalogs else None,
                     job_hooks=job_hooks(emitted, catalogs) if catalogs else None)


def task_table(cluster: Cluster, request_of, data_ids: set[str] | None = None) -> TaskTable:
    """The cluster's compute jobs as tasks of the root workflow: each with its files that have metadata, and the
    outputs it registers, as Pegasus maps them. A data job is no task (Pegasus' tasks are the workflow's own
    jobs), but what it asks for is asked of the batch job all the same. Built a column at a time with C-level
    accessors, CHUNK jobs at a time (the columns of a chunk are read while its jobs are in the processor's
    cache): a cluster may hold a million. A job without profiles of its own asks what the others of its
    transformation ask, which is asked of one. ``data_ids``: where the ids of the data jobs left out are added."""
    table = TaskTable()
    requests, metadata, files = table.requests, table.metadata, table.files
    for start in range(0, len(cluster.jobs), CHUNK):
        jobs = cluster.jobs[start:start + CHUNK]
        data = list(itertools.compress(jobs, map(_command, jobs)))  # data jobs: a command of the planner's
        if data:
            requests.update(request_of(job, cluster.site) for job in data)
            if data_ids is not None:
                data_ids.update(map(_id, data))
            jobs = list(itertools.filterfalse(_command, jobs))
        base = len(table.ids)
        places = range(base, base + len(jobs))
        ids = list(map(_id, jobs))
        argvs = list(map(_args_line, jobs))
        labels = list(map(_name, jobs))  # tx_label: the name, unless a namespace or version is set
        qualified = {*itertools.compress(range(len(jobs)), map(_namespace, jobs)),
                     *itertools.compress(range(len(jobs)), map(_version, jobs))}
        for k in qualified:
            labels[k] = jobs[k].tx_label
        children = list(map(_children, jobs))
        table.ids += ids
        table.transformations += labels
        table.argvs += argvs
        table.kinds += map(_kind, jobs)
        table.edge_parents += itertools.chain.from_iterable(map(itertools.repeat, ids, map(len, children)))
        table.edge_children += map(_id, itertools.chain.from_iterable(children))
        own = list(itertools.compress(jobs, map(_profiles, jobs)))
        others = list(itertools.filterfalse(_profiles, jobs)) if own else jobs
        # a job of each transformation among them (by its name alone where no job has a namespace or version)
        one_each = dict(zip(map(tx_key_of if qualified else _name, others), others)).values()
        requests.update(request_of(job, cluster.site) for job in (*own, *one_each))
        metadata.update((k, jobs[k - base].metadata) for k in itertools.compress(places, map(_metadata, jobs)))
        for k in itertools.compress(places, map(_uses, jobs)):
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
                raise ConfigError(f"{job.where}: shell hooks of a job clustered with {len(e.cluster.jobs) - 1} other "
                                  f"job(s) in {e.cluster.name} cannot be told apart from theirs; give the job a "
                                  "label of its own (--cluster label) or plan with --cluster none, or drop the hooks")
            out[e.cluster.name] = hooks
    return out


def cluster_static_bp(site: SiteConfig, asked: bool) -> bool:
    """Whether each cluster gets a static.bp of its own. Only pegasus-monitord following one cluster's own
    ``<cluster>.dag.dagman.out`` reads it: pilot run writes that file with --monitord-hack, which a site's
    pilot_options may give every batch job, or a user running a cluster by hand asks for (pilot plan
    --cluster-static-bp). pilot submit's monitord reads the root static.bp, which maps every task already:
    for a million jobs the clusters' copies would be a gigabyte that nobody reads."""
    return asked or "--monitord-hack" in pilot_args(site, "cluster.dag")


def _emit_one(k: int) -> tuple[int, str, str, int, float | None, BatchOptions, int | None, tuple[str, ...]]:
    submit_dir, clusters, site, resolver, pfn_of, runtime_of, planner_arguments, subplans, static_bp, taskdirs = _SHARED  # type: ignore[misc]  # set by emit() before any worker starts
    cluster = clusters[k]
    cdir = os.path.join(submit_dir, cluster.name)
    if cluster.kind is ClusterKind.SUBWORKFLOW:
        dag = subworkflow.write(cdir, cluster.name, subplans[cluster.jobs[0].index])
        return k, dag, "", 0, None, BatchOptions(), None, ()
    runtimes = list(map(runtime_of, cluster.jobs))
    width, critical, roots = shape(cluster, runtimes)
    batch = batch_options(cluster, resolver, site)
    run_options = taskdirs.write(os.path.join(cdir, cluster.name + ".dag"), cluster) if taskdirs else ()
    e = write_cluster(submit_dir, cluster, lambda path: write_dag(path, cluster, resolver, pfn_of, runtimes, cdir),
                      width, critical, site, planner_arguments, batch, static_bp, run_options)
    for job in cluster.jobs:
        if job.stdin_text is not None:
            with open_file(input_file(cdir, job), "w", encoding="utf-8") as fh:
                fh.write(job.stdin_text)
    return k, e.dag, e.script, e.ranks, e.critical_path, batch, roots, run_options


def write_cluster(submit_dir: str, cluster: Cluster, write_dag_file: Callable[[str], None], width: int,
                  critical: float | None, site: SiteConfig, planner_arguments: str,
                  batch: BatchOptions = BatchOptions(), static_bp: bool = False,  # noqa: B008 - BatchOptions is frozen: one shared default is safe
                  run_options: tuple[str, ...] = ()) -> Emitted:
    """The cluster's directory: its PMC DAG (``write_dag_file(path)`` writes it), batch script (its pilot run
    given ``run_options`` too) and monitoring files (its static.bp only where ``static_bp`` asks, see
    cluster_static_bp)."""
    cdir = os.path.join(submit_dir, cluster.name)
    make_dir(cdir)
    dag_file = os.path.join(cdir, cluster.name + ".dag")
    write_dag_file(dag_file)
    size = batch.size  # the aggregator's entry's, as Pegasus sizes a PMC job; else the cluster's width's
    req = request_for(site, cluster.name, cdir,
                      pilot_args(site, cluster.name + ".dag", size.walltime_minutes, run_options),
                      ranks=size.ranks or width + 1, queue=batch.queue, account=batch.account,
                      directives=batch.directives, nodes=size.nodes, ranks_per_node=size.ranks_per_node,
                      walltime_minutes=size.walltime_minutes)
    suffix, script = script_for(site, req)
    script_file = os.path.join(cdir, cluster.name + suffix)
    with open_file(script_file, "w", encoding="utf-8") as fh:
        fh.write(script)
    os.chmod(script_file, 0o755)
    write_monitoring_files(read_dag(dag_file) if static_bp else None, dag_file, planner_arguments=planner_arguments,
                           notify=os.path.join(os.path.abspath(submit_dir), NOTIFY_FILE),
                           properties=os.path.join(os.path.abspath(submit_dir), PROPERTIES))
    return Emitted(cluster, dag_file, script_file, req.ranks, critical, batch, run_options=run_options)


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


def write_cluster_dag(submit_dir: str, emitted: list[Emitted], site: SiteConfig, workflow_name: str,
                      retries: list[int | None] | None = None, properties: dict[str, str] | None = None,
                      subplans: dict[int, subworkflow.SubPlan] | None = None) -> None:
    """clusters.yml (pilot.contracts.clusters), one entry per emitted cluster, parents first."""
    specs = []
    for k, e in enumerate(emitted):
        c, b = e.cluster, e.batch
        cdir = os.path.join(submit_dir, c.name)
        category, maxjobs = category_of(c, properties or {})
        sub = (subworkflow.spec_of(subplans[c.jobs[0].index], os.path.dirname(e.dag), submit_dir)
               if c.kind is ClusterKind.SUBWORKFLOW and subplans else None)
        specs.append(ClusterSpec(
            name=c.name, kind=c.kind, dir=cdir, dag=e.dag, tasks=len(c.jobs), ranks=e.ranks,
            parents=tuple(p.name for p in c.parents), retry=retries[k] if retries else None, runtime=c.runtime,
            critical_path=e.critical_path, category=category, maxjobs=maxjobs,
            roots=roots_of(c) if e.roots is None else e.roots, queue=b.queue, account=b.account,
            directives=tuple(b.directives), nodes=b.size.nodes, ranks_per_node=b.size.ranks_per_node,
            walltime_minutes=b.size.walltime_minutes, subworkflow=sub, script=e.script or None,
            run_options=e.run_options,
        ))
    plan = PlanInfo(workflow=workflow_name, site=site.name, site_file=os.path.abspath(site.path), scheduler=site.scheduler)
    write_clusters(submit_dir, plan, specs)
