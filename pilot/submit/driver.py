"""DAGMan's job for the cluster DAG: submit ready clusters, watch them, resubmit, stop on failure.

A cluster is ready when its parents are done. It goes to a site with room
(fewer than ``max_queued`` of ours active there); with several sites, the one
with the highest rank -queued/max_queued (seed 004's matchmaking), and its
resubmissions stay there. Whether a cluster succeeded is read from the
pilot's ``<dag>.result`` (a batch queue shows a vanished job as completed
whatever happened): ``done`` is done; ``walltime`` or ``signal`` (ran out of
time, was preempted) and a job that vanished without a result are resubmitted
up to ``max_resubmits`` times, resuming from the rescue log; ``failed`` or
``error`` fail the cluster, after which no new cluster is released. A failed
submission is retried with exponential back-off.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

import yaml

from pilot.errors import ConfigError, SubmitError
from pilot.jobrequest import pilot_args, request_for
from pilot.monitor.result import read_result, result_path
from pilot.monitor.root import RootEvents
from pilot.sites import SiteConfig
from pilot.submit import state as st

log = logging.getLogger("pilot.submit")

SUBMIT_TRIES = 5
TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "MISSING", "EXITING"}


@dataclass
class Cluster:
    name: str
    dir: str
    dag: str
    tasks: int
    ranks: int
    parents: list[str]


@dataclass
class Options:
    max_resubmits: int = 3
    poll: float = 2.0
    backoff: float = 2.0
    on_change: Callable[["Driver"], None] | None = None


def read_clusters(submit_dir: str) -> list[Cluster]:
    path = os.path.join(submit_dir, "clusters.yml")
    try:
        with open(path, encoding="utf-8") as fh:
            data = yaml.safe_load(fh)
    except FileNotFoundError:
        raise ConfigError(f"{submit_dir}: no clusters.yml: is this a directory written by pilot plan?") from None
    return [Cluster(c["name"], os.path.join(submit_dir, c["dir"]), os.path.join(submit_dir, c["dag"]), c["tasks"],
                    c["ranks"], list(c["parents"])) for c in data["clusters"]]


@dataclass
class Driver:
    submit_dir: str
    sites: list[SiteConfig]
    providers: dict[str, Any]
    opts: Options = field(default_factory=Options)

    def __post_init__(self) -> None:
        self.clusters = {c.name: c for c in read_clusters(self.submit_dir)}
        self.site_by_name = {s.name: s for s in self.sites}
        loaded = st.SubmitState.load(self.submit_dir)
        self.state = loaded or st.SubmitState(os.path.join(self.submit_dir, st.STATE_FILE), plan_id=uuid.uuid4().hex[:8])
        for name in self.clusters:
            self.state.clusters.setdefault(name, st.ClusterState(name))
        self._next_try: dict[str, float] = {}
        self.stopping = False
        self.monitor: RootEvents = RootEvents()  # the root dagman.out/jobstate.log (pilot.submit.monitord)
        if loaded:
            self._recover()
        self.state.save()

    # -- restart --------------------------------------------------------------
    def _recover(self) -> None:
        """A previous driver stopped: let providers poll its jobs; submissions in doubt are resolved in step()."""
        from providers import track

        missing = sorted({c.site for c in self.state.clusters.values()
                          if c.site and c.state in (*st.ACTIVE, st.WAITING) and c.site not in self.site_by_name})
        if missing:
            raise ConfigError(
                f"{self.submit_dir}: clusters of this run are on site(s) {', '.join(missing)}: pass them to --site too "
                f"(e.g. --site {','.join([*self.site_by_name, *missing])})"
            )
        for site_name, provider in self.providers.items():
            jobs = [(c.job_id, self.clusters[c.name].dir, c.job_name or "") for c in self.state.clusters.values()
                    if c.state == st.QUEUED and c.site == site_name and c.job_id]
            track(self.site_by_name[site_name], provider, jobs)

    def _resolve(self, c: st.ClusterState) -> bool:
        """A submission in doubt (the driver stopped during it, or sbatch/qsub reported an error):
        adopt the job if the queue has it, settle it if it already ran, else submit again.
        Returns False while the queue cannot be asked (the cluster stays SUBMITTING)."""
        from providers import find, track

        site = self.site_by_name[c.site or ""]
        cluster = self.clusters[c.name]
        result = read_result(cluster.dag)
        if result is not None:  # results of earlier attempts are removed before each submission
            self._settle(c, result)
            return True
        found = find(site, cluster.dir, c.job_name or "")
        if found is None:
            log.warning("cluster %s: cannot ask %s's queue whether job %s exists; will ask again", c.name, site.name, c.job_name)
            return False
        if found:
            log.info("cluster %s: job %s was submitted as %s", c.name, c.job_name, found)
            c.job_ids.append(found)
            c.state = st.QUEUED
            self.monitor.submitted(c.name, found, site.name)
            track(site, self.providers[site.name], [(found, cluster.dir, c.job_name or "")])
        elif c.submit_errors >= SUBMIT_TRIES:
            c.state, c.reason = st.FAILED, f"submission failed {c.submit_errors} times"
            log.error("cluster %s: %s; no new clusters will be released", c.name, c.reason)
        else:
            c.state = st.WAITING  # it never reached the queue: submit again
            c.attempts = max(0, c.attempts - 1)
        self.state.save()
        return True

    # -- one pass of the loop -------------------------------------------------
    def run(self, stop: Callable[[], bool] = lambda: False) -> bool:
        """Drive until every cluster is final (or nothing more can run, or ``stop()``); True when all are done."""
        while not self.finished() and not stop():
            changed = self.step()
            if changed and self.opts.on_change:
                self.opts.on_change(self)
            if not self.finished() and not stop():
                time.sleep(self.opts.poll)
        return all(c.state == st.DONE for c in self.state.clusters.values())

    def finished(self) -> bool:
        states = self.state.clusters.values()
        if any(c.state in st.ACTIVE for c in states):
            return False
        if self.stopping or any(c.state == st.FAILED for c in states):
            return True
        return all(c.state in st.FINAL for c in states) or not self._ready()

    def step(self) -> bool:
        now = time.monotonic()
        changed = False
        for c in [c for c in self.state.clusters.values() if c.state == st.SUBMITTING]:
            if self._next_try.get(c.name, 0.0) <= now:
                changed |= self._resolve(c)
        changed |= self._poll()
        if not self.stopping and not any(c.state == st.FAILED for c in self.state.clusters.values()):
            changed |= self._release()
        return changed

    def _poll(self) -> bool:
        changed = False
        for site_name, provider in self.providers.items():
            queued = [c for c in self.state.clusters.values() if c.state == st.QUEUED and c.site == site_name]
            known = getattr(provider, "resources", None)
            if known is not None:
                for c in [c for c in queued if c.job_id not in known]:
                    # A job no provider can follow (its traces are gone): the result file decides.
                    self._settle(c, read_result(self.clusters[c.name].dag))
                    changed = True
                queued = [c for c in queued if c.job_id in known]
            if not queued:
                continue
            try:
                statuses = provider.status([c.job_id for c in queued])
            except Exception as exc:  # a slow or failing squeue/qstat: try again next pass
                log.warning("%s: status query failed (%s); will retry", site_name, exc)
                for c in queued:  # a finished pilot's own word is enough
                    result = read_result(self.clusters[c.name].dag)
                    if result is not None:
                        self._settle(c, result)
                        changed = True
                continue
            for c, status in zip(queued, statuses):
                name = getattr(status.state, "name", str(status.state))
                if name == "RUNNING":
                    self.monitor.running(c.name)
                result = read_result(self.clusters[c.name].dag)
                if name in TERMINAL or (result is not None and name not in ("RUNNING", "PENDING")):
                    self._settle(c, result)
                    changed = True
        return changed

    def _settle(self, c: st.ClusterState, result: dict | None) -> None:
        reason = result["reason"] if result else "vanished"
        if result and result.get("ok"):
            c.state, c.reason = st.DONE, "done"
            log.info("cluster %s done (job %s)", c.name, c.job_id)
        elif reason in ("walltime", "signal", "vanished") and c.attempts <= self.opts.max_resubmits:
            c.state, c.reason = st.WAITING, f"resubmit after {reason}"
            log.warning("cluster %s: job %s ended (%s); resubmitting, resuming from its rescue log", c.name, c.job_id, reason)
        else:
            done = f", {result['done']}/{result['tasks']} tasks done" if result else ""
            c.state, c.reason = st.FAILED, f"{reason}{done}"
            log.error("cluster %s failed: %s (job %s); no new clusters will be released", c.name, c.reason, c.job_id)
        self.state.save()
        self.monitor.ended(c.name, retry=c.state == st.WAITING, retry_limit=self.opts.max_resubmits)

    def _ready(self) -> list[st.ClusterState]:
        out = []
        for c in self.state.clusters.values():
            if c.state == st.WAITING and all(self.state.clusters[p].state == st.DONE for p in self.clusters[c.name].parents):
                out.append(c)
        return out

    def _release(self) -> bool:
        changed = False
        now = time.monotonic()
        for c in self._ready():
            if self._next_try.get(c.name, 0.0) > now:
                continue
            site = self._pick_site(c)
            if site is None:
                break  # every site is at its limit
            changed |= self._submit(c, site)
        return changed

    def _pick_site(self, c: st.ClusterState) -> SiteConfig | None:
        if c.site is not None:  # resubmissions stay where the cluster ran
            site = self.site_by_name[c.site]
            return site if self.state.count(st.ACTIVE, site.name) < site.max_queued else None
        best, best_rank = None, None
        for site in self.sites:
            active = self.state.count(st.ACTIVE, site.name)
            if active >= site.max_queued:
                continue
            rank = -active / site.max_queued
            if best_rank is None or rank > best_rank:
                best, best_rank = site, rank
        return best

    def _submit(self, c: st.ClusterState, site: SiteConfig) -> bool:
        from providers import submit

        cluster = self.clusters[c.name]
        try:
            os.unlink(result_path(cluster.dag))  # the next result must be this attempt's
        except FileNotFoundError:
            pass
        c.site = site.name
        c.attempts += 1
        c.job_name = f"pilot-{self.state.plan_id}-{c.name}-{c.attempts}"
        c.state = st.SUBMITTING
        self.state.save()
        req = request_for(site, cluster.name, cluster.dir, pilot_args(site, os.path.basename(cluster.dag)), ranks=cluster.ranks)
        try:
            job_id = submit(self.providers[site.name], site, req, c.job_name)
        except SubmitError as exc:
            # The job may exist all the same (a timeout after sbatch accepted it): stay in doubt,
            # and let _resolve look for it before anything is submitted again.
            c.submit_errors += 1
            delay = self.opts.backoff * 2 ** (c.submit_errors - 1)
            self._next_try[c.name] = time.monotonic() + delay
            log.warning("cluster %s: %s; checking the queue and retrying in %.0f s", c.name, exc, delay)
            self.state.save()
            return True
        c.job_ids.append(job_id)
        c.state = st.QUEUED
        c.submit_errors = 0
        self.state.save()
        self.monitor.submitted(c.name, job_id, site.name)
        log.info("cluster %s submitted to %s as job %s (attempt %d)", c.name, site.name, job_id, c.attempts)
        return True

    # -- cancel ---------------------------------------------------------------
    def cancel_all(self) -> list[str]:
        """Cancel every batch job this submit directory has in a queue; return their ids."""
        cancelled: list[str] = []
        for site_name, provider in self.providers.items():
            ids = [c.job_id for c in self.state.clusters.values() if c.site == site_name and c.state in st.ACTIVE and c.job_id]
            if ids:
                provider.cancel(ids)
                cancelled += ids
        for c in self.state.clusters.values():
            if c.state in st.ACTIVE:
                self.monitor.aborted(c.name)
            if c.state in st.ACTIVE or c.state == st.WAITING:
                c.state, c.reason = st.CANCELLED, "pilot cancel"
        self.state.save()
        return cancelled
