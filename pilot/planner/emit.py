"""Write a submit directory: per cluster a PMC .dag, a batch script and monitoring files.

Layout (documented in docs/submit-dir.md)::

    SUBMIT/clusters.yml          the cluster DAG: clusters, their files, parents
    SUBMIT/<cluster>/<cluster>.dag            PMC DAG (task ids <txname>_<jobid>)
    SUBMIT/<cluster>/<cluster>.slurm|.pbs|.sh batch script running pilot run
    SUBMIT/<cluster>/braindump.yml            for pegasus-monitord
    SUBMIT/<cluster>/<cluster>.static.bp      only where asked for (see cluster_static_bp)

Each cluster has its own directory because a pilot writes jobstate.log and
per-task output next to its DAG, and clusters of one workflow may run at once.
The submit directory's own files (clusters.yml, the root workflow's) are planner.emitroot's.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from operator import attrgetter

from pilot.contracts.clusters import ClusterKind
from pilot.contracts.rootfiles import NOTIFY_FILE, PROPERTIES
from pilot.contracts.submitdir import write_monitoring_files
from pilot.dag.parser import read_dag
from pilot.jobrequest import pilot_args, request_for
from pilot.planner import subworkflow
from pilot.planner.batchopts import CLUSTERED, BatchOptions, batch_options
from pilot.planner.dagfile import input_file, shape, write_dag
from pilot.planner.emitroot import Emitted, write_cluster_dag, write_root_monitoring
from pilot.planner.model import Cluster
from pilot.planner.resolve import Resolved, cluster_retry
from pilot.planner.taskdirs import TaskDirPlan
from pilot.sites import SiteConfig
from pilot.util.safeopen import make_dir, open_file
from providers import script_for


@dataclass(frozen=True)
class Parallelism:
    """When emitting goes parallel: clusters are written independently, so with many of them forked workers
    (sharing the plan copy-on-write) write them at once; a few are written faster in the plan's own process."""

    from_clusters: int = 64  # the fewest clusters worth forking for
    workers: int = min(os.cpu_count() or 1, 8)


PARALLELISM = Parallelism()


@dataclass(frozen=True)
class EmitContext:
    """What writing one cluster reads, handed to the forked workers whole (inherited, never pickled)."""

    submit_dir: str
    clusters: list[Cluster]
    site: SiteConfig
    resolved: Resolved
    planner_arguments: str
    subplans: dict[int, subworkflow.SubPlan]
    static_bp: bool  # each cluster's own static.bp (cluster_static_bp)
    taskdirs: TaskDirPlan | None
    parallel: Parallelism


_runtime = attrgetter("runtime")  # a template's
Row = tuple[int, str, str, int, float | None, BatchOptions, int | None, tuple[str, ...], int | None]


def emit(
    submit_dir: str,
    clusters: list[Cluster],
    site: SiteConfig,
    resolved: Resolved,
    workflow_name: str,
    planner_arguments: str,
    subplans: dict[int, subworkflow.SubPlan] | None = None,
    static_bp: bool = False,
    taskdirs: TaskDirPlan | None = None,
    parallel: Parallelism | None = None,
) -> list[Emitted]:
    """``resolved``: the jobs' templates (planner.resolve); ``subplans``: each sub-workflow job's plan (by job
    index), written for pilot submit instead of a DAG; ``static_bp``: the user asked for each cluster's own
    static.bp (see cluster_static_bp); ``taskdirs``: the tasks run in directories of their own (nonsharedfs,
    condorio); ``parallel``: when the clusters are written by forked workers (default PARALLELISM)."""
    parallel = parallel or PARALLELISM
    os.makedirs(submit_dir, exist_ok=True)
    open_file(os.path.join(submit_dir, NOTIFY_FILE), "a").close()
    ctx = EmitContext(
        submit_dir,
        clusters,
        site,
        resolved,
        planner_arguments,
        subplans or {},
        cluster_static_bp(site, static_bp),
        taskdirs,
        parallel,
    )
    workers = parallel.workers
    if len(clusters) >= parallel.from_clusters and workers > 1 and "fork" in multiprocessing.get_all_start_methods():
        rows = _in_workers(ctx, workers)
    else:
        rows = [_emit_one(ctx, k) for k in range(len(clusters))]
    out = [
        Emitted(clusters[k], dag, script, ranks, critical, batch, roots, run_options)
        for k, dag, script, ranks, critical, batch, roots, run_options, _ in rows
    ]
    catalogs = resolved.catalogs
    write_cluster_dag(submit_dir, out, site, workflow_name, [row[-1] for row in rows], catalogs.properties, subplans)
    write_root_monitoring(
        submit_dir,
        out,
        site,
        workflow_name,
        planner_arguments,
        resolved,
        catalogs.properties,
        catalogs.workflow_metadata,
        catalogs,
    )
    return out


def _in_workers(ctx: EmitContext, workers: int) -> list[Row]:
    """Each cluster's row, the clusters dealt out to ``workers`` forked processes in turn; the first error a
    worker meets is raised here."""
    fork = multiprocessing.get_context("fork")
    started = []
    for w in range(workers):
        receive, send = fork.Pipe(duplex=False)
        process = fork.Process(target=_worker, args=(ctx, range(w, len(ctx.clusters), workers), send), daemon=True)
        process.start()
        send.close()
        started.append((process, receive))
    rows: list[Row] = []
    try:
        for process, receive in started:
            try:
                ok, got = receive.recv()
            except EOFError:  # it died before it could say why (killed, or an error it could not send)
                process.join()
                raise RuntimeError(
                    f"a worker writing the plan's clusters ended with exit code {process.exitcode}"
                ) from None
            if not ok:
                raise got
            rows += got
            process.join()
    finally:
        for process, _ in started:
            if process.is_alive():
                process.terminate()
                process.join()
    return sorted(rows)


def _worker(ctx: EmitContext, ks: range, send: Connection) -> None:
    """A forked worker: its clusters' rows, or the error that stopped it, sent back."""
    try:
        send.send((True, [_emit_one(ctx, k) for k in ks]))
    except Exception as exc:  # noqa: BLE001 - any error is the plan's: raised again in the plan's process
        send.send((False, exc))
    finally:
        send.close()


def cluster_static_bp(site: SiteConfig, asked: bool) -> bool:
    """Whether each cluster gets a static.bp of its own. Only pegasus-monitord following one cluster's own
    ``<cluster>.dag.dagman.out`` reads it: pilot run writes that file with --monitord-hack, which a site's
    pilot_options may give every batch job, or a user running a cluster by hand asks for (pilot plan
    --cluster-static-bp). pilot submit's monitord reads the root static.bp, which maps every task already:
    for a million jobs the clusters' copies would be a gigabyte that nobody reads."""
    return asked or "--monitord-hack" in pilot_args(site, "cluster.dag")


def _emit_one(ctx: EmitContext, k: int) -> Row:
    """Cluster ``k``'s directory; its row: (k, DAG, script, ranks, critical path, batch options, roots, pilot run
    options, retry)."""
    cluster = ctx.clusters[k]
    cdir = os.path.join(ctx.submit_dir, cluster.name)
    templates = ctx.resolved.of_cluster  # one at a time, each time: a cluster may hold a million jobs
    retry = cluster_retry(templates(cluster))
    if cluster.kind is ClusterKind.SUBWORKFLOW:
        dag = subworkflow.write(cdir, cluster.name, ctx.subplans[cluster.jobs[0].index])
        return k, dag, "", 0, None, BatchOptions(), None, (), retry
    width, critical, roots = shape(cluster, list(map(_runtime, templates(cluster))))
    aggregator = ctx.resolved.aggregator(cluster.site) if cluster.kind in CLUSTERED else None
    batch = batch_options(cluster, templates(cluster), aggregator, ctx.site)
    run_options = ctx.taskdirs.write(os.path.join(cdir, cluster.name + ".dag"), cluster) if ctx.taskdirs else ()
    e = write_cluster(
        ctx.submit_dir,
        cluster,
        lambda path: write_dag(path, cluster, templates(cluster), cdir),
        width,
        critical,
        ctx.site,
        ctx.planner_arguments,
        batch,
        ctx.static_bp,
        run_options,
    )
    for job in cluster.jobs:
        if job.stdin_text is not None:
            with open_file(input_file(cdir, job), "w", encoding="utf-8") as fh:
                fh.write(job.stdin_text)
    return k, e.dag, e.script, e.ranks, e.critical_path, batch, roots, run_options, retry


def write_cluster(
    submit_dir: str,
    cluster: Cluster,
    write_dag_file: Callable[[str], None],
    width: int,
    critical: float | None,
    site: SiteConfig,
    planner_arguments: str,
    batch: BatchOptions = BatchOptions(),  # noqa: B008 - BatchOptions is frozen: one shared default is safe
    static_bp: bool = False,
    run_options: tuple[str, ...] = (),
) -> Emitted:
    """The cluster's directory: its PMC DAG (``write_dag_file(path)`` writes it), batch script (its pilot run
    given ``run_options`` too) and monitoring files (its static.bp only where ``static_bp`` asks, see
    cluster_static_bp)."""
    cdir = os.path.join(submit_dir, cluster.name)
    make_dir(cdir)
    dag_file = os.path.join(cdir, cluster.name + ".dag")
    write_dag_file(dag_file)
    size = batch.size  # the aggregator's entry's, as Pegasus sizes a PMC job; else the cluster's width's
    req = request_for(
        site,
        cluster.name,
        cdir,
        pilot_args(site, cluster.name + ".dag", size.walltime_minutes, run_options),
        ranks=size.ranks or width + 1,
        queue=batch.queue,
        account=batch.account,
        directives=batch.directives,
        nodes=size.nodes,
        ranks_per_node=size.ranks_per_node,
        walltime_minutes=size.walltime_minutes,
    )
    suffix, script = script_for(site, req)
    script_file = os.path.join(cdir, cluster.name + suffix)
    with open_file(script_file, "w", encoding="utf-8") as fh:
        fh.write(script)
    os.chmod(script_file, 0o755)
    write_monitoring_files(
        read_dag(dag_file) if static_bp else None,
        dag_file,
        planner_arguments=planner_arguments,
        notify=os.path.join(os.path.abspath(submit_dir), NOTIFY_FILE),
        properties=os.path.join(os.path.abspath(submit_dir), PROPERTIES),
    )
    return Emitted(cluster, dag_file, script_file, req.ranks, critical, batch, run_options=run_options)
