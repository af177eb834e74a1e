"""True states of a run, per cluster and in total, from the driver's state, the queue's last word and the pilot's files.

Per cluster one of: waiting (parents not done, or due for another attempt),
submitting, queued (with the scheduler's pending reason), held, running (tasks
done/total and running now), done, failed, not run (an ancestor failed), cancelled.
The total counts tasks in pegasus-status' terms: UNREADY (their cluster cannot
start yet), READY (their cluster is released but they have not run), RUNNING,
DONE, FAILED (their last attempt failed), and %DONE.

``time_left`` estimates when the run ends from the plan's runtimes (the
Pegasus ``runtime`` profiles, in clusters.yml as each cluster's ``runtime``
and ``critical_path``): a cluster takes its critical path, or its total
runtime spread over its workers when that is longer; a cluster under way has
the share of its tasks not yet done still to go; the run ends after the
longest chain of clusters still to go. Queue wait and batch job start-up are
not in it, and it is None as soon as one cluster still to run has no runtimes.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from pilot.contracts.clusters import ClusterSpec
from pilot.contracts.queue import QueueState
from pilot.contracts.submitstate import ClusterRecord, ClusterState
from pilot.submit.pilotfiles import PilotFiles, TaskProgress
from pilot.util.graphs import longest_paths


class Shown(str, enum.Enum):
    """A cluster's state as the user sees it."""

    WAITING = "waiting"
    SUBMITTING = "submitting"
    QUEUED = "queued"
    HELD = "held"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    NOT_RUN = "not run"
    CANCELLED = "cancelled"


@dataclass
class ClusterView:
    spec: ClusterSpec
    record: ClusterRecord
    shown: Shown
    detail: str
    progress: TaskProgress

    @property
    def done(self) -> int:
        return self.spec.tasks if self.shown is Shown.DONE else min(self.progress.done, self.spec.tasks)


@dataclass
class Totals:
    unready: int = 0
    ready: int = 0
    running: int = 0
    done: int = 0
    failed: int = 0

    @property
    def total(self) -> int:
        return self.unready + self.ready + self.running + self.done + self.failed

    @property
    def percent(self) -> float:
        return 100.0 * self.done / self.total if self.total else 100.0


class Watcher:
    """Builds views; keeps one PilotFiles per cluster so repeated looks read only new lines."""

    def __init__(self, specs: list[ClusterSpec]) -> None:
        self.specs = specs
        self._files: dict[str, PilotFiles] = {}

    def files(self, spec: ClusterSpec) -> PilotFiles:
        if spec.name not in self._files:
            self._files[spec.name] = PilotFiles(spec.dag)
        return self._files[spec.name]

    def views(self, records: dict[str, ClusterRecord]) -> list[ClusterView]:
        out: list[ClusterView] = []
        blocked: dict[str, str] = {}  # cluster that cannot run or did not -> the failed/cancelled cluster to blame
        for spec in self.specs:  # parents come first
            rec = records.get(spec.name) or ClusterRecord(spec.name)
            culprit = next((blocked[p] for p in spec.parents if p in blocked), None)
            if rec.state is ClusterState.DONE:
                progress = TaskProgress(done=spec.tasks)
            elif rec.state is ClusterState.WAITING and rec.attempts == 0:
                progress = TaskProgress()
            else:
                progress = self.files(spec).update()
            shown, detail = _shown(spec, rec, culprit, records, progress)
            if shown is Shown.NOT_RUN:
                blocked[spec.name] = culprit or spec.name
            elif shown in (Shown.FAILED, Shown.CANCELLED):
                blocked[spec.name] = spec.name
            out.append(ClusterView(spec, rec, shown, detail, progress))
        return out


def _shown(
    spec: ClusterSpec,
    rec: ClusterRecord,
    culprit: str | None,
    records: dict[str, ClusterRecord],
    progress: TaskProgress,
) -> tuple[Shown, str]:
    s = rec.state
    if s is ClusterState.DONE:
        return Shown.DONE, ""
    if s is ClusterState.FAILED:
        return Shown.FAILED, rec.reason
    if s is ClusterState.CANCELLED:
        return Shown.CANCELLED, rec.reason
    if s is ClusterState.SUBMITTING:
        return Shown.SUBMITTING, rec.reason
    if s is ClusterState.QUEUED:
        if rec.queue is QueueState.RUNNING:
            where = f" ({rec.queue_reason})" if rec.queue_reason else ""  # the pilot job a late-bound cluster runs in
            return Shown.RUNNING, f"{len(progress.running)} running now{where}"
        if rec.queue is QueueState.HELD:
            return Shown.HELD, rec.queue_reason
        if rec.queue is QueueState.UNKNOWN:
            return Shown.QUEUED, f"scheduler state unknown{': ' + rec.queue_reason if rec.queue_reason else ''}"
        return Shown.QUEUED, rec.queue_reason
    if culprit is not None:
        return Shown.NOT_RUN, f"{culprit} {records[culprit].state.value}"  # "a failed", "a cancelled"
    waiting_on = [p for p in spec.parents if records.get(p, ClusterRecord(p)).state is not ClusterState.DONE]
    if rec.reason:
        return Shown.WAITING, rec.reason
    if waiting_on:
        return Shown.WAITING, "after " + ", ".join(waiting_on[:3]) + (" ..." if len(waiting_on) > 3 else "")
    return Shown.WAITING, "ready"


def totals(views: list[ClusterView]) -> Totals:
    t = Totals()
    for v in views:
        total = v.spec.tasks
        done = v.done
        running = len(v.progress.running) if v.shown is Shown.RUNNING else 0
        failed = min(len(v.progress.failed), total - done - running) if v.shown is not Shown.DONE else 0
        rest = max(0, total - done - running - failed)
        t.done += done
        t.running += running
        t.failed += failed
        released = v.shown in (Shown.SUBMITTING, Shown.QUEUED, Shown.HELD, Shown.RUNNING) or (
            v.shown is Shown.WAITING and v.detail != "" and not v.detail.startswith("after ")
        )
        ready = min(rest, _ready_tasks(v, rest)) if released else 0
        t.ready += ready
        t.unready += rest - ready
    return t


def _ready_tasks(v: ClusterView, rest: int) -> int:
    """Tasks of a released cluster whose parents are all done: in a running pilot, those it logged SUBMIT for
    and has not started; before a rerun, those the last run left ready or running (its failed tasks are
    counted FAILED until the rerun starts them); before the first run, the cluster's root tasks."""
    p = v.progress
    if v.shown is Shown.RUNNING:
        return len(p.queued)
    if p.started:
        return len((p.queued | p.running) - p.failed.keys())
    return rest if v.spec.roots is None else v.spec.roots


def run_state(views: list[ClusterView], driving: bool) -> str:
    """pegasus-status' STATE word: Running, Success or Failure."""
    if all(v.shown is Shown.DONE for v in views):
        return "Success"
    active = any(v.shown in (Shown.SUBMITTING, Shown.QUEUED, Shown.HELD, Shown.RUNNING) for v in views)
    if driving or active:
        return "Running"
    if any(v.shown in (Shown.FAILED, Shown.NOT_RUN, Shown.CANCELLED) for v in views):
        return "Failure"
    return "Stopped"


def cluster_span(spec: ClusterSpec) -> float | None:
    """Seconds a cluster takes by its runtimes: at least its critical path, at least its work over its workers."""
    if spec.runtime is None or spec.critical_path is None:
        return None
    return max(spec.critical_path, spec.runtime / max(1, spec.ranks - 1))


def time_left(views: list[ClusterView]) -> float | None:
    """Estimated seconds until the run ends (see the module doc); None without runtimes, or with nothing left
    to estimate (every cluster ended or ending)."""
    rests = []
    estimated = False
    for v in views:  # parents come first
        if v.shown in (Shown.DONE, Shown.FAILED, Shown.NOT_RUN, Shown.CANCELLED):
            rests.append(0.0)  # done, or it will not run in this pilot submit
            continue
        span = cluster_span(v.spec)
        if span is None:
            return None
        estimated = True
        rests.append(span * (v.spec.tasks - v.done) / v.spec.tasks if v.spec.tasks else 0.0)
    if not estimated:
        return None
    at = {v.spec.name: k for k, v in enumerate(views)}
    return max(longest_paths(rests, lambda k: [at[p] for p in views[k].spec.parents if p in at]).finish)
