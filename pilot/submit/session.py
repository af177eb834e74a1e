"""The three things a user does with a submit directory: drive it, look at it, cancel it.

Each is one call that returns what happened; the CLI only parses arguments,
calls one of these and prints. Sites not named again on a restart come from
the state file (the site files and ``--set`` values the run started with).
"""

from __future__ import annotations

import enum
import os
import signal
import sys
from dataclasses import dataclass, field, replace
from typing import TextIO

from pilot.contracts.clusters import plan_site_file, read_clusters
from pilot.contracts.daglock import running
from pilot.contracts.submitstate import ClusterState, SubmitState
from pilot.errors import ConfigError
from pilot.sites import SiteConfig, load_site
from pilot.siteschema import MAX_INTEGER
from pilot.submit.backend import SchedulerBackend
from pilot.submit.driver import Driver
from pilot.submit.endruns import end_runs
from pilot.submit.lock import CANCEL_SIGNAL, SubmitLock, holder, stop_holder
from pilot.submit.monitord import cancel_monitoring, incomplete_note, require_root_files, root_monitoring
from pilot.submit.nested import routed
from pilot.submit.options import Options
from pilot.submit.pilots import PREFIX as LAUNCH_PREFIX
from pilot.submit.pilots import PilotBackend
from pilot.submit.render import LiveProgress, failure_lines, status_text
from pilot.submit.views import ClusterView, Shown, Watcher


class StatusCode(enum.IntEnum):
    """``pilot status`` exit codes (2, bad input, comes from the error itself)."""

    DONE = 0
    FAILED = 1
    NOT_FINISHED = 3  # still running, or stopped before the end (resume with pilot submit DIR)


@dataclass
class SiteChoice:
    """A site as the user named it: a shipped name or a file, and --set overrides."""

    spec: str
    overrides: dict[str, str] = field(default_factory=dict)

    def load(self) -> SiteConfig:
        return load_site(self.spec, self.overrides)


@dataclass
class Outcome:
    ok: bool
    stopped: bool  # stopped by a signal before the end: batch jobs keep running, unless ``cancelled``
    status: str  # the final table and total line
    problems: list[str]  # one line per failed task, batch output, not-run cluster
    cancelled: bool = False  # stopped by pilot cancel, which then cancels the batch jobs
    queued: list[str] = field(default_factory=list)  # ids of the batch jobs this run has in a queue at the end
    in_doubt: list[str] = field(default_factory=list)  # names of jobs whose submission is in doubt at the end


def recorded_sites(submit_dir: str) -> list[SiteChoice]:
    """The sites an earlier pilot submit of this directory used, else the site the plan was made for."""
    state = SubmitState.load(submit_dir)
    if state is not None and state.sites:
        return [SiteChoice(v["file"], dict(v.get("set", {}))) for v in state.sites.values()]
    site_file = plan_site_file(submit_dir)
    if not site_file:
        raise ConfigError(f"{submit_dir}: which site? pass --site NAME (see pilot sites)")
    return [SiteChoice(site_file)]


def drive(
    submit_dir: str, choices: list[SiteChoice], opts: Options, stream: TextIO | None = None, monitord: bool = True
) -> Outcome:
    """Run the cluster DAG of ``submit_dir`` to its end (or until SIGTERM/SIGINT), showing live progress.

    The root dagman.out and jobstate.log follow the run, and pegasus-monitord reads them as it goes
    when ``monitord`` and pegasus-wms is installed (pilot.submit.monitord)."""
    stream = stream or sys.stderr
    require_root_files(submit_dir)  # an older directory is refused before anything is written there
    sites = [c.load() for c in choices]
    names = [s.name for s in sites]
    if len(set(names)) != len(names):
        raise ConfigError(
            f"--site: two sites are named {sorted({n for n in names if names.count(n) > 1})[0]!r}; give each file its own name"
        )
    lock = SubmitLock(submit_dir)
    lock.acquire()
    stop = {"flag": False, "cancel": False}

    def on_signal(signum, frame) -> None:  # noqa: ARG001 - a signal handler's signature
        stop["flag"] = True
        stop["cancel"] |= signum == CANCEL_SIGNAL

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT, CANCEL_SIGNAL)}
    pilots: PilotBackend | None = None
    try:
        # With pilot jobs, clusters wait for room in them, not in the queue: max_queued bounds the pilot jobs.
        driven = [replace(s, max_queued=MAX_INTEGER) for s in sites] if opts.pilots else sites
        driver = Driver.load(submit_dir, driven, SchedulerBackend(), opts)
        for choice, site in zip(choices, sites):
            path = os.path.abspath(site.path) if site.path else choice.spec
            driver.state.sites[site.name] = {"file": path, "set": choice.overrides}
        pilots = PilotBackend(submit_dir, sites, list(driver.specs.values()), opts, driver.backend)
        driver.backend = routed(pilots, submit_dir, list(driver.specs.values()), driver.state.sites, opts)
        pilots.end_recorded()  # an earlier driver's pilot jobs: Parsl cannot take them over
        driver.recover()
        watcher = Watcher(list(driver.specs.values()))
        live = LiveProgress(watcher, stream)
        with root_monitoring(driver, run_monitord=monitord):
            ok = driver.run(lambda: stop["flag"], on_step=lambda d: live.show(d.state.clusters))
        live.clear()
    finally:
        if pilots is not None:
            pilots.shutdown()  # this driver's pilot jobs end with it; their clusters resume next time
        for s, h in old.items():
            signal.signal(s, h)
        lock.release()
    views = watcher.views(driver.state.clusters)
    stopped = stop["flag"] and not driver.all_done()
    problems = [] if stopped else failure_lines(views, watcher, submit_dir)
    queued, in_doubt = left_in_queues(driver)
    return Outcome(
        ok,
        stopped,
        status_text(views, driving=False),
        problems,
        cancelled=stopped and stop["cancel"],
        queued=queued,
        in_doubt=in_doubt,
    )


def left_in_queues(driver: Driver) -> tuple[list[str], list[str]]:
    """The batch jobs a stopped driver leaves in queues: the ids it knows, and the names of submissions in doubt
    (the scheduler did not answer whether it took them). Clusters in this driver's pilot jobs are not among
    them: those pilot jobs ended with it."""
    queued, in_doubt = [], []
    for c in driver.state.clusters.values():
        if c.state is ClusterState.QUEUED and c.job_id and not c.job_id.startswith(LAUNCH_PREFIX):
            queued.append(c.job_id)
        elif c.state is ClusterState.SUBMITTING and c.job_name:
            in_doubt.append(c.job_name)
    return queued, in_doubt


@dataclass
class Status:
    text: str
    code: StatusCode


def status(submit_dir: str) -> Status:
    specs = read_clusters(submit_dir)
    state = SubmitState.load(submit_dir)
    records = state.clusters if state is not None else {}
    pid = holder(submit_dir)
    watcher = Watcher(specs)
    views = watcher.views(records)
    if pid is None:
        views = [unsupervised(v, submit_dir) for v in views]
    failed = pid is None and any(v.shown is Shown.FAILED for v in views)  # as pilot submit said it at the end
    text = status_text(
        views, driving=pid is not None, failures=failure_lines(views, watcher, submit_dir) if failed else None
    )
    if pid is not None:
        text += f"\ndriven by pilot submit (pid {pid})"
    note = incomplete_note(submit_dir)
    if note and pid is None:
        text += f"\n{note}"
    return Status(text, status_code(views, pid is not None))


def unsupervised(v: ClusterView, submit_dir: str) -> ClusterView:
    """A cluster the state calls ended or waiting whose pilot run still holds its DAG lock on this host, with no
    driver at work: it runs, and pilot status says so (and how to end it) instead of what the state says. The lock
    is only looked at (/proc/locks), never tried: a driver may start a run of the DAG at any moment."""
    if v.shown in (Shown.DONE, Shown.SUBMITTING, Shown.QUEUED, Shown.HELD, Shown.RUNNING):
        return v
    run = running(v.spec.dag, try_lock=False)
    if run is None:
        return v
    return replace(
        v,
        shown=Shown.RUNNING,
        detail=f"its pilot run ({run.where()}) runs with no pilot submit: " f"pilot cancel {submit_dir} ends it",
    )


def status_code(views: list[ClusterView], driving: bool) -> StatusCode:
    if all(v.shown is Shown.DONE for v in views):
        return StatusCode.DONE
    if driving or any(v.shown in (Shown.SUBMITTING, Shown.QUEUED, Shown.HELD, Shown.RUNNING) for v in views):
        return StatusCode.NOT_FINISHED
    if any(v.shown in (Shown.FAILED, Shown.NOT_RUN, Shown.CANCELLED) for v in views):
        return StatusCode.FAILED
    return StatusCode.NOT_FINISHED


@dataclass
class Cancelled:
    """What pilot cancel did: the batch jobs cancelled, the runs it ended itself, and what still runs."""

    job_ids: list[str]
    ended: list[str]  # one line per pilot run that outlived its job and was ended here
    left: list[str]  # one line per thing that could not be ended (its cluster keeps its state)


def cancel(submit_dir: str, choices: list[SiteChoice] | None) -> Cancelled | None:
    """Stop the driver, cancel every batch job of the run, then end any pilot run of its clusters that still
    holds its DAG lock (pilot.submit.endruns); None when nothing was ever submitted. Only clusters of which
    nothing runs any more are recorded as cancelled. No recovery runs: cancelling only reads the state, asks
    the queues and looks at the DAG locks."""
    submit_dir = os.path.abspath(submit_dir)  # local jobs and their scripts are known by absolute paths
    specs = read_clusters(submit_dir)
    stop_holder(submit_dir)
    state = SubmitState.load(submit_dir)
    if state is None or not any(c.site for c in state.clusters.values()):
        return None
    if choices is None:
        choices = [SiteChoice(v["file"], dict(v.get("set", {}))) for v in state.sites.values()]
    sites = [c.load() for c in choices]
    batch = PilotBackend(submit_dir, sites, specs, Options(), SchedulerBackend())  # ends the run's pilot jobs too
    driver = Driver(submit_dir, specs, state, sites, routed(batch, submit_dir, specs, state.sites, Options()))
    with cancel_monitoring(driver):  # the removed jobs logged as aborted, as DAGMan logs a removal
        job_ids, failed = driver.cancel_jobs()
        runs = end_runs(
            {
                s.name: s.dag
                for s in specs
                if s.name not in failed and driver.state.clusters[s.name].state is not ClusterState.DONE
            }
        )
        left = {**failed, **runs.left}
        driver.mark_cancelled(left)
    return Cancelled(job_ids, runs.ended, [left[name] for name in sorted(left)])
