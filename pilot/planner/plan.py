"""``pilot plan``: read, resolve, cluster, emit, estimate. Library entry point for the CLI and submit."""

from __future__ import annotations

import logging
import os
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field

from pilot.contracts.clusters import ClusterKind
from pilot.contracts.rootfiles import PROPERTIES
from pilot.dag.cycles import widest_level
from pilot.dag.model import Dag, Task
from pilot.dag.parser import read_dag
from pilot.errors import ConfigError
from pilot.planner import (
    batchopts,
    catalogs,
    cleanup,
    datalayout,
    gateways,
    properties,
    reader,
    reduce,
    replaced,
    replicas,
    subworkflow,
    taskdirs,
    yamlstream,
)
from pilot.planner.clustering import DEFAULT_CLUSTER, Clusterer, parse_techniques
from pilot.planner.dataclusters import attach_data_jobs, transfer_units
from pilot.planner.emit import emit
from pilot.planner.emitroot import Emitted
from pilot.planner.estimate import PlanEstimate, estimate_plan
from pilot.planner.model import Catalogs, Cluster, Job, Workflow
from pilot.planner.profiles import ProfileResolver
from pilot.planner.resolve import Resolved, Template, job_sites
from pilot.planner.staging import DataJobs
from pilot.planner.yamlvalues import SAFE_ID
from pilot.sites import SiteConfig
from pilot.util import safetext
from pilot.util.gcpause import gc_paused
from pilot.util.safeopen import open_file
from pilot.util.tables import plural, table
from providers import scheduler_for

log = logging.getLogger("pilot.plan")


@dataclass
class PlanRequest:
    workflow: str
    site: SiteConfig
    cluster: list[str] = field(default_factory=lambda: [DEFAULT_CLUSTER])  # techniques in order; [] or ["none"]: none
    submit_dir: str | None = None
    conf: str | None = None
    tc: str | None = None
    sc: str | None = None
    force: bool = False  # write into a non-empty submit directory, and plan every job (no data reuse)
    argv: list[str] = field(default_factory=list)
    replicas: str | None = None  # replica catalog file (default: inline, then as pegasus-plan finds one)
    output_site: str | None = datalayout.DEFAULT_OUTPUT_SITE  # None: nothing staged out or registered
    cleanup: str | None = None  # none | leaf | inplace (default) | constraint
    cache: list[str] = field(default_factory=list)  # more replica files, read last (pegasus-plan --cache)
    properties: list[str] = field(default_factory=list)  # "key=value" pairs over the properties file (pegasus-plan -D)
    cluster_static_bp: bool = False  # each cluster's own static.bp too (pilot.planner.emit.cluster_static_bp)
    estimate: bool = False  # also each cluster's makespan, its real schedule simulated (pilot.planner.estimate)


@dataclass
class Plan:
    submit_dir: str
    workflow: str
    emitted: list[Emitted]
    estimate: PlanEstimate | None = None  # when the request asks for it
    pruned: int = 0  # jobs left out by data reuse
    data_jobs: int = 0  # create-dir, stage-in/out, registration, chmod and cleanup jobs added
    warnings: list[str] = field(default_factory=list)  # keys pilot replaces, a line each (planner.replaced)

    def lines(self) -> list[str]:
        """What ``pilot plan`` and ``pilot submit`` print of a plan: a row per cluster, the totals, the estimate."""
        rows = [("cluster", "kind", "tasks", "ranks", "runtime", "critical path", "after")]
        for e in self.emitted:
            c = e.cluster
            rows.append(
                (
                    c.name,
                    c.kind.value,
                    str(len(c.jobs)),
                    str(e.ranks),
                    "-" if c.runtime is None else f"{c.runtime:g} s",
                    "-" if e.critical_path is None else f"{e.critical_path:g} s",
                    ", ".join(p.name for p in c.parents[:3]) + (" ..." if len(c.parents) > 3 else "") or "-",
                )
            )
        out = table(rows[:60])
        if len(rows) > 60:  # the header and 59 clusters shown
            out.append(f"... and {plural(len(rows) - 60, 'more cluster')} (see clusters.yml)")
        tasks = sum(len(e.cluster.jobs) for e in self.emitted)
        data = f" ({self.data_jobs} of them data jobs)" if self.data_jobs else ""
        out.append(
            f"{plural(tasks, 'task')}{data} in {plural(len(self.emitted), 'cluster')}, written to {self.submit_dir}"
        )
        if self.pruned:
            out.append(
                f"{plural(self.pruned, 'job')} left out: their outputs are in the replica catalog (--force runs them)"
            )
        if self.estimate is not None:
            out += self.estimate.lines()
        return out


def load(req: PlanRequest) -> Workflow:
    """The workflow with its catalogs and properties (files given, else inline, else ./ defaults)."""
    if req.workflow.endswith(".dag"):
        return _from_pmc_dag(req.workflow)
    wf = reader.read_workflow(req.workflow)
    cat = wf.catalogs
    tc = req.tc or (None if cat.transformations else _default("transformations.yml"))
    if tc:
        catalogs.read_transformation_catalog(yamlstream.load(tc), tc, "", cat)
    sc = req.sc or (None if cat.sites else _default("sites.yml"))
    if sc:
        catalogs.read_site_catalog(yamlstream.load(sc), sc, "", cat)
    conf = req.conf or _default("pegasus.properties")
    if conf:
        cat.properties = properties.read_properties(conf)
    cat.properties = properties.with_overrides(cat.properties, req.properties)
    replicas.resolve_relative(cat, os.path.dirname(os.path.abspath(req.workflow)), req.workflow)
    rc = replicas.catalog_file(req.replicas, cat.properties)
    if rc:
        replicas.load(rc, cat)
    for extra in req.cache:
        replicas.load(extra, cat)
    return wf


def _passed_down(req: PlanRequest, submit_dir: str) -> list[str]:
    """The pilot plan options a sub-workflow inherits (as pairs) unless its own arguments name them: the
    parent's clustering, output site, cleanup, catalog files and properties (those of its submit directory)."""
    out = [
        "--cluster",
        ",".join(req.cluster) or "none",
        "--output-sites",
        req.output_site or "none",
        "--conf",
        os.path.join(submit_dir, PROPERTIES),
    ]
    if req.cleanup:
        out += ["--cleanup", req.cleanup]
    for option, value in (("--tc", req.tc), ("--sc", req.sc), ("--replicas", req.replicas)):
        if value:
            out += [option, os.path.abspath(value)]
    return out


def _default(name: str) -> str | None:
    return name if os.path.exists(name) else None


def _from_pmc_dag(path: str) -> Workflow:
    """Only for the name and path: a PMC .dag is planned as written (see _plan_pmc_dag)."""
    name = os.path.splitext(os.path.basename(path))[0]
    return Workflow(name=name if SAFE_ID.match(name) else "workflow", path=path, catalogs=Catalogs())


def plan(req: PlanRequest) -> Plan:
    """Plan with the cyclic garbage collector paused: every object made lives to the end,
    and for a million jobs the collector's rescans cost a fifth of the time. Then, if asked, the estimate."""
    try:
        with gc_paused(), replaced.collecting() as said:
            result = _plan(req)
            result.warnings = replaced.report(said)
    except OSError as exc:  # inputs are read with their own messages: this is the submit directory
        where = exc.filename or req.submit_dir or "the submit directory"
        raise ConfigError(f"{where}: cannot write the plan: {exc.strerror or exc}; choose another --dir") from None
    if req.estimate:
        result.estimate = estimate_plan(result.emitted, req.site, from_dag=req.workflow.endswith(".dag"))
    return result


def _plan(req: PlanRequest) -> Plan:
    site = req.site
    techniques = parse_techniques(req.cluster)  # a typo fails before a big workflow is read
    wf = load(req)
    submit_dir = _submit_dir(req, wf.name)
    planner_arguments = " ".join(shlex.quote(a) for a in req.argv)
    if req.workflow.endswith(".dag"):
        return _plan_pmc_dag(req, wf, submit_dir, planner_arguments)
    props = wf.catalogs.properties
    mode = cleanup.check_mode(req.cleanup)
    lay = datalayout.layout(wf.catalogs, site, submit_dir, wf.name, req.output_site)
    reused = reduce.reduce(wf, req.force)
    if reused:
        log.info(
            "data reuse: %d of %d jobs left out (%s)",
            len(reused),
            len(reused) + len(wf.jobs),
            ", ".join(j.id for j in reused[:5]) + (" ..." if len(reused) > 5 else ""),
        )
    resolver = ProfileResolver(wf.catalogs, props.get("pegasus.clusterer.label.key", "label"))
    runtime_pref = props.get("pegasus.clusterer.preference", "").lower() == "runtime"

    sites = job_sites(wf.jobs, site.handle)  # each job's site handle by its index
    gateways.check(wf.catalogs, site, {site.handle, *sites})  # the site catalog's batch system is the site config's
    resolved = Resolved(wf, resolver, site, lay.workdir, sites)  # fails early on unknown transformations, ...

    clusters: list[Cluster] = Clusterer(wf, resolved.by_index, runtime_pref).run(techniques)
    if not clusters and "whole" in techniques:  # data reuse left no job: the data jobs are still one cluster
        clusters = [Cluster(name=f"merge_{wf.name}", jobs=[], kind=ClusterKind.WHOLE, site=site.handle)]
    data = DataJobs(wf, lay, wf.catalogs, resolved.stageable(), reused, resolved.images)
    data.add(lambda: transfer_units(wf, clusters))
    cleanup.add(wf, data, lay, mode)
    clusters = attach_data_jobs(wf, clusters, data.made, lay.exec_site)
    batchopts.note_unused_keys(clusters, data.made, resolver)
    resolved.add_data(clusters, len(data.made))

    subplans = subworkflow.prepare(wf, lay, site.handle, _passed_down(req, submit_dir))
    emitted = emit(
        submit_dir,
        clusters,
        site,
        resolved,
        wf.name,
        planner_arguments,
        subplans,
        req.cluster_static_bp,
        taskdirs.plan_for(lay),
    )
    for line in node_fit_warnings(emitted, site, resolved):
        log.warning("%s", line)
    asked = next((e for e in emitted if e.batch.asked), None)
    if asked is not None and scheduler_for(site).single_host:
        log.warning(
            "cluster %s: its jobs set %s, batch options that site %s, which has no batch system, does not use",
            asked.cluster.name,
            ", ".join(asked.batch.asked),
            site.name,
        )
    return Plan(submit_dir, wf.name, emitted, pruned=len(reused), data_jobs=len(data.made))


MAX_FIT_WARNINGS = 5


def node_fit_warnings(emitted: list[Emitted], site: SiteConfig, resolved: Resolved) -> list[str]:
    """Clusters that ask for more than the site config says a node has (ranks per node against
    cores_per_node; a task's CPUs and memory, from pmc_request_cpus/cores and pmc_request_memory/memory, against
    cores_per_node/memory_per_node_mb):
    such a batch job or task may never start, which is better said now than after hours in a queue.
    A task's figures are its template's (Template.cpus_asked, memory_asked): the key and value as the job's
    profiles write them, which the warning quotes. The jobs of one template ask the same, so a cluster's
    template is looked at once."""
    from pilot.jobrequest import request_for

    cores, memory = site.cores_per_node, site.memory_per_node_mb
    if not cores and not memory:
        return []
    where = site.path or site.name
    out: list[str] = []
    for e in emitted:
        c = e.cluster
        if c.kind is ClusterKind.SUBWORKFLOW:
            continue  # no batch job of its own
        rpn = request_for(
            site, c.name, "", [], ranks=e.ranks, nodes=e.batch.size.nodes, ranks_per_node=e.batch.size.ranks_per_node
        ).ranks_per_node
        if cores and rpn > cores:
            fix = "pegasus::mpiexec's ppn" if e.batch.size.ranks_per_node else "ranks_per_node"
            out.append(
                f"cluster {c.name} asks for {rpn} MPI ranks per node, but a node of site {site.name} has {cores} "
                f"cores ({where}: cores_per_node): its batch job may never start; lower {fix}"
            )
        seen: set[int] = set()
        for job, template in zip(c.jobs, resolved.of_cluster(c)):
            if id(template) in seen:
                continue
            seen.add(id(template))
            cpus_key = template.cpus_asked or ("", "")
            mem_key = template.memory_asked or ("", "")
            cpus, mem = _number(cpus_key[0]), _number(mem_key[0])
            if cores and cpus and cpus > cores:
                out.append(
                    f"{job.where}: asks for {cpus:g} CPUs ({cpus_key[1]}), but a node of site {site.name} has {cores} "
                    f"(cores_per_node): cluster {c.name} cannot run it"
                )
                break
            if memory and mem and mem > memory:
                out.append(
                    f"{job.where}: asks for {mem:g} MB ({mem_key[1]}), but a node of site {site.name} has "
                    f"{memory} MB (memory_per_node_mb): cluster {c.name} cannot run it"
                )
                break
    if len(out) > MAX_FIT_WARNINGS:
        out = out[:MAX_FIT_WARNINGS] + [
            f"... and {len(out) - MAX_FIT_WARNINGS} more clusters that do not fit a node of {site.name}"
        ]
    return out


def _plan_pmc_dag(req: PlanRequest, wf: Workflow, submit_dir: str, planner_arguments: str) -> Plan:
    """A PMC .dag is already one cluster: copied as written, with a batch script and monitoring files."""
    from pilot.contracts.submitdir import task_id
    from pilot.dag.lexer import quote_arg
    from pilot.dag.model import NO_DAX_ID
    from pilot.dag.writer import format_dag
    from pilot.planner.emit import cluster_static_bp, write_cluster
    from pilot.planner.emitroot import write_cluster_dag, write_root_monitoring

    dag = read_dag(req.workflow)
    for line in _dag_fit(dag, req.site):
        log.warning("%s", line)
    width = widest_level(dag)
    os.makedirs(submit_dir, exist_ok=True)
    cluster = Cluster(name=wf.name, jobs=[], kind=ClusterKind.WHOLE, site=req.site.handle)
    text = format_dag(dag)

    def write_text(path: str) -> None:
        with open_file(path, "w", encoding="utf-8", errors="surrogateescape") as fh:  # bytes PMC passes through
            fh.write(text)

    emitted = write_cluster(
        submit_dir,
        cluster,
        write_text,
        width,
        None,
        req.site,
        planner_arguments,
        static_bp=cluster_static_bp(req.site, req.cluster_static_bp),
    )
    # a task whose annotation names no job of the workflow's (a data job of a cluster pilot plan wrote) is no task
    jobs = {
        t.name: Job(
            id=task_id(t),
            name=t.transformation or t.name,
            args_line=" ".join(quote_arg(a) for a in t.argv[1:]),
            command=t.argv if t.dax_id == NO_DAX_ID else None,
        )
        for t in dag
    }
    for t in dag:
        jobs[t.name].children = [jobs[c.name] for c in t.children]
    cluster.jobs = list(jobs.values())
    write_cluster_dag(submit_dir, [emitted], req.site, wf.name)
    write_root_monitoring(
        submit_dir,
        [emitted],
        req.site,
        wf.name,
        planner_arguments,
        _DagTemplates([_task_template(t, req.site.handle) for t in dag]),
    )
    return Plan(submit_dir, wf.name, [emitted])


class _DagTemplates:
    """A PMC DAG's one cluster's templates, its tasks' own (in the DAG's order, as its jobs are)."""

    def __init__(self, templates: list[Template]) -> None:
        self.templates = templates

    def of_cluster(self, cluster: Cluster) -> Iterable[Template]:  # noqa: ARG002 - the DAG is its one cluster
        return self.templates


def _task_template(task: Task, handle: str) -> Template:
    """What the task table reads of a PMC DAG's task: its request, as its TASK line says it."""
    return Template(
        handle,
        task.transformation or task.name,
        task.env,
        (max(1, task.cpus), task.memory, task.gpus),
        None,
        None,
        task.runtime,
    )


def _dag_fit(dag: Dag, site: SiteConfig) -> list[str]:
    """Tasks of a PMC .dag that ask for more than a node of the site has: pilot run would refuse them at start."""
    out = []
    for t in dag:
        for asked, has, what, key in (
            (t.cpus, site.cores_per_node, "CPUs", "cores_per_node"),
            (t.memory, site.memory_per_node_mb, "MB", "memory_per_node_mb"),
            (t.gpus, site.gpus_per_node, "GPUs", "gpus_per_node"),
        ):
            if has is not None and asked > has:
                out.append(
                    f"{dag.path or 'DAG'}:{t.line}: task {t.name} asks for {asked} {what}, but a node of site "
                    f"{site.name} has {has} ({key}): pilot run will refuse it; ask for less or use another site"
                )
    return out[:MAX_FIT_WARNINGS] + (
        [f"... and {len(out) - MAX_FIT_WARNINGS} more"] if len(out) > MAX_FIT_WARNINGS else []
    )


def _submit_dir(req: PlanRequest, name: str) -> str:
    if req.submit_dir:
        path = os.path.abspath(req.submit_dir)
        why = safetext.problem_line(path)
        if why:  # it is written into every cluster's .sub, batch script and clusters.yml
            raise ConfigError(f"pilot plan: --dir {path[:160]!r} {why}; choose another --dir")
        if os.path.exists(path) and not os.path.isdir(path):
            raise ConfigError(f"{req.submit_dir}: not a directory; choose another --dir")
        if os.path.isdir(path) and os.listdir(path) and not req.force:
            raise ConfigError(f"{req.submit_dir}: submit directory is not empty; choose another --dir or pass --force")
        return path
    for n in range(1, 10000):
        path = os.path.abspath(f"{name}.run{n:04d}")
        why = safetext.problem_line(path)
        if why:
            raise ConfigError(f"pilot plan: the submit directory {path[:160]!r} {why}; pass --dir")
        if not os.path.exists(path):
            return path
    raise ConfigError("no free submit directory name; pass --dir")


def _number(raw: str | None) -> float | None:
    """A profile's number; None when unset or not a number (the DAG writer reports those)."""
    try:
        return None if raw is None or raw == "" else float(raw)
    except ValueError:
        return None
