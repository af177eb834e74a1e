"""Read what a run left behind: task records, run boundaries, hosts, batch submissions.

Sources, per DAG (all optional but the records); the files another part
writes are read through their contracts (pilot.contracts):

- ``[cluster-task ...]`` records (pilot.contracts.taskrecord): in per-task
  ``<task>.out.NNN`` files (``--per-task-stdio``), in the batch job's stdout
  (``<cluster>.batch.out``, Parsl's ``*.stdout`` / ``*.submit.o*``), in kept
  ``<dag>.out.<rank>`` files, and in any stdout capture named with
  ``--stdout``. Only records of tasks of the DAG count, each once.
- ``jobstate.log`` (pilot.contracts.jobstate): ``PMC_STARTED`` /
  ``PMC_FINISHED`` frame each pilot run (a resubmitted cluster has several).
- ``<dag>.result`` (pilot.contracts.result): how the last run ended
  (``walltime`` and ``signal`` are aborts).
- ``<dag>.resource``: slots and CPUs of each host (all free at registration).
- ``<dag>``: the edges, and the transformation of each task from its ``#@`` line.
- For a submit directory, ``clusters.yml`` (pilot.contracts.clusters: clusters
  and their parents) and ``submit.state.json`` (pilot.contracts.submitstate:
  each cluster's batch jobs); the moment a job was submitted is the timestamp
  Parsl puts in its script's file name.
"""

from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass, field
from typing import TextIO

from pilot.contracts.clusters import is_submit_dir, read_clusters
from pilot.contracts.jobstate import INTERNAL, JOBSTATE_FILE, Marker, jobstate_path, read_jobstate
from pilot.contracts.rescue import RESCUE_SUFFIX
from pilot.contracts.result import RESULT_SUFFIX, ResultError, read_result
from pilot.contracts.submitstate import SubmitState
from pilot.contracts.taskrecord import read_task_record
from pilot.dag.model import Dag
from pilot.dag.parser import read_dag
from pilot.errors import ConfigError, PilotError
from pilot.util.safeopen import open_regular_fd
from providers import SCHEDULERS, script_suffixes

# Files next to a DAG that never hold task records: pilot's logs, the batch scripts of every scheduler
# plug-in, and stderr (records go to a task's stdout).
_NOT_OUTPUT = (
    ".dag",
    RESCUE_SUFFIX,
    ".resource",
    RESULT_SUFFIX,
    ".bp",
    ".yml",
    ".yaml",
    ".dagman.out",
    ".lock",
    ".notify",
    ".json",
    ".ec",
    ".png",
    ".err",
    ".stderr",
    *script_suffixes(),
)
# Parsl's name of a submitted script: <job name>.<epoch><the plug-in's parsl_suffix>
_PARSL_SCRIPT = "(?:" + "|".join(sorted({re.escape(s.parsl_suffix) for s in SCHEDULERS.values()})) + r")\Z"
_STDERR = re.compile(r"\.(?:err\.\d+|e\d+)\Z")  # <task>.err.NNN, <dag>.err.<rank>, torque's <script>.e<job>
MAX_SCAN_BYTES = 1 << 30  # a stdout file larger than this is not read (one line says so)


class ReportError(PilotError):
    """Nothing to report on, or a file that cannot be read."""

    exit_code = 2


@dataclass
class Attempt:
    """One ``[cluster-task]`` record: one try of one task."""

    task: str
    start: float
    duration: float
    status: int
    app: str
    host: str
    slot: int
    cpus: int
    memory: int
    transformation: str = ""

    @property
    def end(self) -> float:
        return self.start + self.duration

    @property
    def failed(self) -> bool:
        return self.status != 0


@dataclass
class Run:
    """One pilot run of a DAG: one batch job, or one ``pilot run``."""

    start: float | None = None  # PMC_STARTED
    end: float | None = None  # PMC_FINISHED
    ok: bool | None = None
    reason: str = ""  # done | failed | walltime | signal | error (from the result file), or "" when unknown
    submitted: float | None = None  # when its batch job was submitted, if known
    job_id: str = ""


@dataclass
class ClusterRun:
    """Everything known about one DAG's runs."""

    name: str
    dag_path: str
    dag: Dag
    attempts: list[Attempt] = field(default_factory=list)
    runs: list[Run] = field(default_factory=list)
    hosts: dict[str, tuple[int, int]] = field(default_factory=dict)  # host -> (slots, cpus)
    parents: list[str] = field(default_factory=list)


def load(path: str, stdout_files: list[str] | None = None) -> list[ClusterRun]:
    """The runs under ``path``: a submit directory, a cluster directory or a DAG file."""
    if not os.path.exists(path):
        raise ReportError(f"{path}: no such file or directory")
    extra = list(stdout_files or [])
    if is_submit_dir(path):
        found = _submit_dir(path, extra)
    elif os.path.isdir(path):
        dags = sorted(glob.glob(os.path.join(glob.escape(path), "*.dag")))
        found = [_cluster(os.path.splitext(os.path.basename(d))[0], d, extra) for d in dags]
    else:
        found = [_cluster(os.path.splitext(os.path.basename(path))[0], path, extra)]
    ran = [c for c in found if c.attempts]
    if not ran:
        what = "DAG" if not os.path.isdir(path) else "directory"
        raise ReportError(
            f"{path}: no run found in this {what}: no [cluster-task] records next to "
            f"{'any DAG' if len(found) != 1 else found[0].dag_path}; run it first (pilot run or pilot submit), "
            "or name the run's captured stdout with --stdout FILE"
        )
    return found


def _submit_dir(path: str, extra: list[str]) -> list[ClusterRun]:
    try:
        specs = read_clusters(path)
    except ConfigError as exc:
        raise ReportError(str(exc)) from None
    jobs = _submissions(path, {spec.name: spec.dir for spec in specs})
    out = []
    for spec in specs:
        c = _cluster(spec.name, spec.dag, extra)
        c.parents = list(spec.parents)
        _attach_submissions(c, jobs.get(c.name, []))
        out.append(c)
    return out


def _cluster(name: str, dag_path: str, extra: list[str]) -> ClusterRun:
    dag = read_dag(dag_path)
    cluster = ClusterRun(name, dag_path, dag)
    folder = os.path.dirname(os.path.abspath(dag_path))
    cluster.attempts = _records(dag, folder, extra)
    cluster.runs = _runs(folder, dag_path)
    cluster.hosts = _hosts(dag_path + ".resource")
    return cluster


def _records(dag: Dag, folder: str, extra: list[str]) -> list[Attempt]:
    files = []
    with os.scandir(folder) as entries:
        for entry in entries:
            name = entry.name
            if (
                entry.is_file()
                and not name.endswith(_NOT_OUTPUT)
                and not _STDERR.search(name)
                and name != JOBSTATE_FILE
            ):
                files.append(entry.path)
    files += extra
    seen: set[tuple[str, float, int]] = set()
    out: list[Attempt] = []
    tasks = dag.tasks
    for path in files:
        try:
            if os.path.getsize(path) > MAX_SCAN_BYTES:
                continue
            with _text(path) as fh:
                for line in fh:
                    r = read_task_record(line)
                    if r is None or r.name not in tasks:
                        continue
                    key = (r.name, r.start, r.slot)
                    if key in seen:
                        continue
                    seen.add(key)
                    task = tasks[r.name]
                    out.append(
                        Attempt(
                            r.name,
                            r.start,
                            r.duration,
                            r.status,
                            r.app,
                            r.hostname,
                            r.slot,
                            r.cpus,
                            r.memory,
                            task.transformation
                            if task.transformation is not None and task.transformation != "-"
                            else os.path.basename(r.app),
                        )
                    )
        except OSError as exc:
            raise ReportError(f"{path}: cannot read: {exc.strerror}") from None
    out.sort(key=lambda a: (a.start, a.slot))
    return out


def _text(path: str) -> TextIO:
    """A file the report scans, as text; a FIFO or a directory there is an OSError, never a wait."""
    return open(open_regular_fd(path), encoding="utf-8", errors="replace")


def _runs(folder: str, dag_path: str) -> list[Run]:
    """Runs framed by jobstate.log's PMC_STARTED/PMC_FINISHED; the last one's end reason from the result file."""
    runs: list[Run] = []
    log = jobstate_path(folder)
    try:
        for line in read_jobstate(log):
            if line.job != INTERNAL:
                continue
            if line.event == Marker.PMC_STARTED:
                runs.append(Run(start=line.time))
            elif line.event == Marker.PMC_FINISHED and runs:
                runs[-1].end = line.time
                runs[-1].ok = line.info == "0"
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise ReportError(f"{log}: cannot read: {exc.strerror}") from None
    try:
        result = read_result(dag_path)
    except ResultError:  # the report is made of what can be read
        result = None
    if result is not None:
        if not runs:
            runs.append(Run())
        runs[-1].reason = result.outcome.value
        if runs[-1].end is None and result.end is not None:
            runs[-1].end = result.end
    for run in runs[:-1]:
        if not run.reason and run.ok is not None:
            run.reason = "done" if run.ok else "ended early"
    return runs


def _hosts(resource_log: str) -> dict[str, tuple[int, int]]:
    """Slots and CPUs per host: the most ever free (everything is free at registration)."""
    hosts: dict[str, tuple[int, int]] = {}
    try:
        with _text(resource_log) as fh:
            for line in fh:
                parts = line.rstrip("\n").split(",", 4)
                if len(parts) != 5:
                    continue
                try:
                    slots, cpus = int(parts[1]), int(parts[2])
                except ValueError:
                    continue
                old = hosts.get(parts[4], (0, 0))
                hosts[parts[4]] = (max(old[0], slots), max(old[1], cpus))
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise ReportError(f"{resource_log}: cannot read: {exc.strerror}") from None
    return hosts


@dataclass
class Submission:
    """One batch job of a cluster, as ``pilot submit`` sent it."""

    submitted: float
    job_id: str
    script: str  # Parsl's script; the job's stdout/stderr files start with its name


def _submissions(submit_dir: str, folders: dict[str, str]) -> dict[str, list[Submission]]:
    """Per cluster, each batch job ``pilot submit`` gave it, in submission order."""
    try:
        state = SubmitState.load(submit_dir)
    except ConfigError:  # the report is made of what can be read
        state = None
    if state is None:
        return {}
    out: dict[str, list[Submission]] = {}
    for c in state.clusters.values():
        name, ids, job_name = c.name, c.job_ids, c.job_name
        folder = folders.get(name)
        if not job_name or folder is None or not os.path.isdir(folder):
            continue
        # job names are pilot-<plan>-<cluster>-<attempt>; Parsl names the script <job name>.<epoch><suffix>
        stem = job_name.rsplit("-", 1)[0]
        pattern = re.compile(re.escape(stem) + r"-(\d+)\.(\d+(?:\.\d+)?)" + _PARSL_SCRIPT)
        found = []
        with os.scandir(folder) as entries:
            for entry in entries:
                m = pattern.search(entry.name)
                if m:
                    found.append((int(m.group(1)), float(m.group(2)), entry.path))
        found.sort()
        out[name] = [Submission(t, ids[i] if i < len(ids) else "", path) for i, (_, t, path) in enumerate(found)]
    return out


# What the master logs when it aborts (pilot.runtime.master): the reason of a run whose
# result file was replaced by a later run's.
_ABORTS = (("Aborting workflow: max wall time", "walltime"), ("Aborting workflow: SIG", "signal"))


def _attach_submissions(cluster: ClusterRun, jobs: list[Submission]) -> None:
    """Each run gets the latest submission before it started, and its end reason from that job's stderr."""
    for run in cluster.runs:
        if run.start is None:
            continue
        before = [job for job in jobs if job.submitted <= run.start]
        if not before:
            continue
        job = before[-1]
        run.submitted, run.job_id = job.submitted, job.job_id
        if run.reason in ("", "ended early"):
            run.reason = _abort_in(job.script) or run.reason


def _abort_in(script: str) -> str:
    for path in glob.glob(glob.escape(script) + ".*"):
        try:
            if os.path.getsize(path) > MAX_SCAN_BYTES:
                continue
            with _text(path) as fh:
                for line in fh:
                    for marker, reason in _ABORTS:
                        if marker in line:
                            return reason
        except OSError:
            continue
    return ""
