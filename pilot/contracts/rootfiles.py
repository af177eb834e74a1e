"""The submit directory as ONE Pegasus workflow: root braindump, DAG, static.bp and a .sub per cluster.

Pegasus monitors a clustered workflow as one workflow whose DAGMan nodes are
the clustered jobs and whose tasks are the original jobs. ``pilot plan``
writes the same picture for the whole submit directory, so pegasus-monitord,
-statistics, -analyzer and -status work on it as on a Pegasus run:

- ``braindump.yml``: the keys monitord and the tools need (wf_uuid, dag, ...);
- ``<wf>-0.dag``: a DAGMan DAG, one ``JOB`` per cluster (its ``.sub`` file in
  the cluster's directory, so monitord looks for the cluster's output there),
  a ``SCRIPT POST`` per cluster (``pilot submit`` settles each attempt as a
  POST script would: it decides the outcome and renames the job output to
  ``<cluster>.out.NNN``; monitord reads the numbered file only for a node with
  a POST script, which keeps every attempt's records apart), and the edges;
- ``<wf>-0.static.bp``: tasks = the workflow's own jobs (task.info, task.edge),
  jobs = clusters (job.info with clustered="1" and task_count) and the data jobs
  Pegasus adds (job.info of their type, task_count="0" and no task, as Pegasus
  writes them), the task-to-job map (wf.map.task_job) and the edges between
  jobs (job.edge);
- ``<cluster>/<cluster>.sub``: the batch job in HTCondor submit syntax, as
  monitord and pegasus-analyzer read it: command, output/error files, site
  and what each of its tasks asks for (``+pegasus_site``, ``+pegasus_cores``,
  and ``+pegasus_memory_mb`` / ``+pegasus_gpus`` when they ask for memory or
  GPUs, which monitord reports as ``req_memory_mb`` / ``req_gpus`` of the job
  instance). No HTCondor is involved.

The dynamic files (root dagman.out, jobstate.log, the numbered job outputs)
are written by ``pilot submit`` (pilot.monitor.root).
"""

from __future__ import annotations

import itertools
import os
import re
import sys
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from pilot.contracts.submitdir import REPLAN, _q, load_braindump, write_braindump
from pilot.errors import ConfigError
from pilot.util import safetext
from pilot.util.atomic import write_atomic
from pilot.util.boundedload import read_text
from pilot.util.safeopen import open_file, read_at_most

NOTIFY_FILE = "monitord.notify"  # one empty notifications file that every braindump names (pilot plan makes it)
DAX_KIND = (10, "dax")  # Pegasus' type of a sub-workflow job
BRAINDUMP = "braindump.yml"
MAX_ROOT_DAG_BYTES = 1 << 30  # one JOB line per cluster
CHUNK = 4096  # static.bp lines joined per write: one write each costs more, all at once a string per task
_DAG_JOB = re.compile(r"^JOB\s+(\S+)\s", re.I)
_DAG_EDGE = re.compile(r"^PARENT\s+(.+?)\s+CHILD\s+(.+)$", re.I)


@dataclass(slots=True)
class RootTask:
    """One Pegasus job, a task of its cluster, as a caller with a few of them gives it (TaskTable.of)."""

    id: str
    transformation: str
    argv: str
    children: tuple[str, ...] | list[str] = ()
    cpus: int = 1
    memory: int = 0  # MB; 0: no request
    gpus: int = 0
    kind: tuple[int, str] = (1, "compute")  # a sub-workflow's job: (10, "dax"); a data job is no task
    metadata: dict[str, str] = field(default_factory=dict)  # the job's metadata (task_meta in the DB)
    # (lfn, metadata) of its files with metadata, and of the outputs it registers: rc_meta and wf_files in the DB
    files: tuple[tuple[str, dict[str, str]], ...] = ()


Files = tuple[tuple[str, Mapping[str, str]], ...]


@dataclass(slots=True, eq=False)
class TaskTable:
    """A cluster's tasks as columns: a list per field, the task edges as two flat lists, and what only some
    tasks have by their places. A cluster may hold a million tasks: an object and a tuple of children each
    cost more to build than the static.bp lines written from them, and a column is written at C speed."""

    ids: list[str] = field(default_factory=list)
    transformations: list[str] = field(default_factory=list)  # ``ns::name:version`` as Pegasus prints one
    argvs: list[str] = field(default_factory=list)
    kinds: list[tuple[int, str]] = field(default_factory=list)  # Pegasus' type of each (number, description)
    # Every Pegasus edge from a task, in task order: edge_parents[k] (a task's id) -> edge_children[k]
    edge_parents: list[str] = field(default_factory=list)
    edge_children: list[str] = field(default_factory=list)
    requests: set[tuple[int, int, int]] = field(default_factory=set)  # the (CPUs, memory MB, GPUs) its tasks ask
    metadata: dict[int, Mapping[str, str]] = field(default_factory=dict)  # place -> the task's metadata, if any
    files: dict[int, Files] = field(default_factory=dict)  # place -> its files as RootTask.files has them, if any

    def __len__(self) -> int:
        return len(self.ids)

    def add(self, task: RootTask) -> None:
        place = len(self.ids)
        self.ids.append(task.id)
        self.transformations.append(task.transformation)
        self.argvs.append(task.argv)
        self.kinds.append(task.kind)
        self.edge_parents += [task.id] * len(task.children)
        self.edge_children += task.children
        self.requests.add((task.cpus, task.memory, task.gpus))
        if task.metadata:
            self.metadata[place] = task.metadata
        if task.files:
            self.files[place] = task.files

    @classmethod
    def of(cls, tasks: Iterable[RootTask]) -> TaskTable:
        table = cls()
        for task in tasks:
            table.add(task)
        return table


def _agreed(values: set[int], default: int) -> int:
    """The one value all tasks share, else ``default``."""
    return values.pop() if len(values) == 1 else default


@dataclass
class RootJob:
    """One cluster: a DAGMan node of the root DAG."""

    name: str
    site: str
    tasks: TaskTable  # a list of RootTask is made one
    parents: list[str]
    command: list[str]

    # Pegasus' job type (number, description): a cluster is compute; a data job of Pegasus' (create-dir,
    # stage-in-tx, ...) is a job with no tasks, as in a Pegasus plan, where tasks are the workflow's own jobs.
    kind: tuple[int, str] = (1, "compute")
    transformation: str = "pegasus::pilot"

    def __post_init__(self) -> None:
        if not isinstance(self.tasks, TaskTable):
            self.tasks = TaskTable.of(self.tasks)

    @property
    def cpus(self) -> int:
        """The CPUs each task asks for, when its tasks agree (else 1).

        It becomes ``+pegasus_cores``, which pegasus-statistics shows as the
        job's Mult and multiplies every task's runtime by: the batch job's
        total CPUs there would inflate each task's runtime in breakdown.txt.
        """
        return _agreed({cpus for cpus, _, _ in self.tasks.requests}, 1)

    @property
    def memory_mb(self) -> int:
        """The memory (MB) each task asks for, when its tasks agree (else 0: none written).

        It becomes ``+pegasus_memory_mb``, as Pegasus' planner writes a job's
        memory request; monitord reports it as the job instance's
        ``req_memory_mb`` (pegasus-statistics has no column for it). Like
        ``cpus`` it is a per-task number: for tasks that ask for different
        amounts the largest would be more than the others asked for and the
        sum more than any task asked for, so the cluster gets none.
        """
        return _agreed({memory for _, memory, _ in self.tasks.requests}, 0)

    @property
    def gpus(self) -> int:
        """The GPUs each task asks for, when its tasks agree (else 0), as ``+pegasus_gpus`` (see memory_mb)."""
        return _agreed({gpus for _, _, gpus in self.tasks.requests}, 0)


def root_dag_name(workflow: str) -> str:
    """Pegasus names the DAG of the root workflow ``<label>-0.dag``."""
    return f"{workflow}-0.dag"


def sub_path(submit_dir: str, cluster: str) -> str:
    return os.path.join(submit_dir, cluster, cluster + ".sub")


def output_base(submit_dir: str, cluster: str) -> str:
    """``<cluster>/<cluster>`` + ``.out``/``.err``: the job output the pilot writes (-o/-e)."""
    return os.path.join(submit_dir, cluster, cluster)


def post_command(submit_dir: str, cluster: str) -> list[str]:
    return [sys.executable, "-m", "pilot.monitor.joboutput", os.path.join(submit_dir, cluster), cluster]


PROPERTIES = "pegasus.properties"
MAX_SUB_BYTES = 1 << 20  # a job's .sub file, which pilot wrote: a few lines


def write_properties(submit_dir: str, properties: dict[str, str] | None) -> str:
    """The plan's properties as the submit directory's ``pegasus.properties`` (pegasus-plan leaves its
    properties there too); the braindumps name it. Returns its path."""
    path = os.path.join(os.path.abspath(submit_dir), PROPERTIES)
    lines = ["# The properties this workflow was planned with (pegasus-monitord and pegasus-analyzer read them)"]
    lines += [f"{key} = {value}" for key, value in sorted((properties or {}).items())]
    with open_file(path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
    return path


def write_root_files(
    submit_dir: str,
    workflow: str,
    jobs: list[RootJob],
    planner_arguments: str,
    wf_uuid: str | None = None,
    properties: dict[str, str] | None = None,
    metadata: dict[str, str] | None = None,
    workflow_hooks: list[tuple[str, str]] | None = None,
    job_hooks: dict[str, list[tuple[str, str]]] | None = None,
) -> str:
    """Write the root DAG, static.bp, .sub files, properties and braindump; return the workflow uuid."""
    submit_dir = os.path.abspath(submit_dir)
    wf_uuid = wf_uuid or str(uuid.uuid4())
    dag_name = root_dag_name(workflow)
    _write_subs(submit_dir, jobs)
    _write_dag(os.path.join(submit_dir, dag_name), submit_dir, jobs)
    _write_static_bp(os.path.join(submit_dir, dag_name[:-4] + ".static.bp"), jobs, wf_uuid, metadata or {})
    notify = os.path.join(submit_dir, NOTIFY_FILE)
    _write_notifications(notify, wf_uuid, workflow_hooks or [], job_hooks or {})
    write_braindump(
        os.path.join(submit_dir, BRAINDUMP),
        os.path.join(submit_dir, dag_name),
        submit_dir,
        wf_uuid,
        workflow,
        planner_arguments,
        notify,
        write_properties(submit_dir, properties),
    )
    return wf_uuid


def _write_notifications(
    path: str, wf_uuid: str, workflow_hooks: list[tuple[str, str]], job_hooks: dict[str, list[tuple[str, str]]]
) -> None:
    """The notifications file pegasus-monitord reads (braindump's ``notify``): ``WORKFLOW <uuid> <condition>
    <command>`` and ``JOB <job> <condition> <command>`` lines; monitord runs each command at its event."""
    lines = [f"WORKFLOW {wf_uuid} {cond} {cmd}\n" for cond, cmd in workflow_hooks]
    lines += [f"JOB {job} {cond} {cmd}\n" for job, hooks in job_hooks.items() for cond, cmd in hooks]
    with open_file(path, "w", encoding="utf-8") as fh:
        fh.writelines(lines)


def _write_subs(submit_dir: str, jobs: list[RootJob]) -> None:
    for job in jobs:
        base = output_base(submit_dir, job.name)
        args = " ".join(job.command[1:]).replace('"', "'")
        memory, gpus = job.memory_mb, job.gpus
        for what, value in (("command", " ".join(job.command)), ("site", job.site), ("directory", base)):
            why = safetext.problem_line(value) or (safetext.problem_word(value) if what == "site" else None)
            if why:  # each is one line of the .sub file, which pegasus-monitord reads line by line
                raise ConfigError(
                    f"{sub_path(submit_dir, job.name)}: cluster {job.name}'s {what} {value[:120]!r} {why}"
                )
        how = "as a nested pilot submit of its workflow" if job.kind == DAX_KIND else "through the site's batch system"
        text = (
            f"# Cluster {job.name} as pegasus-monitord and pegasus-analyzer read a job; pilot submit runs it\n"
            f"# {how} (no HTCondor).\n"
            "universe = vanilla\n"
            f"executable = {job.command[0]}\n"
            f'arguments = "{args}"\n'
            f"output = {base}.out\n"
            f"error = {base}.err\n"
            f'+pegasus_site = "{job.site}"\n'
            f'+pegasus_wf_xformation = "{job.transformation}"\n'
            f"+pegasus_job_class = {job.kind[0]}\n"
            f"+pegasus_cores = {job.cpus}\n"
            + (f"+pegasus_memory_mb = {memory}\n" if memory > 0 else "")
            + (f"+pegasus_gpus = {gpus}\n" if gpus > 0 else "")
            + f"+pegasus_cluster_size = {len(job.tasks)}\n"
            "queue\n"
        )
        with open_file(sub_path(submit_dir, job.name), "w", encoding="utf-8") as fh:
            fh.write(text)


def set_environment(submit_dir: str, cluster: str, env: dict[str, str]) -> None:
    """Give a job's .sub the ``environment`` line HTCondor would run it with (new syntax: quoted, spaces
    between), replacing an earlier one: pegasus-monitord reads a sub-workflow's dagman.out from its
    ``_CONDOR_DAGMAN_LOG``. A value is one word: none with a space, quote or newline is written."""
    for key, value in env.items():
        if any(c in key + value for c in " \"'\n\r\0"):
            raise ConfigError(
                f"{sub_path(submit_dir, cluster)}: {key}={value!r} cannot be written into an HTCondor "
                "environment line (no spaces or quotes); move the submit directory to a plainer path"
            )
    path = sub_path(submit_dir, cluster)
    text = read_at_most(path, MAX_SUB_BYTES).decode("utf-8")
    lines = [line for line in text.splitlines(True) if not line.startswith("environment =")]
    at = next((k for k, line in enumerate(lines) if line.strip() == "queue"), len(lines))
    lines.insert(at, 'environment = "' + " ".join(f"{k}={v}" for k, v in env.items()) + '"\n')
    write_atomic(path, "".join(lines))


def _write_dag(path: str, submit_dir: str, jobs: list[RootJob]) -> None:
    out = [
        "# The clusters of this workflow as DAGMan nodes, for pegasus-monitord and friends; pilot submit drives it.\n"
    ]
    for job in jobs:
        out.append(f"JOB {job.name} {os.path.relpath(sub_path(submit_dir, job.name), submit_dir)}\n")
        out.append(f"SCRIPT POST {job.name} {' '.join(post_command(submit_dir, job.name))}\n")
    for job in jobs:
        for parent in job.parents:
            out.append(f"PARENT {parent} CHILD {job.name}\n")
    with open_file(path, "w", encoding="utf-8") as fh:
        fh.write("".join(out))


def read_root_dag(path: str) -> dict[str, list[str]]:
    """The root DAG's nodes (clusters) in file order, each with its parents (read bounded; an edge naming a node
    the DAG has no JOB for is left out)."""
    nodes: dict[str, list[str]] = {}
    edges: list[tuple[str, str]] = []
    for line in read_text(path, MAX_ROOT_DAG_BYTES, REPLAN).splitlines():
        m = _DAG_JOB.match(line)
        if m:
            nodes[m.group(1)] = []
            continue
        m = _DAG_EDGE.match(line.strip())
        if m:
            edges += [(p, c) for p in m.group(1).split() for c in m.group(2).split()]
    for parent, child in edges:
        if child in nodes:
            nodes[child].append(parent)
    return nodes


def _write_static_bp(path: str, jobs: list[RootJob], wf_uuid: str, metadata: dict[str, str]) -> None:
    """Its events in the order monitord reads them: tasks, task edges, jobs, the task-to-job map, job edges, then
    the metadata. A cluster may hold a million tasks: lines are made from its columns and joined a few thousand
    at a time, each column escaped once (most need nothing: ids and names are plain words)."""
    ts = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    pre, wf = f"ts={ts} event=", f"xwf.id={wf_uuid}"
    ids = [_escaped(job.tasks.ids) for job in jobs]
    with open_file(path, "w", encoding="utf-8", buffering=1 << 20) as fh:

        def out(lines: Iterator[str]) -> None:
            while chunk := list(itertools.islice(lines, CHUNK)):
                fh.write("".join(chunk))

        for job, tids in zip(jobs, ids):
            t = job.tasks
            out(
                f'{pre}task.info {wf} task.id="{i}" type="{kind[0]}" type_desc="{kind[1]}" transformation="{x}" '
                f'argv="{a}"\n'
                for i, kind, x, a in zip(tids, t.kinds, _escaped(t.transformations), _escaped(t.argvs))
            )
        head = f'{pre}task.edge {wf} parent.task.id="'
        for job in jobs:
            t = job.tasks
            out(
                f'{head}{p}" child.task.id="{c}"\n' for p, c in zip(_escaped(t.edge_parents), _escaped(t.edge_children))
            )
        out(
            f'{pre}job.info {wf} job.id={_q(job.name)} '
            f'submit_file={_q(job.name + "/" + job.name + ".sub")} type="{job.kind[0]}" type_desc="{job.kind[1]}" '
            f'clustered="{1 if len(job.tasks) > 1 else 0}" max_retries="0" '
            f"executable={_q(job.command[0])} argv={_q(' '.join(job.command[1:]))} "
            f'task_count="{len(job.tasks)}"\n'
            for job in jobs
        )
        for job, tids in zip(jobs, ids):
            head = f'{pre}wf.map.task_job {wf} job.id={_q(job.name)} task.id="'
            out(f'{head}{i}"\n' for i in tids)
        out(
            f"{pre}job.edge {wf} parent.job.id={_q(parent)} child.job.id={_q(job.name)}\n"
            for job in jobs
            for parent in job.parents
        )
        # metadata after the tasks it names, as monitord looks them up
        out(f"{pre}xwf.meta {wf} key={_q(key)} value={_q(value)}\n" for key, value in metadata.items())
        out(
            f'{pre}task.meta {wf} task.id="{tids[place]}" key={_q(key)} value={_q(value)}\n'
            for job, tids in zip(jobs, ids)
            for place, meta in job.tasks.metadata.items()
            for key, value in meta.items()
        )
        out(_file_lines(jobs, ids, pre, wf))


def _escaped(values: list[str]) -> list[str]:
    """``values`` as they stand between a NetLogger value's quotes (``_q`` less its quotes): the list itself when
    none needs escaping, which is tested a few thousand values at a time at C speed."""
    for k in range(0, len(values), CHUNK):
        text = "".join(values[k : k + CHUNK])
        if not text.isascii() or '"' in text:
            return [v if v.isascii() and '"' not in v else _q(v)[1:-1] for v in values]
    return values


def _file_lines(jobs: list[RootJob], ids: list[list[str]], pre: str, wf: str) -> Iterator[str]:
    """As Pegasus writes them: each file's metadata, then the file's map to its task (``ids``: each job's task ids,
    escaped)."""
    for job, tids in zip(jobs, ids):
        for place, files in job.tasks.files.items():
            for lfn, attributes in files:
                for key, value in attributes.items():
                    yield f"{pre}rc.meta {wf} lfn.id={_q(lfn)} key={_q(key)} value={_q(value)}\n"
                yield f'{pre}wf.map.file {wf} task.id="{tids[place]}" lfn.id={_q(lfn)}\n'


def read_braindump(submit_dir: str) -> dict[str, Any]:
    """The root braindump, read bounded: one line for a directory planned before root monitoring, a file that is
    garbage, binary, a list or a directory, or one whose root DAG is missing or lies outside the submit directory
    (its dagman.out is written next to it)."""
    path = os.path.join(submit_dir, BRAINDUMP)
    try:
        data = load_braindump(path)
    except FileNotFoundError:
        raise ConfigError(
            f"{submit_dir}: planned by an older pilot (no {BRAINDUMP} or root DAG for pegasus-monitord): "
            "plan it again with pilot plan (or pilot submit WORKFLOW.yml) into a new --dir"
        ) from None
    dag = data.get("dag")
    if (
        not isinstance(dag, str)
        or not dag
        or os.path.isabs(dag)
        or ".." in dag.split("/")
        or not os.path.isfile(os.path.join(submit_dir, dag))
    ):
        raise ConfigError(
            f"{path}: names no root DAG that exists in the submit directory ({str(dag)[:80]!r}); {REPLAN}"
        )
    return data
