"""``clusters.yml``, the cluster DAG ``pilot plan`` writes and ``pilot submit`` drives.

The file carries ``format: N``; a reader meeting another number, or a file that
does not parse into the documented shape, stops with one line naming the file
(format in docs/submit-dir.md) instead of guessing.
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass

import yaml

from pilot.errors import ConfigError
from pilot.yamlerrors import yaml_error

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

    def rel(self, path: str) -> str:
        """``path`` relative to the submit directory, for messages."""
        return os.path.relpath(path, os.path.dirname(self.dir))


def clusters_path(submit_dir: str) -> str:
    return os.path.join(submit_dir, CLUSTERS_FILE)


def is_submit_dir(path: str) -> bool:
    return os.path.isdir(path) and os.path.exists(clusters_path(path))


def plan_site_file(submit_dir: str) -> str | None:
    """The site file the plan was made for (``site_file``), the default site of a first submit."""
    data = _load(submit_dir)
    value = data.get("site_file")
    return str(value) if value else None


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
                name=name, kind=ClusterKind(item["kind"]), dir=os.path.join(submit_dir, item["dir"]),
                dag=os.path.join(submit_dir, item["dag"]), tasks=int(item["tasks"]), ranks=int(item["ranks"]),
                parents=parents, retry=None if retry is None else int(retry),
                runtime=None if runtime is None else float(runtime), critical_path=None if critical is None else float(critical),
                category=None if item.get("category") is None else str(item["category"]),
                maxjobs=None if item.get("maxjobs") is None else int(item["maxjobs"]),
                roots=None if item.get("roots") is None else int(item["roots"]),
                queue=None if item.get("queue") is None else str(item["queue"]),
                account=None if item.get("account") is None else str(item["account"]),
                directives=tuple(str(d) for d in item.get("directives") or ()),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"{path}: cluster #{n}: bad or missing field ({type(exc).__name__}: {exc}); re-plan with pilot plan") from None
        missing = [p for p in parents if p not in seen]
        if missing:
            raise ConfigError(f"{path}: cluster {name}: parent {missing[0]} is not listed before it; re-plan with pilot plan")
        seen.add(name)
        out.append(spec)
    if not out:
        raise ConfigError(f"{path}: no clusters; re-plan with pilot plan")
    return out


def _load(submit_dir: str) -> dict:
    """clusters.yml parsed, its format checked."""
    path = clusters_path(submit_dir)
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read(MAX_CLUSTERS_BYTES)
    except FileNotFoundError:
        raise ConfigError(f"{submit_dir}: no {CLUSTERS_FILE}: is this a directory written by pilot plan?") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise yaml_error(path, exc) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: not a cluster DAG (expected a mapping with 'format' and 'clusters'); re-plan with pilot plan")
    version = data.get("format")
    if version != CLUSTERS_FORMAT:
        raise ConfigError(f"{path}: cluster DAG format {version!r}, this pilot reads format {CLUSTERS_FORMAT}; "
                          f"re-plan the workflow with this pilot (pilot plan) or use the pilot that wrote it")
    return data
