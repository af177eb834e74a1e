"""``clusters.yml``, the cluster DAG ``pilot plan`` writes and ``pilot submit`` and ``pilot report`` read.

The file carries ``format: N``; a reader meeting another number, or a file that
does not parse into the documented shape, stops with one line naming the file
(format in docs/submit-dir.md) instead of guessing. ``write_clusters`` writes
what ``read_clusters`` gives back.
"""

from __future__ import annotations

import enum
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pilot.errors import ConfigError
from pilot.util.atomic import write_atomic

CLUSTERS_FILE = "clusters.yml"
CLUSTERS_FORMAT = 1
MAX_CLUSTERS_BYTES = 1 << 30


class ClusterKind(str, enum.Enum):
    """How the planner made a cluster."""

    SINGLE = "single"  # one job left unclustered
    HORIZONTAL = "horizontal"
    LABEL = "label"
    WHOLE = "whole"
    DATA = "data"  # one data job of Pegasus' (create-dir, stage-in/out, registration, cleanup) as a batch job
    SUBWORKFLOW = "subworkflow"  # a pegasusWorkflow job: planned when ready, driven by a nested pilot submit


@dataclass(frozen=True)
class ClusterSpec:
    """One cluster of the plan, paths made absolute."""

    name: str
    kind: ClusterKind
    dir: str
    dag: str
    tasks: int
    ranks: int
    parents: tuple[str, ...]
    retry: int | None = None  # the largest Pegasus dagman.retry among its jobs; None: not set
    runtime: float | None = None  # sum of its tasks' runtimes (Pegasus runtime profiles); None: not all known
    critical_path: float | None = None  # longest chain of runtimes inside it; None: not all known
    # DAGMan's category of a data job (stagein, stageout, cleanup, registration) and the most clusters of
    # that category active at once (Pegasus' MAXJOBS); None: no throttle
    category: str | None = None
    maxjobs: int | None = None
    roots: int | None = None  # tasks with no parent inside the cluster (ready when it starts); None: not written
    # What its jobs ask of its batch job (their queue, project, extra directive lines); None: the site's
    queue: str | None = None
    account: str | None = None
    directives: tuple[str, ...] = ()
    # The batch job's size where the aggregator's entry (Pegasus' nodes, ppn, runtime) set it; None: sized from
    # ``ranks`` and the site config, as in plans written before these were kept
    nodes: int | None = None
    ranks_per_node: int | None = None
    walltime_minutes: float | None = None
    subworkflow: SubworkflowSpec | None = None  # only for kind subworkflow
    script: str | None = None  # its batch script, to submit by hand; None: it has none (a sub-workflow)
    run_options: tuple[str, ...] = ()  # its own pilot run options, before the DAG (its --task-files)


@dataclass(frozen=True)
class SubworkflowSpec:
    """What a pegasusWorkflow job needs to be planned and driven when it becomes ready."""

    workflow: str  # the sub-workflow's YAML file, absolute (it may not exist before a parent job writes it)
    submit_dir: str  # the nested submit directory, absolute (``<stem>_<job id>.000``, as pegasus-monitord looks for it)
    plan_args: tuple[str, ...]  # pilot plan options: the job's arguments, then what the parent's plan passes down


@dataclass(frozen=True)
class PlanInfo:
    """What the whole plan was made for, written above its clusters."""

    workflow: str  # the workflow's name
    site: str  # the site config's name
    site_file: str  # its file, absolute: the default site of a first pilot submit
    scheduler: str  # the site's scheduler, for people reading the file


def clusters_path(submit_dir: str) -> str:
    return os.path.join(submit_dir, CLUSTERS_FILE)


def is_submit_dir(path: str) -> bool:
    return os.path.isdir(path) and os.path.exists(clusters_path(path))


def plan_site_file(submit_dir: str) -> str | None:
    """The site file the plan was made for (``site_file``), the default site of a first submit."""
    data = _load(submit_dir)
    value = data.get("site_file")
    return str(value) if value else None


def write_clusters(submit_dir: str, plan: PlanInfo, clusters: Iterable[ClusterSpec]) -> None:
    """Write clusters.yml, parents listed before their children (the order ``clusters`` comes in), atomically.

    Paths are written relative to the submit directory, but a sub-workflow's
    workflow file, which is absolute (it is the workflow's, seldom inside).
    JSON scalars are YAML; PyYAML's emitter would take seconds for the tens of
    thousands of clusters of a big plan.
    """
    j = json.dumps
    lines = [
        f"format: {CLUSTERS_FORMAT}",
        f"workflow: {j(plan.workflow)}",
        f"site: {j(plan.site)}",
        f"site_file: {j(plan.site_file)}",
        f"scheduler: {j(plan.scheduler)}",
        "clusters:",
    ]
    for c in clusters:
        lines += [
            f"- name: {j(c.name)}",
            f"  kind: {j(c.kind.value)}",
            f"  dir: {j(_relative(c.dir, submit_dir))}",
            f"  dag: {j(_relative(c.dag, submit_dir))}",
            f"  script: {j(None if c.script is None else _relative(c.script, submit_dir))}",
            f"  tasks: {c.tasks}",
        ]
        if c.roots is not None:
            lines.append(f"  roots: {c.roots}")
        lines += [
            f"  ranks: {c.ranks}",
            f"  runtime: {j(c.runtime)}",
            f"  critical_path: {j(c.critical_path)}",
            f"  parents: {j(list(c.parents))}",
            f"  retry: {j(c.retry)}",
        ]
        lines += [
            f"  {key}: {j(value)}" for key, value in (("queue", c.queue), ("account", c.account)) if value is not None
        ]
        if c.directives:
            lines.append(f"  directives: {j(list(c.directives))}")
        lines += [
            f"  {key}: {j(value)}"
            for key, value in (
                ("nodes", c.nodes),
                ("ranks_per_node", c.ranks_per_node),
                ("walltime_minutes", c.walltime_minutes),
            )
            if value is not None
        ]
        if c.category is not None:
            lines += [f"  category: {j(c.category)}", f"  maxjobs: {j(c.maxjobs)}"]
        if c.run_options:
            lines.append(f"  run_options: {j(list(c.run_options))}")
        sub = c.subworkflow
        if sub is not None:
            lines += [
                "  subworkflow:",
                f"    workflow: {j(os.path.abspath(sub.workflow))}",
                f"    submit_dir: {j(_relative(sub.submit_dir, submit_dir))}",
                f"    plan_args: {j(list(sub.plan_args))}",
            ]
    write_atomic(clusters_path(submit_dir), "\n".join(lines) + "\n")


def _relative(path: str, submit_dir: str) -> str:
    """``path``, inside the submit directory, relative to it (as the reader wants it)."""
    prefix = os.path.join(submit_dir, "")
    if path.startswith(prefix):  # the usual case, without relpath's cost per cluster of a big plan
        return path[len(prefix) :]
    return os.path.relpath(path, submit_dir)


def read_clusters(submit_dir: str) -> list[ClusterSpec]:
    """The clusters of a submit directory, parents before children."""
    path = clusters_path(submit_dir)
    data = _load(submit_dir)
    out: list[ClusterSpec] = []
    seen: set[str] = set()
    for n, item in enumerate(data.get("clusters") or [], 1):
        try:
            name = str(item["name"])
            parents = tuple(str(p) for p in item["parents"])
            retry = item.get("retry")
            runtime, critical = item.get("runtime"), item.get("critical_path")
            spec = ClusterSpec(
                name=name,
                kind=ClusterKind(item["kind"]),
                dir=os.path.join(submit_dir, item["dir"]),
                dag=os.path.join(submit_dir, item["dag"]),
                tasks=int(item["tasks"]),
                ranks=int(item["ranks"]),
                parents=parents,
                retry=None if retry is None else int(retry),
                runtime=None if runtime is None else float(runtime),
                critical_path=None if critical is None else float(critical),
                category=None if item.get("category") is None else str(item["category"]),
                maxjobs=None if item.get("maxjobs") is None else int(item["maxjobs"]),
                roots=None if item.get("roots") is None else int(item["roots"]),
                queue=None if item.get("queue") is None else str(item["queue"]),
                account=None if item.get("account") is None else str(item["account"]),
                directives=tuple(str(d) for d in item.get("directives") or ()),
                nodes=None if item.get("nodes") is None else int(item["nodes"]),
                ranks_per_node=None if item.get("ranks_per_node") is None else int(item["ranks_per_node"]),
                walltime_minutes=None if item.get("walltime_minutes") is None else float(item["walltime_minutes"]),
                subworkflow=_subworkflow(submit_dir, item.get("subworkflow")),
                script=None if item.get("script") is None else os.path.join(submit_dir, item["script"]),
                run_options=tuple(str(o) for o in item.get("run_options") or ()),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(
                f"{path}: cluster #{n}: bad or missing field ({type(exc).__name__}: {exc}); re-plan with pilot plan"
            ) from None
        missing = [p for p in parents if p not in seen]
        if missing:
            raise ConfigError(
                f"{path}: cluster {name}: parent {missing[0]} is not listed before it; re-plan with pilot plan"
            )
        seen.add(name)
        out.append(spec)
    if not out:
        raise ConfigError(f"{path}: no clusters; re-plan with pilot plan")
    return out


def _subworkflow(submit_dir: str, raw: object) -> SubworkflowSpec | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise TypeError("subworkflow is not a mapping")
    sub = str(raw["submit_dir"])
    if os.path.isabs(sub) or ".." in sub.split("/"):
        raise ValueError(f"subworkflow submit_dir {sub!r} leaves the submit directory")
    return SubworkflowSpec(
        workflow=os.path.join(submit_dir, str(raw["workflow"])),
        submit_dir=os.path.join(submit_dir, sub),
        plan_args=tuple(str(a) for a in raw.get("plan_args") or ()),
    )


def _load(submit_dir: str) -> dict[str, Any]:
    """clusters.yml parsed (bounded: pilot.util.boundedload), its format and the shape of its clusters checked:
    each a mapping whose files lie inside the submit directory, whose counts are counts and times finite."""
    from pilot.util.boundedload import load_yaml

    path = clusters_path(submit_dir)
    replan = "re-plan with pilot plan"
    try:
        data = load_yaml(path, MAX_CLUSTERS_BYTES, replan)
    except FileNotFoundError:
        raise ConfigError(f"{submit_dir}: no {CLUSTERS_FILE}: is this a directory written by pilot plan?") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: not a cluster DAG (expected a mapping with 'format' and 'clusters'); {replan}")
    version = data.get("format")
    if version != CLUSTERS_FORMAT:
        raise ConfigError(
            f"{path}: cluster DAG format {repr(version)[:40]}, this pilot reads format {CLUSTERS_FORMAT}; "
            f"re-plan the workflow with this pilot (pilot plan) or use the pilot that wrote it"
        )
    clusters = data.get("clusters")
    if clusters is not None and not isinstance(clusters, list):
        raise ConfigError(f"{path}: clusters: must be a list of clusters; {replan}")
    for n, item in enumerate(clusters or [], 1):
        if not isinstance(item, dict):
            raise ConfigError(f"{path}: cluster #{n}: must be a mapping of fields; {replan}")
        for key in ("dir", "dag", "script"):
            value = item.get(key)
            if value is not None and (
                not isinstance(value, str) or os.path.isabs(value) or ".." in value.split("/") or "\0" in value
            ):
                raise ConfigError(
                    f"{path}: cluster #{n}: {key}: {str(value)[:80]!r} is not a path inside the submit "
                    f"directory (relative, without '..'); {replan}"
                )
        for key in ("tasks", "ranks", "roots", "retry", "maxjobs", "nodes", "ranks_per_node"):
            value = item.get(key)
            least = 1 if key in ("nodes", "ranks_per_node") else 0  # a batch job of no nodes is no job
            if value is not None and (type(value) is not int or not least <= value < 1 << 31):
                raise ConfigError(f"{path}: cluster #{n}: {key}: {str(value)[:40]!r} is not a count; {replan}")
        for key in ("runtime", "critical_path"):
            value = item.get(key)
            if value is not None and (type(value) not in (int, float) or not 0 <= value < 1e12):
                raise ConfigError(
                    f"{path}: cluster #{n}: {key}: {str(value)[:40]!r} is not a number of seconds; {replan}"
                )
        value = item.get("walltime_minutes")
        if value is not None and (type(value) not in (int, float) or not 0 < value < 1e9):
            raise ConfigError(
                f"{path}: cluster #{n}: walltime_minutes: {str(value)[:40]!r} is not a number of minutes; " f"{replan}"
            )
    return data
