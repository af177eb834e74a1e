"""DAGMan's job for the cluster DAG: submit ready clusters, watch them, retry, resubmit, fail like DAGMan.

A cluster is ready when its parents are done. It goes to a site with room
(fewer than ``max_queued`` of ours active there); with several sites, the one
with the highest rank -queued/max_queued, and its further attempts stay there;
and only while the plan's ``dagman.maxjobs`` and ``dagman.maxidle`` have room
over all sites (pilot.submit.throttle).

The queue says where a job stands (pending with a reason, held, running,
finished); whether a cluster succeeded is read from the pilot's
``<dag>.result``, since a queue shows a vanished job as completed whatever
happened in it. When a job has finished:

- ``done``: the cluster is done;
- ``failed`` (tasks failed after their tries): retried, resuming from the
  rescue log, up to the cluster's retry count (the largest Pegasus
  ``dagman.retry`` among its jobs, else ``--retry``); but when its only
  failures are tasks stopped at ``--max-crashes`` (they crashed their worker),
  a rerun would fail them again at once: the cluster fails, saying so;
- ``walltime``, ``signal`` (preemption, node failure, the batch time limit) or
  no result at all (the job vanished before the pilot could write one):
  resubmitted, resuming from the rescue log, up to ``--max-resubmits``; these
  never consume the retries;
- no result while a pilot run still holds the cluster's DAG lock (the job's
  shell ended, not what it started): not ended; the cluster stays running
  until that run lets go, and is never taken for a vanished job;
- ``error`` (the pilot could not start: bad DAG, infeasible task, host
  script; or it could not write its files: a full disk) or a result file that
  cannot be read: the cluster fails.

A job pending for a reason waiting cannot cure (``never_starts`` by its plug-in's
``pending_reasons``) is cancelled; its cluster fails, saying the reason and what it
means. A job pending longer than its site's ``pending_limit``, when the run has other
sites, is withdrawn once and its cluster bound to one of them with room (a cluster
waiting for a pilot job: once that pilot job has pended so long). A failed
cluster stops only its descendants: everything that does not depend
on it is still released (DAGMan's semantics); the run ends when nothing more can
run. A failed submission is retried with exponential back-off, after looking the
job up by its unique name (it may have reached the queue all the same); a site
whose scheduler does not answer is said so at once, with the time its clusters
waiting to be submitted fail (its ``unreachable_limit``), and again at least
every minute (pilot.submit.outages). A ready cluster whose DAG lock a run this
driver did not start still holds (an earlier driver's) waits for it: submitted
now, it would find its DAG locked and end at once without a result.

The constructor does no I/O: ``Driver.load`` reads the submit directory and
``recover()`` is the explicit step that prepares a restart.

What DAGMan would log of each cluster (submitted, running, ended and whether
it goes back for another attempt, aborted) goes to ``monitor``, a
``pilot.monitor.root.RootEvents`` (no-op by default; pilot.submit.monitord
attaches the writer of the root dagman.out and jobstate.log). Events are handed
over right after the state write that records them: a restart then finds in the
state anything a crash kept from the log, and logs it (pilot.submit.monitord).
Task retries (``--retry``/``dagman.retry``) and resubmissions
(``--max-resubmits``) both show there as retries of the node, against the sum
of the two limits.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import logging
import os
import uuid
from collections.abc import Callable, Collection, Mapping

from pilot.contracts.clusters import ClusterSpec, read_clusters
from pilot.contracts.daglock import running
from pilot.contracts.queue import QueueState, QueueStatus
from pilot.contracts.result import ResultError, RunOutcome, read_result, result_path
from pilot.contracts.submitstate import ACTIVE, STATE_FILE, ClusterRecord, ClusterState, SubmitState, state_path
from pilot.errors import ConfigError, SubmitError
from pilot.jobrequest import pilot_args, request_for
from pilot.monitor.root import RootEvents
from pilot.sites import SiteConfig
from pilot.submit.backend import Backend, JobRef
from pilot.submit.options import Clock, Options, SystemClock, retries_for
from pilot.submit.outages import Outages
from pilot.submit.throttle import plan_throttle

log = logging.getLogger("pilot.submit")
WAKE_EVERY = 0.005  # seconds between looks for a cluster's end while the driver waits for its next poll


class Driver:
    def __init__(
        self,
        submit_dir: str,
        specs: list[ClusterSpec],
        state: SubmitState,
        sites: list[SiteConfig],
        backend: Backend,
        opts: Options | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.submit_dir = submit_dir
        self.specs = {s.name: s for s in specs}
        self.children: dict[str, list[str]] = {s.name: [] for s in specs}
        for s in specs:
            for p in s.parents:
                self.children[p].append(s.name)
        self.state = state
        self.sites = list(sites)
        self.site_by_name = {s.name: s for s in sites}
        self.backend = backend
        self.opts = opts or Options()
        self.throttle = plan_throttle(submit_dir)  # dagman.maxjobs and dagman.maxidle, over all sites
        self.clock = clock or SystemClock()
        self.stopping = False
        self._next_try: dict[str, float] = {}
        self._unanswered: dict[str, int] = {}  # cluster -> looks in a row that its site's queue did not answer
        self._pending_since: dict[str, float] = {}  # job id -> when this driver first saw it pending (pending_limit)
        self.outages = Outages(self.clock.monotonic, self.opts.outage_every)  # sites whose scheduler does not answer
        self._held_elsewhere: set[str] = set()  # clusters waiting for a run they did not start to let go of the DAG
        self._silent: set[str] = set()  # sites whose scheduler failed to answer in the current pass
        self._dirty = False  # changes not yet in the state file (written at the end of each step)
        self.monitor: RootEvents = RootEvents()  # DAGMan's log of the clusters (see the module doc)
        self._events: list[Callable[[], None]] = []  # monitor calls waiting for the next state write
        # Records of clusters the plan no longer has (re-planned with --force): set aside, checked by recover().
        self.orphans = [c for n, c in state.clusters.items() if n not in self.specs]
        state.clusters = {name: state.clusters.get(name) or ClusterRecord(name) for name in self.specs}

    @classmethod
    def load(
        cls,
        submit_dir: str,
        sites: list[SiteConfig],
        backend: Backend,
        opts: Options | None = None,
        clock: Clock | None = None,
    ) -> Driver:
        """A driver over a submit directory: its clusters and the state of earlier runs (nothing is written)."""
        specs = read_clusters(submit_dir)
        state = SubmitState.load(submit_dir) or SubmitState(state_path(submit_dir), plan_id=uuid.uuid4().hex[:8])
        return cls(submit_dir, specs, state, sites, backend, opts, clock)

    # -- restart --------------------------------------------------------------
    def recover(self) -> None:
        """Prepare to drive: every site with jobs in a queue must be given; clusters that failed or were
        cancelled get a fresh set of retries and resubmissions (the rescue DAG of DAGMan: their rescue
        logs keep finished tasks from running again); the state is written."""
        busy = [c.name for c in self.orphans if c.state in ACTIVE]
        if busy:
            raise ConfigError(
                f"{self.submit_dir}: {STATE_FILE} has batch jobs for cluster(s) {', '.join(busy[:5])} that "
                f"clusters.yml no longer has (re-planned?): pilot cancel them first, or remove {STATE_FILE}"
            )
        missing = sorted(
            {
                c.site
                for c in self.state.clusters.values()
                if c.site and c.state in ACTIVE and c.site not in self.site_by_name
            }
        )
        if missing:
            raise ConfigError(
                f"{self.submit_dir}: clusters of this run are on site(s) {', '.join(missing)}: pass them to --site too "
                f"(e.g. --site {','.join([*self.site_by_name, *missing])})"
            )
        for c in self.state.clusters.values():
            if c.state in (ClusterState.FAILED, ClusterState.CANCELLED):
                log.info("cluster %s: %s before (%s); trying it again", c.name, c.state.value, c.reason)
                c.state, c.reason = ClusterState.WAITING, ""
                c.retries = c.resubmits = c.submit_errors = 0
                c.queue, c.queue_reason = None, ""
            if c.state is ClusterState.WAITING and c.site is not None and c.site not in self.site_by_name:
                c.site = None  # not in a queue: any site given now may take it
        self._save()

    # -- the loop ---------------------------------------------------------------
    def run(self, stop: Callable[[], bool] = lambda: False, on_step: Callable[[Driver], None] | None = None) -> bool:
        """Drive until nothing more can run (or ``stop()``); True when every cluster is done.
        ``on_step`` is called after every pass (live progress reads the pilots' files then)."""
        while True:
            self.step()
            if on_step is not None:
                on_step(self)
            if stop():
                self.stopping = True
            if self.finished():
                break
            self._wait()
        return self.all_done()

    def _wait(self) -> None:
        """Sleep until the next poll, or less: a backend that learns cheaply that a cluster ended (a pilot job's
        run wrote its done file) ends the wait then, so the cluster's children are released at once, not a poll
        later (a chain of clusters would wait a poll per link)."""
        until = self.clock.monotonic() + self.opts.poll
        while (left := until - self.clock.monotonic()) > 0:
            ended = self.backend.ended()
            if ended:
                return
            self.clock.sleep(left if ended is None else min(left, WAKE_EVERY))

    def all_done(self) -> bool:
        return all(c.state is ClusterState.DONE for c in self.state.clusters.values())

    def finished(self) -> bool:
        """Nothing is in a queue and nothing more can be released (or we are stopping)."""
        if self.stopping:
            return True
        if any(c.state in ACTIVE for c in self.state.clusters.values()):
            return False
        return not any(self._is_ready(c) for c in self.state.clusters.values())

    def step(self) -> bool:
        changed = False
        self._silent = set()  # sites whose scheduler failed to answer in this pass
        now = self.clock.monotonic()
        for c in [c for c in self.state.clusters.values() if c.state is ClusterState.SUBMITTING]:
            if self._next_try.get(c.name, 0.0) <= now:
                changed |= self._resolve(c)
        changed |= self._poll()
        if not self.stopping:
            changed |= self._release()
        self.outages.remind(self._waiting_on)
        if self._dirty:
            self._save()
        return changed

    def _save(self) -> None:
        self.state.save()
        self._dirty = False
        events, self._events = self._events, []
        for event in events:
            event()

    def _log(self, event: Callable[[], None]) -> None:
        """Hand ``event`` to the monitor after the next state write."""
        self._events.append(event)
        self._dirty = True

    # -- queue ------------------------------------------------------------------
    def _poll(self) -> bool:
        changed = False
        for site in self.sites:
            queued = [
                c
                for c in self.state.clusters.values()
                if c.state is ClusterState.QUEUED and c.site == site.name and c.job_id
            ]
            if not queued:
                continue
            try:
                statuses = self.backend.query(site, [c.job_id for c in queued if c.job_id])
            except SubmitError as exc:
                self.outages.failed(site.name, site.unreachable_limit, str(exc))
                for c in queued:  # a pilot that wrote its result has ended: its own word is enough
                    if os.path.exists(result_path(self.specs[c.name].dag)):
                        self._settle(c)
                        changed = True
                continue
            self.outages.answered(site.name)
            for c in queued:
                status = statuses.get(c.job_id or "", QueueStatus(QueueState.FINISHED))
                changed |= self._observe(c, site, status)
        return changed

    def _observe(self, c: ClusterRecord, site: SiteConfig, status: QueueStatus) -> bool:
        if status.state is QueueState.FINISHED:
            self._settle(c)
            return True
        if status.state is QueueState.PENDING and status.never_starts:
            self._cancel_job(site, c)
            self._log(lambda: self.monitor.aborted(c.name))  # removed from the queue, as condor_rm
            self._fail(
                c,
                f"job {c.job_id} can never start on {site.name}: {status.explained or 'the scheduler says so'} "
                f"(cancelled; ask for less, or use another site)",
            )
            return True
        if status.state is QueueState.PENDING and self._withdraw(c, site, status):
            return True
        reason = "" if status.reason.upper() == status.state.name else status.reason  # no reason, only the state again
        if (c.queue, c.queue_reason) == (status.state, reason):
            return False
        if status.state is QueueState.RUNNING and c.queue is not QueueState.RUNNING:
            log.info("cluster %s: job %s running", c.name, c.job_id)
            self._log(lambda: self.monitor.running(c.name))
        elif status.state is QueueState.PENDING and reason:
            log.info("cluster %s: job %s pending (%s)", c.name, c.job_id, status.explained)
        elif status.state is QueueState.HELD:
            log.warning("cluster %s: job %s held%s", c.name, c.job_id, f" ({status.explained})" if reason else "")
        c.queue, c.queue_reason = status.state, reason
        self._dirty = True
        return True

    def _backed_out(self) -> set[str]:
        """Sites a cluster was withdrawn from (pending past the site's pending_limit) where nothing of the run runs
        now: a new cluster goes to another site first rather than wait out the limit there again."""
        withdrawn = {c.withdrawn_from for c in self.state.clusters.values() if c.withdrawn_from}
        if not withdrawn:
            return set()
        return withdrawn - {c.site for c in self.state.clusters.values() if c.queue is QueueState.RUNNING}

    def _withdraw(self, c: ClusterRecord, site: SiteConfig, status: QueueStatus) -> bool:
        """Back out of binding ``c`` to ``site`` when its job has been pending there for the site's pending_limit
        and another of the run's sites has room: the job is cancelled and the cluster bound to that site, once
        per cluster (then it stays, as any further attempt does), said in one line. Pending time counts from when
        this driver first saw the job pending; a cluster waiting for a pilot job counts that pilot job's, as its
        backend measures it (``pending_for``; none while a pilot job of the site runs: it waits for room there)."""
        if not site.pending_limit or c.withdrawn_from is not None or not c.job_id:
            return False
        now = self.clock.monotonic()
        if c.job_id.startswith("pilot:"):
            if status.pending_for is None:
                return False
            waited, what = status.pending_for, "the pilot job it waits for"
        else:
            waited, what = now - self._pending_since.setdefault(c.job_id, now), f"job {c.job_id}"
        if waited < site.pending_limit:
            return False
        active = collections.Counter(r.site for r in self.state.clusters.values() if r.state in ACTIVE)
        room = [s for s in self.sites if s.name != site.name and active[s.name] < s.max_queued]
        if not room or self.specs[c.name].subworkflow is not None:
            return False
        other = max(room, key=lambda s: -active[s.name] / s.max_queued)  # as _pick_site ranks them
        try:
            self.backend.cancel(site, [JobRef(c.job_id, self.specs[c.name].dir, c.job_name or "")])
        except Exception as exc:  # noqa: BLE001 - not withdrawn: it may still start where it waits
            log.warning(
                "cluster %s: %s pending on %s for %.0f s, but cancelling it failed (%s): it stays there",
                c.name,
                what,
                site.name,
                waited,
                exc,
            )
            c.withdrawn_from = site.name  # once: not tried again
            self._dirty = True
            return False
        log.warning(
            "cluster %s: %s pending on %s for %.0f s (its pending_limit %d s): withdrawn and bound to %s",
            c.name,
            what,
            site.name,
            waited,
            site.pending_limit,
            other.name,
        )
        self._log(lambda: self.monitor.aborted(c.name))  # removed from the queue, as condor_rm
        c.withdrawn_from, c.site = site.name, other.name
        c.state, c.reason = ClusterState.WAITING, f"withdrawn from {site.name} after {waited:.0f} s pending"
        c.queue, c.queue_reason = None, ""
        self._dirty = True
        return True

    def _settle(self, c: ClusterRecord) -> None:
        """The cluster's job has ended: its pilot's result decides what comes next (and DAGMan's log says so).
        A job the queue shows ended while its pilot run still holds the DAG lock (the batch job's shell ended
        but not what it started, or the queue lost sight of it) has not ended: it stays running, and is
        never taken for a job that vanished."""
        spec = self.specs[c.name]
        run = None if os.path.exists(result_path(spec.dag)) else running(spec.dag)
        if run is not None:
            note = f"pilot run {run.where()} still holds the DAG lock"
            if (c.queue, c.queue_reason) != (QueueState.RUNNING, note):
                log.warning(
                    "cluster %s: job %s left the queue, but its %s; waiting for it (pilot cancel %s ends it)",
                    c.name,
                    c.job_id,
                    note,
                    self.submit_dir,
                )
                if c.queue is not QueueState.RUNNING:
                    self._log(lambda: self.monitor.running(c.name))
                c.queue, c.queue_reason = QueueState.RUNNING, note
                self._dirty = True
            return
        self._decide(c)
        limit = retries_for(self.opts, self.specs[c.name].retry) + self.opts.max_resubmits
        again = c.state is ClusterState.WAITING  # now: the cluster may be resubmitted before the log is written
        self._log(lambda: self.monitor.ended(c.name, retry=again, retry_limit=limit))

    def _decide(self, c: ClusterRecord) -> None:
        spec = self.specs[c.name]
        c.queue, c.queue_reason = None, ""
        try:
            result = read_result(spec.dag)
        except ResultError as exc:
            self._fail(c, str(exc))
            return
        if result is not None and result.ok:
            c.state, c.reason = ClusterState.DONE, ""
            log.info("cluster %s done (job %s)", c.name, c.job_id)
            self._dirty = True
            return
        if result is not None and result.outcome is RunOutcome.FAILED and result.only_crashes:
            self._fail(
                c,
                f"{result.crash_text()}; not retried: a task that crashes its worker does so "
                f"again ({result.done}/{result.tasks} done)",
            )
            return
        if result is not None and result.outcome is RunOutcome.FAILED:
            limit = retries_for(self.opts, spec.retry)
            failed = f"tasks failed ({result.done}/{result.tasks} done)"
            if c.retries < limit:
                c.retries += 1
                self._again(c, f"{failed}: retry {c.retries} of {limit}")
            else:
                self._fail(
                    c, failed + (f" after {c.retries} {'retry' if c.retries == 1 else 'retries'}" if c.retries else "")
                )
            return
        if result is not None and result.outcome is RunOutcome.ERROR:
            self._fail(
                c,
                "the pilot could not start, or could not write what it must (a full disk: free space and "
                "run pilot submit again, the rescue log keeps what is done); see the batch job's stderr",
            )
            return
        why = {
            RunOutcome.WALLTIME: "ran out of wall time",
            RunOutcome.SIGNAL: "was stopped by a signal (time limit, preemption)",
        }
        what = why[result.outcome] if result is not None else "vanished without a result (node failure or killed)"
        if c.resubmits < self.opts.max_resubmits:
            c.resubmits += 1
            self._again(c, f"job {c.job_id} {what}: resubmit {c.resubmits} of {self.opts.max_resubmits}")
        else:
            self._fail(c, f"job {c.job_id} {what}; no resubmissions left (--max-resubmits {self.opts.max_resubmits})")

    def _again(self, c: ClusterRecord, reason: str) -> None:
        c.state, c.reason = ClusterState.WAITING, reason
        log.warning("cluster %s: %s, resuming from its rescue log", c.name, reason)
        self._dirty = True

    def _fail(self, c: ClusterRecord, reason: str) -> None:
        c.state, c.reason = ClusterState.FAILED, reason
        c.queue, c.queue_reason = None, ""
        below = self.descendants(c.name)
        more = f"; {len(below)} cluster(s) below it will not run" if below else ""
        log.error("cluster %s failed: %s%s", c.name, reason, more)
        self._dirty = True

    def descendants(self, name: str) -> list[str]:
        out: list[str] = []
        seen = {name}
        todo = [name]
        while todo:
            for child in self.children[todo.pop()]:
                if child not in seen:
                    seen.add(child)
                    out.append(child)
                    todo.append(child)
        return out

    def _cancel_job(self, site: SiteConfig, c: ClusterRecord) -> None:
        try:
            self.backend.cancel(site, [JobRef(c.job_id, self.specs[c.name].dir, c.job_name or "")])
        except Exception as exc:  # noqa: BLE001 - the cluster fails either way; say the job may remain
            log.error("cluster %s: cancelling job %s failed (%s); cancel it by hand", c.name, c.job_id, exc)

    # -- submissions in doubt ---------------------------------------------------
    def _resolve(self, c: ClusterRecord) -> bool:
        """A submission in doubt (the driver stopped during it, or the submit command failed): adopt the
        job if the queue has it, settle it if it already ran, else submit again or give up.
        Returns False while the queue cannot be asked (the cluster stays SUBMITTING)."""
        site = self.site_by_name[c.site or ""]
        spec = self.specs[c.name]
        if os.path.exists(result_path(spec.dag)):  # results of earlier attempts are removed before each submission
            self._settle(c)
            return True
        # A scheduler that did not answer in this pass is not asked again in it: each question may hang for its
        # cmd_timeout, and the answer would be the same.
        found = None if site.name in self._silent else self.backend.find(site, spec.dir, c.job_name or "")
        if found is None:
            self._silent.add(site.name)
            now = self.clock.monotonic()
            outage = self.outages.failed(site.name, site.unreachable_limit, c.reason or "the queue could not be asked")
            unanswered = self._unanswered[c.name] = self._unanswered.get(c.name, 0) + 1
            if now >= outage.until:  # the time said when the outage began (pilot.submit.outages) is up
                # The scheduler is out of reach: fail rather than wait forever (a rerun looks for the job again).
                self._log(lambda: self.monitor.refused(c.name))
                self._fail(
                    c,
                    f"{site.name}'s scheduler could not be reached for {now - outage.since:.0f} s "
                    f"({c.submit_errors} failed submission(s), {unanswered} looks for job {c.job_name} "
                    f"unanswered): {c.reason}",
                )
                return True
            delay = min(self.opts.max_backoff, self.opts.backoff * 2 ** (unanswered - 1))
            if now < outage.until:  # the look that may fail it comes when the time said is up, not a back-off later
                delay = min(delay, outage.until - now)
            log.debug(
                "cluster %s: cannot ask %s's queue whether job %s exists; asking again in %.0f s",
                c.name,
                site.name,
                c.job_name,
                delay,
            )
            self._next_try[c.name] = now + delay
            return False
        self.outages.answered(site.name)
        self._unanswered.pop(c.name, None)
        if found:
            log.info("cluster %s: job %s was submitted as %s", c.name, c.job_name, found)
            c.job_ids.append(found)
            c.state, c.queue = ClusterState.QUEUED, QueueState.PENDING
            self._log(lambda: self.monitor.submitted(c.name, found, site.name))
        elif c.submit_errors >= self.opts.submit_tries:
            self._log(lambda: self.monitor.refused(c.name))
            self._fail(c, f"submission to {site.name} failed {c.submit_errors} times: {c.reason}")
        else:
            c.state = ClusterState.WAITING  # it never reached the queue: submit again
            self._dirty = True
        return True

    # -- release ------------------------------------------------------------------
    def _is_ready(self, c: ClusterRecord) -> bool:
        return c.state is ClusterState.WAITING and all(
            self.state.clusters[p].state is ClusterState.DONE for p in self.specs[c.name].parents
        )

    def _release(self) -> bool:
        """Submit every ready cluster that has room on a site. Where one of them starts what a restart could
        only find by its job name (a batch job), all of them are recorded as SUBMITTING (with their unique job
        names) in one write before the first submission, and each batch job's id is written as soon as it is
        known: a restart after a crash anywhere in between looks a job up by name instead of submitting it
        twice. Other changes (queue states, outcomes, clusters fed to a pilot job's run, which a restart finds
        by their DAG lock) are written once per pass: a pass that only feeds pilot jobs writes nothing before
        its feeds, whose clusters wait on that write (some milliseconds, and its fsyncs stall the file
        system's other writers)."""
        now = self.clock.monotonic()
        active = collections.Counter(
            c.site
            for c in self.state.clusters.values()  # a sub-workflow is no batch job
            if c.state in ACTIVE and self.specs[c.name].subworkflow is None
        )
        in_category = collections.Counter(
            self.specs[c.name].category for c in self.state.clusters.values() if c.state in ACTIVE
        )  # DAGMan categories: active data jobs of each kind
        batch: list[tuple[ClusterRecord, SiteConfig, ClusterRecord]] = []  # (record, site, the record before)
        backed_out = self._backed_out()
        submitted, idle = self._throttled()
        maxjobs, maxidle = self.throttle.maxjobs, self.throttle.maxidle
        for c in self.state.clusters.values():
            if all(active[s.name] >= s.max_queued for s in self.sites):
                break  # every site is full
            if (maxjobs is not None and submitted >= maxjobs) or (maxidle is not None and idle >= maxidle):
                break  # as many as dagman.maxjobs or dagman.maxidle allow
            if not self._is_ready(c) or self._next_try.get(c.name, 0.0) > now:
                continue
            spec = self.specs[c.name]
            if spec.category and spec.maxjobs and in_category[spec.category] >= spec.maxjobs:
                continue  # as many of its category run as Pegasus' MAXJOBS allows
            if self._run_elsewhere(c):
                continue
            site = self._pick_site(c, active, backed_out)
            if site is None:
                continue  # its site is full; another cluster may fit elsewhere
            active[site.name] += spec.subworkflow is None
            submitted += spec.subworkflow is None
            idle += spec.subworkflow is None
            in_category[spec.category] += 1
            before = dataclasses.replace(c, job_ids=list(c.job_ids))
            self._prepare(c, site)
            batch.append((c, site, before))
        if not batch:
            return False
        if any(self.backend.found_by_name(site, c.name) for c, site, _ in batch):
            self._save()
        for c, site, before in batch:  # each marks the pass's state to be written (_submit, _put_back)
            if site.name in self._silent:
                self._put_back(c, before, site)
            elif self._submit(c, site):
                self._save()  # and its batch job's id as soon as it has one
        return True  # a fed cluster's record is written at the end of the pass (step)

    def _throttled(self) -> tuple[int, int]:
        """(batch jobs submitted, of them not yet running) for dagman.maxjobs and dagman.maxidle: a job being
        submitted, or in a queue without running (pending or held), is idle as DAGMan counts it."""
        submitted = idle = 0
        for c in self.state.clusters.values():
            if c.state in ACTIVE and self.specs[c.name].subworkflow is None:
                submitted += 1
                idle += c.queue is not QueueState.RUNNING
        return submitted, idle

    def _waiting_on(self, site: str) -> str:
        """What of the run waits for ``site``'s scheduler, in a few words (for the lines of an outage); "" for nothing."""
        mine = [c for c in self.state.clusters.values() if c.site == site]
        doubt = sum(c.state is ClusterState.SUBMITTING for c in mine)
        queued = sum(c.state is ClusterState.QUEUED for c in mine)
        said = [f"{doubt} cluster(s) waiting to be submitted"] if doubt else []
        said += [f"{queued} job(s) in its queue not seen meanwhile"] if queued else []
        return ", ".join(said)

    def _run_elsewhere(self, c: ClusterRecord) -> bool:
        """Whether a pilot run of ``c`` that this driver does not follow (an earlier driver's, one pilot cancel
        could not end) still holds its DAG lock. A run submitted now would find the DAG locked and end at once
        without a result; the cluster waits for that run instead, saying so once."""
        run = running(self.specs[c.name].dag)
        if run is None:
            if c.name in self._held_elsewhere:
                self._held_elsewhere.discard(c.name)
                c.reason = ""
                self._dirty = True
            return False
        reason = (
            f"a pilot run of this cluster still runs ({run.where()}): waiting for it to end "
            f"(pilot cancel {self.submit_dir} ends it)"
        )
        if c.reason != reason:
            log.warning("cluster %s: %s", c.name, reason)
            c.reason = reason
            self._held_elsewhere.add(c.name)
            self._dirty = True
        return True

    def _pick_site(
        self, c: ClusterRecord, active: Mapping[str | None, int], backed_out: Collection[str] = ()
    ) -> SiteConfig | None:
        """The site with the most room for a new cluster, a site ``backed_out`` of only when none other has any."""
        if c.site is not None:  # further attempts stay where the cluster ran
            site = self.site_by_name[c.site]
            return site if active[site.name] < site.max_queued else None
        best, best_rank = None, None
        for site in self.sites:
            if active[site.name] >= site.max_queued:
                continue
            rank = (site.name not in backed_out, -active[site.name] / site.max_queued)
            if best_rank is None or rank > best_rank:
                best, best_rank = site, rank
        return best

    def _put_back(self, c: ClusterRecord, before: ClusterRecord, site: SiteConfig) -> None:
        """Undo ``_prepare`` for a cluster whose site's scheduler has just failed to answer in this pass: it is
        not submitted now (a hung sbatch per cluster would hold the driver, and Ctrl-C, for minutes), and
        nothing of it reached a queue. It waits for the next try of the one that was."""
        for f in dataclasses.fields(ClusterRecord):
            setattr(c, f.name, getattr(before, f.name))
        c.reason = f"waiting for {site.name}'s scheduler to answer"
        self._next_try[c.name] = self.clock.monotonic() + self.opts.backoff
        self._dirty = True

    def _prepare(self, c: ClusterRecord, site: SiteConfig) -> None:
        try:
            os.unlink(result_path(self.specs[c.name].dag))  # the next result must be this attempt's
        except FileNotFoundError:
            pass
        c.site = site.name
        c.attempts += 1
        c.job_name = f"pilot-{self.state.plan_id}-{c.name}-{c.attempts}"
        c.state = ClusterState.SUBMITTING
        c.queue, c.queue_reason = None, ""

    def _submit(self, c: ClusterRecord, site: SiteConfig) -> bool:
        """Submit ``c``; True when it went into a batch queue (or may have): its state is to be written at once."""
        spec = self.specs[c.name]
        # The size the plan kept (the aggregator's nodes, ppn, runtime), else the cluster's ranks on the site's nodes.
        req = request_for(
            site,
            spec.name,
            spec.dir,
            pilot_args(site, os.path.basename(spec.dag), spec.walltime_minutes, spec.run_options),
            ranks=spec.ranks,
            queue=spec.queue,
            account=spec.account,
            directives=spec.directives,
            nodes=spec.nodes,
            ranks_per_node=spec.ranks_per_node,
            walltime_minutes=spec.walltime_minutes,
        )
        self._dirty = True
        try:
            job = self.backend.submit(site, req, c.job_name or "")
        except SubmitError as exc:
            c.submit_errors += 1
            c.reason = " ".join(str(exc).split())
            if not exc.transient:  # refused for good: no job exists
                self._log(lambda: self.monitor.refused(c.name))
                self._fail(c, f"{site.name} refused the job: {c.reason}")
                return True
            # The job may exist all the same (a timeout after sbatch accepted it): stay in doubt,
            # and let _resolve look for it before anything is submitted again.
            delay = min(self.opts.max_backoff, self.opts.backoff * 2 ** (c.submit_errors - 1))
            self._next_try[c.name] = self.clock.monotonic() + delay
            self.outages.failed(site.name, site.unreachable_limit, c.reason)  # says it once for the site
            self._silent.add(site.name)
            log.debug("cluster %s: %s; checking the queue and retrying in %.0f s", c.name, c.reason, delay)
            return True
        self.outages.answered(site.name)
        c.job_ids.append(job.job_id)
        c.job_stdout, c.job_stderr = job.stdout, job.stderr
        self._log(lambda: self.monitor.submitted(c.name, job.job_id, site.name))
        c.state, c.queue = ClusterState.QUEUED, QueueState.PENDING
        if c.submit_errors:  # the reason was the failed submission's
            c.reason, c.submit_errors = "", 0
        log.info("cluster %s submitted to %s as job %s (attempt %d)", c.name, site.name, job.job_id, c.attempts)
        return job.queued

    # -- cancel -------------------------------------------------------------------
    def cancel_all(self) -> list[str]:
        """Cancel every batch job this submit directory has in a queue and mark what was stopped cancelled."""
        cancelled, failed = self.cancel_jobs()
        self.mark_cancelled(failed)
        return cancelled

    def cancel_jobs(self) -> tuple[list[str], dict[str, str]]:
        """Cancel every batch job this submit directory has in a queue (those in doubt found by name).

        Returns the ids cancelled and, per cluster, one line on why its job could not be: a site whose
        cancel fails is asked again job by job, so that each line names exactly what is left."""
        cancelled: list[str] = []
        failed: dict[str, str] = {}
        for site in self.sites:
            mine = [
                (
                    c,
                    JobRef(
                        c.job_id if c.state is ClusterState.QUEUED else None,
                        os.path.join(self.submit_dir, c.name),
                        c.job_name or "",
                    ),
                )
                for c in [*self.state.clusters.values(), *self.orphans]
                if c.site == site.name and c.state in ACTIVE
            ]
            if not mine:
                continue
            try:
                cancelled += self.backend.cancel(site, [ref for _, ref in mine])
                continue
            except SubmitError as exc:
                log.debug("%s: cancelling %d job(s) failed (%s); cancelling them one by one", site.name, len(mine), exc)
            for c, ref in mine:
                try:
                    cancelled += self.backend.cancel(site, [ref])
                except SubmitError as exc:
                    failed[c.name] = (
                        f"cluster {c.name}: job {ref.job_id or c.job_name} on {site.name} could not be "
                        f"cancelled: {' '.join(str(exc).split())}"
                    )
        return cancelled, failed

    def mark_cancelled(self, running: Collection[str] = ()) -> None:
        """Record every cluster that was in a queue or waiting as cancelled, except those in ``running``
        (something of theirs could not be ended: they keep the state they had, which is the truth)."""
        for c in self.state.clusters.values():
            if c.name in running:
                continue
            if c.state in ACTIVE:
                self._log(functools.partial(self.monitor.aborted, c.name))
            if c.state in ACTIVE or c.state is ClusterState.WAITING:
                c.state, c.reason = ClusterState.CANCELLED, "pilot cancel"
                c.queue, c.queue_reason = None, ""
        self._save()
