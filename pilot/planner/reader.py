"""Read a Pegasus 5 YAML workflow: its jobs, dependencies and inline catalogs (pilot.planner.catalogs).

Input is what the real Pegasus.api writes (``pegasus: '5.0'``, ``jobs``,
``jobDependencies``, inline or separate ``transformationCatalog`` and
``siteCatalog``), read through pilot.planner.yamlstream (bounded). Every
value is checked for its type where it is read, and an error names the file
and the YAML path (``workflow.yml: jobDependencies[0].children: ...``): a
string where a list belongs is never read letter by letter, and a list where
a name belongs is never turned into its printed form.
"""

from __future__ import annotations

import re
from typing import Any, NoReturn

from pilot.dag.lexer import SPECIAL, quote_arg, split_args, unterminated_quote
from pilot.errors import ConfigError
from pilot.planner import subworkflow, yamlstream
from pilot.planner.catalogs import read_replica_catalog, read_site_catalog, read_transformation_catalog
from pilot.planner.fields import read_file_metadata, read_hooks, read_metadata, read_profiles
from pilot.planner.model import NO_METADATA, NO_PROFILES, Job, JobType, Link, Use, Workflow
from pilot.planner.yamlvalues import (
    SAFE_ID,
    fail,
    flag,
    identifier,
    kind_of,
    need_list,
    need_mapping,
    need_text,
    optional_text,
)
from pilot.util import safetext


class _Reading:
    """What one pass over a workflow file builds, item by item, as its jobs and dependencies come."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.wf = Workflow(name="workflow", path=path)
        self.add_job = self.wf.jobs.append
        self.by_id: dict[str, Job] = {}
        self.deps: list[tuple[int, Any]] = []  # dependencies read before any job (kept until the jobs are known)
        self.late: list[ConfigError] = []  # the first error of a dependency read as it came, raised where it would be
        self.shared: dict[str, str] = {}  # one string per transformation name, namespace and version, not one per job
        self.names: dict[str, str] = {}  # the transformation names found valid, each as its string in shared

    def on_job(self, raw: Any, i: int) -> None:
        job = _read_job(raw, self.path, i, self.names, self.shared)
        first = self.by_id.setdefault(job.id, job)
        if first is not job:
            raise fail(self.path, f"jobs[{i}].id", f"duplicate job id {job.id!r} (first at {first.where})")
        self.add_job(job)

    def on_dependency(self, raw: Any, i: int) -> None:
        """A dependency after the jobs (as Pegasus.api writes them) becomes edges at once, so the parsed mapping
        of each is never kept; its error waits until the checks of the whole file that come first have run."""
        if self.late:
            return
        if not self.wf.jobs or self.deps:
            self.deps.append((i, raw))
            return
        try:
            _add_dependency(raw, self.path, i, self.by_id)
        except ConfigError as exc:
            self.late.append(exc)


def read_workflow(path: str) -> Workflow:
    readings: list[_Reading] = []

    def start() -> dict[str, yamlstream.Handler]:
        """Callbacks with fresh state: the reader starts again from the file's start when its quick pass gives up."""
        readings[:] = [_Reading(path)]
        return {"jobs": readings[0].on_job, "jobDependencies": readings[0].on_dependency}

    data = yamlstream.load_streaming(path, start)
    reading = readings[0]
    wf, by_id, deps, late = reading.wf, reading.by_id, reading.deps, reading.late
    if "" in data and len(data) == 1:
        raise fail(path, "(top)", f"not a Pegasus 5 workflow: the file holds {kind_of(data[''])}, not a mapping")
    if "jobs" not in data:
        raise fail(path, "(top)", "not a Pegasus 5 workflow: no 'jobs' (write it with Pegasus.api Workflow.write())")
    if not isinstance(data["jobs"], int):
        need_list(data["jobs"], path, "jobs", "of jobs")  # None: no jobs
    if not wf.jobs:
        raise fail(path, "jobs", "the workflow has no jobs: nothing to plan")
    if "jobDependencies" in data and not isinstance(data["jobDependencies"], int):
        need_list(data["jobDependencies"], path, "jobDependencies", "of {id: JOB, children: [JOB, ...]}")
    name = data.get("name")
    wf.name = "workflow" if name is None else need_text(name, path, "name")
    if not SAFE_ID.match(wf.name):
        raise fail(path, "name", f"{wf.name!r}: use letters, digits, '_', '.', '+', '-' only")
    if late:
        raise late[0]
    for i, dep in deps:
        _add_dependency(dep, path, i, by_id)
    catalogs = wf.catalogs
    if data.get("profiles") is not None:
        catalogs.workflow_profiles = read_profiles(data["profiles"], path, "profiles")
    catalogs.workflow_metadata = read_metadata(data.get("metadata"), path, "metadata")
    catalogs.workflow_hooks = read_hooks(data.get("hooks"), path, "hooks")
    if data.get("transformationCatalog") is not None:
        read_transformation_catalog(data["transformationCatalog"], path, "transformationCatalog", catalogs)
    if data.get("siteCatalog") is not None:
        read_site_catalog(data["siteCatalog"], path, "siteCatalog", catalogs)
    if data.get("replicaCatalog") is not None:
        read_replica_catalog(data["replicaCatalog"], path, "replicaCatalog", catalogs)
    return wf


def _add_dependency(dep: Any, path: str, i: int, by_id: dict[str, Job]) -> None:
    """``jobDependencies[i]``. Each check's error path is built only when it fails: a workflow may list a million."""
    if type(dep) is not dict:
        dep = need_mapping(dep, path, f"jobDependencies[{i}]", "{id: JOB, children: [JOB, ...]}")
    parent_id = dep.get("id")
    parent = by_id.get(parent_id) if type(parent_id) is str else None
    if parent is None:
        if "id" not in dep:
            raise fail(path, f"jobDependencies[{i}]", "missing 'id': expected {id: JOB, children: [JOB, ...]}")
        need_text(parent_id, path, f"jobDependencies[{i}].id")
        raise fail(path, f"jobDependencies[{i}].id", f"unknown job {parent_id!r}")
    children = dep.get("children")
    if type(children) is not list:
        children = need_list(children, path, f"jobDependencies[{i}].children", "of job ids")
    below = parent.children
    for child_id in children:
        child = by_id.get(child_id) if type(child_id) is str else None
        if child is None or child is parent:
            _bad_child(children, child_id, child, path, i)
        above = child.parents
        if not ((child in below) if len(below) < len(above) else (parent in above)):  # a repeated one is one edge
            below.append(child)
            above.append(parent)


def _bad_child(children: list, child_id: Any, child: Job | None, path: str, i: int) -> NoReturn:
    """The error of ``jobDependencies[i]``'s child ``child_id``: no job, or the parent itself."""
    k = next(k for k, c in enumerate(children) if c is child_id)
    if child is None:
        need_text(child_id, path, f"jobDependencies[{i}].children[{k}]")
        raise fail(path, f"jobDependencies[{i}].children[{k}]", f"unknown job {child_id!r}")
    raise fail(path, f"jobDependencies[{i}].children[{k}]", f"job {child.id} depends on itself")


def _read_job(raw: Any, path: str, index: int, names: dict[str, str], shared: dict[str, str]) -> Job:
    """``jobs[index]``. ``shared`` maps each transformation name, namespace and version to one string for all
    jobs; ``names`` holds the names found valid, each as its string in ``shared``. Each check's error path is
    built only when it fails, and the common job (type job, a name seen before, an id of letters and digits)
    passes with a dict look-up and two str methods: a workflow may list a million."""
    if type(raw) is not dict:
        raw = need_mapping(raw, path, f"jobs[{index}]", "a job: {type: job, id: ..., name: ...}")
    kind = raw.get("type")  # None: no type, a job (or a null one, an error)
    if kind != "job" and (kind is not None or "type" in raw):
        return _other_kind(raw, kind, path, f"jobs[{index}]", index)
    job_id, name = raw.get("id"), raw.get("name")
    one = names.get(name) if type(name) is str else None
    if one is None or type(job_id) is not str or not (job_id.isalnum() and job_id.isascii()):
        one = _id_and_name(raw, path, f"jobs[{index}]", names, shared)
    args = raw.get("arguments")
    given = 2 + (kind is not None) + (args is not None)  # keys known to be there: id, name, type, arguments, uses
    if type(args) is not list:
        args = need_list(args, path, f"jobs[{index}].arguments", "of arguments")
    args_line = _args_line(args, path, index)
    uses_raw = raw.get("uses")
    uses: tuple[Use, ...] = () if uses_raw is None or uses_raw == [] else _uses(uses_raw, path, f"jobs[{index}]")
    # Most jobs of a big workflow have nothing more to read: when the keys known to be there are all it has, that
    # is said without a look at each key.
    if len(raw) == given + (uses_raw is not None) or _OPTIONAL.isdisjoint(raw):
        # Job's own __init__, called with the same keywords as Job(...) would pass, but without the dict a call
        # of the class packs them into for __init__ to unpack: an eighth of the time a plain job takes to read.
        job = _new_object(Job)
        _init_job(job, id=job_id, name=one, args_line=args_line, source=path, index=index, yaml_index=index, uses=uses)
        return job
    ypath = f"jobs[{index}]"
    # Three calls, not a generator: one would make raw, path and ypath cells at every call, plain jobs' too
    stdio = (
        _stdio_file(raw, "stdin", path, ypath),
        _stdio_file(raw, "stdout", path, ypath),
        _stdio_file(raw, "stderr", path, ypath),
    )
    optional_text(raw, "nodeLabel", path, ypath)  # a description: Pegasus only prints it in its debug dump of a job
    namespace, version = identifier(raw, "namespace", path, ypath), identifier(raw, "version", path, ypath)
    return Job(
        id=job_id,
        name=one,
        namespace=None if namespace is None else shared.setdefault(namespace, namespace),
        version=None if version is None else shared.setdefault(version, version),
        args_line=args_line,
        profiles=_or_none(raw, "profiles", read_profiles, path, ypath, NO_PROFILES),
        source=path,
        index=index,
        yaml_index=index,
        uses=uses,
        stdio=stdio if any(stdio) else None,
        metadata=_or_none(raw, "metadata", read_metadata, path, ypath, NO_METADATA),
        hooks=_or_none(raw, "hooks", read_hooks, path, ypath, ()),
    )


def _other_kind(raw: dict, kind: Any, path: str, ypath: str, index: int) -> Job:
    """A job whose type is not ``job``: a sub-workflow, or an error naming what to write instead."""
    if kind == "pegasusWorkflow":
        return _read_subworkflow(raw, path, ypath, index)
    if kind == "condorWorkflow":
        raise fail(
            path,
            f"{ypath}.type",
            "a condorWorkflow job runs a DAG already planned for HTCondor's DAGMan, which "
            "pilot runs without: add the workflow's Pegasus YAML as a pegasusWorkflow job (SubWorkflow(file, False))",
        )
    raise fail(path, f"{ypath}.type", f"{kind!r}: a job's type is job, pegasusWorkflow or condorWorkflow")


def _id_and_name(raw: dict, path: str, ypath: str, names: dict[str, str], shared: dict[str, str]) -> str:
    """A job's id and transformation name checked, with their errors; the name as its string in ``shared``."""
    for key in ("id", "name"):
        if key not in raw:
            raise fail(path, ypath, f"missing '{key}'")
    job_id, name = raw["id"], raw["name"]
    if type(job_id) is not str:
        need_text(job_id, path, f"{ypath}.id")
    if type(name) is not str:
        need_text(name, path, f"{ypath}.name")
    if not SAFE_ID.match(job_id):
        raise fail(path, f"{ypath}.id", f"{job_id!r}: job ids may use letters, digits, '_', '.', '+', '-' only")
    if not SAFE_ID.match(name):
        raise fail(
            path, f"{ypath}.name", f"{name!r}: transformation names may use letters, digits, '_', '.', '+', '-' only"
        )
    one = names[name] = shared.setdefault(name, name)
    return one


_new_object, _init_job = object.__new__, Job.__init__  # see _read_job

# The keys of a job that most jobs lack; a job with none of them has its defaults at once.
_OPTIONAL = frozenset(
    ("stdin", "stdout", "stderr", "nodeLabel", "namespace", "version", "profiles", "metadata", "hooks")
)


def _or_none(raw: dict, key: str, read: Any, path: str, ypath: str, empty: Any) -> Any:
    """``read`` of the job's ``key``, or the shared ``empty`` value when the job has none (most jobs)."""
    value = raw.get(key)
    return empty if value is None else read(value, path, f"{ypath}.{key}")


def _read_subworkflow(raw: dict, path: str, ypath: str, index: int) -> Job:
    """A pegasusWorkflow job: ``{id, file, arguments (pegasus-plan options), uses, profiles}``; its name is the
    file's stem, as Pegasus names the job ``subdax_<stem>_<id>``."""
    for key in ("id", "file"):
        if key not in raw:
            raise fail(path, ypath, f"missing '{key}' (a sub-workflow job names its workflow file)")
    job_id = need_text(raw["id"], path, f"{ypath}.id")
    if not SAFE_ID.match(job_id):
        raise fail(path, f"{ypath}.id", f"{job_id!r}: job ids may use letters, digits, '_', '.', '+', '-' only")
    lfn = need_text(
        raw["file"]["lfn"] if isinstance(raw["file"], dict) and "lfn" in raw["file"] else raw["file"],
        path,
        f"{ypath}.file",
    )
    if not _relative_name(lfn):
        raise fail(
            path, f"{ypath}.file", f"{lfn!r}: a sub-workflow file is a logical file name (no leading '/', no '..')"
        )
    stem = re.sub(r"[^A-Za-z0-9_.+-]", "_", lfn.rsplit("/", 1)[-1].rsplit(".", 1)[0]) or "subworkflow"
    args = need_list(raw.get("arguments"), path, f"{ypath}.arguments", "of pegasus-plan options")
    words = _words([_argument(a, path, f"{ypath}.arguments[{k}]") for k, a in enumerate(args)], path, ypath)
    uses = [
        _use(u, path, f"{ypath}.uses[{k}]")
        for k, u in enumerate(need_list(raw.get("uses"), path, f"{ypath}.uses", "of files"))
    ]
    for k, use in enumerate(uses):
        if use.writes:
            raise fail(
                path,
                f"{ypath}.uses[{k}]",
                f"{use.lfn!r} is an output of a sub-workflow job: its own jobs write "
                "and stage out their outputs; list it there, and make jobs that read it children of a job "
                "that stages it to a place the replica catalog names",
            )
    return Job(
        id=job_id,
        name=stem,
        args_line=" ".join(quote_arg(w) for w in words),
        profiles=read_profiles(raw.get("profiles"), path, f"{ypath}.profiles"),
        source=path,
        index=index,
        yaml_index=index,
        uses=uses,
        type=JobType.DAX,
        subworkflow=subworkflow.plan_options(lfn, words, path, ypath),
        metadata=read_metadata(raw.get("metadata"), path, f"{ypath}.metadata"),
    )


LINKS = {link.value: link for link in Link}


def _stdio_file(raw: dict, key: str, path: str, ypath: str) -> str:
    """A job's ``stdin``/``stdout``/``stderr`` file name ("" when not given), in the job's directory."""
    value = raw.get(key)
    if value is None:
        return ""
    if isinstance(value, dict) and "lfn" in value:
        value = value["lfn"]
    name = need_text(value, path, f"{ypath}.{key}")
    why = _name_problem(name) if name else None
    if why:
        raise fail(path, f"{ypath}.{key}", f"{name[:80]!r}: a job's {key} is a file in the job's directory: it {why}")
    return name


def _name_problem(lfn: str) -> str | None:
    """Why ``lfn`` is no file name that stays inside the directory it is placed in, or cannot be handed to
    pegasus-transfer (which stages and removes it, see pilot.util.safetext); None: it is one."""
    if not lfn or lfn.startswith("/") or ".." in lfn.split("/"):
        return "is a relative path inside the job's directory (no leading '/', no '..')"
    return safetext.problem_staged_path(lfn)


def _relative_name(lfn: str) -> bool:
    """A file name that stays inside the directory it is placed in (and that pegasus-transfer can be given)."""
    return _name_problem(lfn) is None


def _use(raw: Any, path: str, ypath: str) -> Use:
    """One ``uses`` entry: ``{lfn, type: input|output|inout|checkpoint, stageOut, registerReplica}``; an output is
    staged out and registered unless it says otherwise, as Pegasus.api's add_outputs defaults."""
    raw = need_mapping(raw, path, ypath, "a file: {lfn: NAME, type: input|output}")
    if "lfn" not in raw:
        raise fail(path, ypath, "a file needs an lfn (its logical name)")
    lfn = need_text(raw["lfn"], path, f"{ypath}.lfn")
    why = _name_problem(lfn)
    if why:
        raise fail(path, f"{ypath}.lfn", f"{lfn[:80]!r}: a logical file name {why}")
    kind = need_text(raw.get("type", "input"), path, f"{ypath}.type")
    link = LINKS.get(kind)
    if link is None:
        raise fail(path, f"{ypath}.type", f"{kind!r}: use input, output or checkpoint")
    if link is Link.INOUT:
        raise fail(
            path,
            f"{ypath}.type",
            f"file {lfn!r} is listed as input and output (inout), which Pegasus refuses: "
            "write the output under another name, or make it a checkpoint file",
        )
    flag(raw, "bypass", False, path, ypath)  # Pegasus bypasses staging outside sharedfs only: staged here too
    return Use(
        lfn=lfn,
        link=link,
        stage_out=flag(raw, "stageOut", True, path, ypath),
        register=flag(raw, "registerReplica", True, path, ypath),
        optional=link is Link.CHECKPOINT or flag(raw, "optional", False, path, ypath),
        metadata=read_file_metadata(raw.get("metadata"), path, f"{ypath}.metadata") or None,
    )


def _argument(value: Any, path: str, ypath: str) -> str:
    if isinstance(value, dict) and "lfn" in value:
        value = need_text(value["lfn"], path, f"{ypath}.lfn")
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        raise fail(path, ypath, f"an argument must be a string or a file ({{lfn: NAME}}), not {kind_of(value)}")
    if any(c in value for c in "\n\r\0"):
        raise fail(
            path,
            ypath,
            "an argument cannot hold a newline or NUL (a task's command is one line): pass such " "data in a file",
        )
    return value


def _uses(raw: Any, path: str, ypath: str) -> tuple[Use, ...]:
    return tuple(
        _use(u, path, f"{ypath}.uses[{k}]") for k, u in enumerate(need_list(raw, path, f"{ypath}.uses", "of files"))
    )


def _args_line(args: list, path: str, index: int) -> str:
    """``jobs[index]``'s arguments as the one quoted command line the DAG writes (see _words): for plain words
    (most jobs) the items joined by single spaces, with no list of words made."""
    items = args
    try:  # one join and three scans in C, not a test of each item
        text = " ".join(args)
        plain = "\n" not in text and "\r" not in text and "\0" not in text
    except TypeError:  # an item is no string: a file ({lfn: ...}), a mapping, nothing
        plain = False
    if not plain:
        items = _arguments(args, path, index)
        text = " ".join(items)
    if "'" not in text and '"' not in text and "\\" not in text:  # no quote to keep: SPECIAL, as three scans in C
        # In printable text " " is the only space split() splits at: most arguments are already as it joins them
        if text.isprintable() and "  " not in text and text[:1] != " " and text[-1:] != " ":
            return text
        return " ".join(text.split())
    return " ".join(quote_arg(w) for w in _words(items, path, f"jobs[{index}]"))


def _arguments(args: list, path: str, index: int) -> list[str]:
    """``jobs[index]``'s arguments checked one by one (apart from _args_line, whose plain jobs would otherwise
    make path and index cells for this comprehension at every call)."""
    return [_argument(a, path, f"jobs[{index}].arguments[{k}]") for k, a in enumerate(args)]


def _words(items: list[str], path: str, ypath: str) -> list[str]:
    """The task's arguments from a job's argument list, as Pegasus passes them: the items joined with spaces
    into one command line, which PMC splits into words (whitespace separates, quotes group, a backslash
    escapes). So ``"-database ./database"`` is two words, as under Pegasus."""
    text = " ".join(items)
    if SPECIAL.search(text) is not None and unterminated_quote(text):  # as the DAG parser checks a TASK line
        raise fail(
            path,
            f"{ypath}.arguments",
            f"unterminated quote in {text!r}: Pegasus passes the arguments as one "
            "command line, where quotes group words; close the quote, or escape it with a backslash",
        )
    return split_args(text)
