"""Read what a run left behind: task records, run boundaries, hosts, batch submissions.

Sources, per DAG (all optional but the records):

- ``[cluster-task ...]`` records: in per-task ``<task>.out.NNN`` files
  (``--per-task-stdio``), in the batch job's stdout (``<cluster>.batch.out``,
  Parsl's ``*.stdout`` / ``*.submit.o*``), in kept ``<dag>.out.<rank>`` files,
  and in any stdout capture named with ``--stdout``. Only records of tasks
  of the DAG count, each once.
- ``jobstate.log``: ``PMC_STARTED`` / ``PMC_FINISHED`` frame each pilot run
  (a resubmitted cluster has several).
- ``<dag>.result``: how the last run ended (``walltime`` and ``signal`` are aborts).
- ``<dag>.resource``: slots and CPUs of each host (all free at registration).
- ``<dag>``: the edges, and the transformation of each task from its ``#@`` line.
- For a submit directory, ``clusters.yml`` (clusters and their parents) and
  ``submit.state.json`` (each cluster's batch jobs); the moment a job was
  submitted is the timestamp Parsl puts in its script's file name.
"""

from __future__ import annotations

import datetime
import glob
import math
import os
import re
from dataclasses import dataclass, field
from typing import TextIO

from pilot.contracts.clusters import MAX_CLUSTERS_BYTES
from pilot.contracts.result import MAX_RESULT_BYTES, result_path
from pilot.dag.model import Dag
from pilot.dag.parser import read_dag
from pilot.errors import ConfigError, PilotError
from pilot.util.boundedload import load_json, load_yaml
from pilot.util.safeopen import open_regular_fd
from providers import SCHEDULERS, script_suffixes

RECORD = re.compile(
    r'\[cluster-task (?:id=[^,]*, )?name=(?P<name>[^,]*), start="(?P<start>[^"]*)", duration=(?P<duration>[0-9]{1,15}(?:\.[0-9]*)?), '
    r'status=(?P<status>-?\d+), app="(?P<app>[^"]*)", hostname="(?P<host>[^"]*)", slot=(?P<slot>\d+), '
    r"cpus=(?P<cpus>\d+), memory=(?P<memory>\d+)\]"
)
# Files next to a DAG that never hold task records: pilot's logs, the batch scripts of every scheduler
# plug-in, and stderr (records go to a task's stdout).
_NOT_OUTPUT = (".dag", ".rescue", ".resource", ".result", ".bp", ".yml", ".yaml", ".dagman.out", ".lock", ".notify",
               ".json", ".ec", ".png", ".err", ".stderr", *script_suffixes())
# Parsl's name of a submitted script: <job name>.<epoch><the plug-in's parsl_suffix>
_PARSL_SCRIPT = "(?:" + "|".join(sorted({re.escape(s.parsl_suffix) for s in SCHEDULERS.values()})) + r")\Z"
_STDERR = re.compile(r"\.(?:err\.\d+|e\d+)\Z")  # <task>.err.NNN, <dag>.err.<rank>, torque's <script>.e<job>
MAX_STATE_BYTES = 1 << 30  # submit.state.json, as pilot.submit.state bounds it
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
    if os.path.isdir(path) and os.path.exists(os.path.join(path, "clusters.yml")):
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
    clusters_file = os.path.join(path, "clusters.yml")
    try:
        data = load_yaml(clusters_file, MAX_CLUSTERS_BYTES)
        if not isinstance(data, dict):
            raise TypeError("not a mapping")
        entries = data["clusters"]
        if not isinstance(entries, list):
            raise TypeError("'clusters' is not a list")
    except (FileNotFoundError, ConfigError, KeyError, TypeError) as exc:
        raise ReportError(f"{clusters_file}: not a cluster DAG written by pilot plan ({' '.join(str(exc).split())[:300]})") from None
    jobs = _submissions(path, {str(e.get("name")): os.path.join(path, str(e.get("dir") or e.get("name")))
                               for e in entries if isinstance(e, dict)})
    out = []
    for i, entry in enumerate(entries):
        try:
            name, dag, parents = str(entry["name"]), str(entry["dag"]), list(entry.get("parents") or [])
        except (KeyError, TypeError, AttributeError):
            raise ReportError(f"{clusters_file}: clusters[{i}] lacks its name or dag: is this file written by pilot plan?") from None
        c = _cluster(name, os.path.join(path, dag), extra)
        c.parents = parents
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
    for entry in os.scandir(folder):
        name = entry.name
        if entry.is_file() and not name.endswith(_NOT_OUTPUT) and not _STDERR.search(name) and name != "jobstate.log":
            files.append(entry.path)
    files += extra
    seen: set[tuple[str, str, str]] = set()
    out: list[Attempt] = []
    tasks = dag.tasks
    for path in files:
        try:
            if os.path.getsize(path) > MAX_SCAN_BYTES:
                continue
            with _text(path) as fh:
                for line in fh:
                    if "[cluster-task " not in line:
                        continue
                    m = RECORD.search(line)
                    if m is None or m["name"] not in tasks:
                        continue
                    key = (m["name"], m["start"], m["slot"])
                    if key in seen:
                        continue
                    seen.add(key)
                    task = tasks[m["name"]]
                    out.append(Attempt(
                        m["name"], _epoch(m["start"], path), float(m["duration"]), int(m["status"]), m["app"], m["host"],
                        int(m["slot"]), int(m["cpus"]), int(m["memory"]),
                        task.transformation if task.transformation not in (None, "-") else os.path.basename(m["app"]),
                    ))
        except OSError as exc:
            raise ReportError(f"{path}: cannot read: {exc.strerror}") from None
    out.sort(key=lambda a: (a.start, a.slot))
    return out


def _text(path: str) -> TextIO:
    """A file the report scans, as text; a FIFO or a directory there is an OSError, never a wait."""
    return open(open_regular_fd(path), encoding="utf-8", errors="replace")


def _epoch(stamp: str, path: str) -> float:
    try:
        return datetime.datetime.fromisoformat(stamp).timestamp()
    except ValueError:
        raise ReportError(f"{path}: [cluster-task] record with a bad start time {stamp!r}") from None


def _runs(folder: str, dag_path: str) -> list[Run]:
    """Runs framed by jobstate.log's PMC_STARTED/PMC_FINISHED; the last one's end reason from the result file."""
    runs: list[Run] = []
    log = os.path.join(folder, "jobstate.log")
    try:
        with _text(log) as fh:
            for line in fh:
                if " INTERNAL " not in line:
                    continue
                parts = line.split()
                try:
                    stamp = float(parts[0])
                except (ValueError, IndexError):
                    continue
                if not math.isfinite(stamp):
                    continue  # not a time: a line no pilot wrote
                if "PMC_STARTED" in line:
                    runs.append(Run(start=stamp))
                elif "PMC_FINISHED" in line and runs:
                    runs[-1].end = stamp
                    runs[-1].ok = len(parts) > 4 and parts[4] == "0"
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise ReportError(f"{log}: cannot read: {exc.strerror}") from None
    try:
        result = load_json(result_path(dag_path), MAX_RESULT_BYTES)
    except (FileNotFoundError, ConfigError):  # the report is made of what can be read
        result = None
    if isinstance(result, dict):
        if not runs:
            runs.append(Run())
        runs[-1].reason = str(result.get("reason", ""))[:80]
        if runs[-1].end is None and type(result.get("end")) in (int, float):
            runs[-1].end = float(result["end"])
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
        state = load_json(os.path.join(submit_dir, "submit.state.json"), MAX_STATE_BYTES)
    except (FileNotFoundError, ConfigError):
        return {}
    out: dict[str, list[Submission]] = {}
    clusters = state.get("clusters", []) if isinstance(state, dict) else []
    for c in clusters if isinstance(clusters, list) else []:
        if not isinstance(c, dict):
            continue
        name, ids, job_name = c.get("name"), c.get("job_ids") or [], c.get("job_name") or ""
        folder = folders.get(name) if isinstance(name, str) else None
        if not isinstance(job_name, str) or not job_name or not isinstance(ids, list) or folder is None \
                or not os.path.isdir(folder):
            continue
        # job names are pilot-<plan>-<cluster>-<attempt>; Parsl names the script <job name>.<epoch><suffix>
        stem = job_name.rsplit("-", 1)[0]
        pattern = re.compile(re.escape(stem) + r"-(\d+)\.(\d+(?:\.\d+)?)" + _PARSL_SCRIPT)
        found = []
        for entry in os.scandir(folder):
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
