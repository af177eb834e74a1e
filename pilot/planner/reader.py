"""Read Pegasus 5 YAML: the abstract workflow, transformation and site catalogs, properties.

Input is what the real Pegasus.api writes (``pegasus: '5.0'``, ``jobs``,
``jobDependencies``, inline or separate ``transformationCatalog`` and
``siteCatalog``). Errors name the file and the YAML path (``jobs[3].id``).
Only ``yaml.safe_load`` (the C loader when PyYAML has it, for speed).
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from pilot.errors import ConfigError
from pilot.yamlerrors import yaml_error
from pilot.planner import yamlstream
from pilot.planner.model import Catalogs, Job, Profiles, Site, Transformation, TransformationSite, Workflow

# Job ids and transformation names become task ids, file and directory names
# and words in batch scripts: plain characters only, nothing a shell reads.
SAFE_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*\Z")
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(path: str) -> Any:
    """A whole (small) YAML file: catalogs."""
    try:
        with open(path, "rb") as fh:
            return yaml.load(fh, Loader=_Loader)  # noqa: S506 - a SafeLoader
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise yaml_error(path, exc) from None


def _err(path: str, ypath: str, message: str) -> ConfigError:
    return ConfigError(f"{path}: {ypath}: {message}")


def _str(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def read_profiles(raw: Any, path: str, ypath: str) -> Profiles:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise _err(path, ypath, "profiles must be a mapping of namespace to {key: value}")
    out: Profiles = {}
    for ns, values in raw.items():
        if not isinstance(values, dict):
            raise _err(path, f"{ypath}.{ns}", "must be a mapping of key to value")
        out[str(ns).lower()] = {str(k): _str(v) for k, v in values.items()}
    return out


def read_workflow(path: str) -> Workflow:
    wf = Workflow(name="workflow", path=path)
    by_id: dict[str, Job] = {}
    deps: list[tuple[int, Any]] = []

    def on_job(raw: Any, i: int) -> None:
        job = _read_job(raw, path, f"jobs[{i}]", i)
        if job.id in by_id:
            raise _err(path, f"jobs[{i}].id", f"duplicate job id {job.id!r} (first at {by_id[job.id].where})")
        by_id[job.id] = job
        wf.jobs.append(job)

    data = yamlstream.load_streaming(path, {"jobs": on_job, "jobDependencies": lambda raw, i: deps.append((i, raw))})
    if "jobs" not in data:
        raise _err(path, "(top)", "not a Pegasus 5 workflow: no 'jobs' (write it with Pegasus.api Workflow.write())")
    if not isinstance(data["jobs"], int):
        raise _err(path, "jobs", "must be a list")
    wf.name = str(data.get("name") or "workflow")
    if not SAFE_ID.match(wf.name):
        raise _err(path, "name", f"{wf.name!r}: use letters, digits, '_', '.', '+', '-' only")
    for i, dep in deps:
        _add_dependency(dep, path, f"jobDependencies[{i}]", by_id)
    catalogs = wf.catalogs
    if "transformationCatalog" in data:
        read_transformation_catalog(data["transformationCatalog"], path, "transformationCatalog", catalogs)
    if "siteCatalog" in data:
        read_site_catalog(data["siteCatalog"], path, "siteCatalog", catalogs)
    return wf


def _add_dependency(dep: Any, path: str, ypath: str, by_id: dict[str, Job]) -> None:
    if not isinstance(dep, dict) or "id" not in dep:
        raise _err(path, ypath, "expected {id: JOB, children: [JOB, ...]}")
    parent = by_id.get(str(dep["id"]))
    if parent is None:
        raise _err(path, f"{ypath}.id", f"unknown job {dep['id']!r}")
    for k, child_id in enumerate(dep.get("children") or []):
        child = by_id.get(str(child_id))
        if child is None:
            raise _err(path, f"{ypath}.children[{k}]", f"unknown job {child_id!r}")
        if child is parent:
            raise _err(path, f"{ypath}.children[{k}]", f"job {child.id} depends on itself")
        known = (child in parent.children) if len(parent.children) < len(child.parents) else (parent in child.parents)
        if not known:  # a repeated dependency is one edge
            parent.children.append(child)
            child.parents.append(parent)


def _read_job(raw: Any, path: str, ypath: str, index: int) -> Job:
    if not isinstance(raw, dict):
        raise _err(path, ypath, "a job must be a mapping")
    kind = raw.get("type", "job")
    if kind != "job":
        raise _err(path, f"{ypath}.type", f"{kind!r} jobs (sub-workflows) are not supported; plan the sub-workflow on its own")
    for key in ("id", "name"):
        if key not in raw:
            raise _err(path, ypath, f"missing '{key}'")
    job_id, name = str(raw["id"]), str(raw["name"])
    if not SAFE_ID.match(job_id):
        raise _err(path, f"{ypath}.id", f"{job_id!r}: job ids may use letters, digits, '_', '.', '+', '-' only")
    if not SAFE_ID.match(name):
        raise _err(path, f"{ypath}.name", f"{name!r}: transformation names may use letters, digits, '_', '.', '+', '-' only")
    args = raw.get("arguments") or []
    if not isinstance(args, list):
        raise _err(path, f"{ypath}.arguments", "must be a list")
    arguments = [_argument(a, path, f"{ypath}.arguments[{k}]") for k, a in enumerate(args)]
    ns = raw.get("namespace")
    version = raw.get("version")
    return Job(
        id=job_id,
        name=name,
        namespace=None if ns is None else str(ns),
        version=None if version is None else str(version),
        arguments=arguments,
        profiles=read_profiles(raw.get("profiles"), path, f"{ypath}.profiles"),
        source=path,
        index=index,
    )


def _argument(value: Any, path: str, ypath: str) -> str:
    if isinstance(value, dict) and "lfn" in value:
        return str(value["lfn"])
    if isinstance(value, (dict, list)):
        raise _err(path, ypath, "an argument must be a string or a file")
    return _str(value)


def read_transformation_catalog(data: Any, path: str, ypath: str, catalogs: Catalogs) -> None:
    if not isinstance(data, dict):
        raise _err(path, ypath, "expected a transformation catalog mapping")
    for i, raw in enumerate(data.get("transformations") or []):
        tpath = f"{ypath}.transformations[{i}]" if ypath else f"transformations[{i}]"
        if not isinstance(raw, dict) or "name" not in raw:
            raise _err(path, tpath, "a transformation needs a name")
        tx = Transformation(
            name=str(raw["name"]),
            namespace=None if raw.get("namespace") is None else str(raw["namespace"]),
            version=None if raw.get("version") is None else str(raw["version"]),
            profiles=read_profiles(raw.get("profiles"), path, f"{tpath}.profiles"),
            where=f"{path}: {tpath}",
        )
        for k, site in enumerate(raw.get("sites") or []):
            spath = f"{tpath}.sites[{k}]"
            if not isinstance(site, dict) or "name" not in site or "pfn" not in site:
                raise _err(path, spath, "a transformation site needs name and pfn")
            tx.sites[str(site["name"])] = TransformationSite(
                str(site["name"]), str(site["pfn"]), read_profiles(site.get("profiles"), path, f"{spath}.profiles")
            )
        catalogs.transformations[(tx.namespace, tx.name, tx.version)] = tx


def read_site_catalog(data: Any, path: str, ypath: str, catalogs: Catalogs) -> None:
    if not isinstance(data, dict):
        raise _err(path, ypath, "expected a site catalog mapping")
    for i, raw in enumerate(data.get("sites") or []):
        spath = f"{ypath}.sites[{i}]" if ypath else f"sites[{i}]"
        if not isinstance(raw, dict) or "name" not in raw:
            raise _err(path, spath, "a site needs a name")
        catalogs.sites[str(raw["name"])] = Site(str(raw["name"]), read_profiles(raw.get("profiles"), path, f"{spath}.profiles"))


def read_properties(path: str) -> dict[str, str]:
    """Java-style properties (``key = value``, ``key: value`` or ``key value``; # and ! comments)."""
    props: dict[str, str] = {}
    try:
        fh = open(path, encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    with fh:
        for lineno, raw in enumerate(fh, 1):
            line = raw.strip()
            if not line or line[0] in "#!":
                continue
            m = re.match(r"([^\s=:]+)\s*[=:\s]\s*(.*)$", line)
            if not m:
                raise ConfigError(f"{path}:{lineno}: expected 'key = value'")
            props[m.group(1)] = m.group(2).strip()
    return props
