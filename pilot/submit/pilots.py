"""Late binding: ready clusters run in pilot jobs (blocks) that outlive them, not in a batch job each.

``pilot submit --pilots N`` keeps up to N blocks (never more than the site's
``max_queued``) of ``pilot_nodes`` nodes and ``pilot_walltime`` each, through
the site's own Parsl provider (pilot.submit.blocks), and binds a cluster to a
block only when the cluster is ready and a block has room:

- ``submit`` queues the cluster here (job id ``pilot:<job name>``); it is
  PENDING ("waiting for a pilot job") until a running block has the nodes;
- at each poll (``query``) blocks are asked about through the scheduler
  plug-in (a block that ended takes its clusters with it: they are FINISHED
  and the driver resumes them from their rescue logs, as after a node
  failure; a block pending for a reason its plug-in says never clears is
  ended, and the clusters waiting on that site fail, as a cluster's own job
  would: every block there asks for the same), waiting clusters are started
  in the blocks pilot.submit.binding chooses (room, and the wall time left
  for the cluster's estimated makespan), blocks are added while clusters
  wait for nodes no block has or will have, and ended after ``pilot_idle_timeout``
  seconds without a cluster (``pilot_min_blocks`` stay);
- each block runs one long-lived ``pilot run --inbox`` on all its nodes, and
  a cluster bound to it is fed to that run (pilot.submit.feed): its tasks
  join the running workers in milliseconds, no MPI start of its own;
- a cluster's run gets the time its block has left, less the
  margin a batch job's gets, as ``--max-wall-time``: what cannot finish
  there is not started, and the cluster resumes in another block;
- every block's batch job id is in ``pilots.json`` from the moment it is
  submitted (pilot.submit.blockrecord): a restarted driver, and ``pilot
  cancel``, end the blocks an earlier driver left, so none is ever lost
  track of; the driver ends its own blocks as it stops.

With no ``--pilots`` every call goes to the per-cluster backend, except the
ids of an earlier pilot-job run, which report FINISHED (their blocks were ended).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future

from pilot.contracts import inbox
from pilot.contracts.clusters import ClusterSpec
from pilot.contracts.queue import QueueState, QueueStatus
from pilot.contracts.result import ResultError, RunOutcome, read_result
from pilot.errors import SubmitError
from pilot.jobrequest import JobRequest, pilot_wall_time
from pilot.sites import SiteConfig
from pilot.submit import binding, blockrecord, blocks, feed
from pilot.submit.backend import Backend, JobRef, Submitted
from pilot.submit.backoff import Backoff
from pilot.submit.launches import Launch, start_own_run, stop_own_run
from pilot.submit.options import Options
from pilot.submit.pilotsize import PilotSettings, makespan

log = logging.getLogger("pilot.submit")
PREFIX = "pilot:"


def _ended(future: Future) -> str:
    """How a block's pilot run ended, in words."""
    try:
        return f"exit status {future.result(timeout=0)}"
    except Exception as exc:  # noqa: BLE001 - Parsl fails it back in many ways (a lost pool among them)
        return " ".join(str(exc).split())[:200] or type(exc).__name__


class PilotBackend:
    def __init__(
        self,
        submit_dir: str,
        sites: Sequence[SiteConfig],
        specs: Sequence[ClusterSpec],
        opts: Options,
        batch: Backend,
        clock: Callable[[], float] = time.monotonic,
        fed: bool = True,
    ) -> None:
        self.submit_dir = submit_dir
        self.batch = batch
        self.clock = clock
        self.sites = {s.name: s for s in sites}
        self.settings = {s.name: PilotSettings.resolve(s, opts, specs) for s in sites} if opts.pilots else {}
        self.specs = {os.path.basename(s.dir): s for s in specs}
        self.blocks: list[blocks.Block] = []
        self.launches: dict[str, Launch] = {}
        self._count = 0
        # Pilot jobs that could not be submitted, and those whose pilot run died at start: each waits longer.
        self._refused = Backoff("no pilot job could be submitted")
        self._died = Backoff("no pilot run started")
        self._never: dict[str, str] = {}  # site -> why its pilot jobs never start (the scheduler's pending reason)
        # cluster directory -> the blocks whose end cut it short: its next attempt goes to another, with more time
        self._cut: dict[str, set[str]] = {}
        self.run_dir = os.path.join(submit_dir, "pilots")
        # Clusters are fed to each block's one long-lived pilot run (False: each starts an MPI run of its own in
        # its block, on the slots the driver counts for it); the first request of a site sizes that run.
        self.fed = fed
        self._first: dict[str, JobRequest] = {}
        self._done_watch = feed.DoneWatch(opts.poll)  # between polls the driver asks ``ended``

    # -- the record of blocks (pilot.submit.blockrecord) ------------------------------------
    def _save(self) -> None:
        blockrecord.save(self.submit_dir, self.blocks)

    def end_recorded(self) -> list[str]:
        """End the blocks an earlier driver left (its record), and wait until the queue no longer has them:
        their clusters resume from their rescue logs only once nothing of theirs runs."""
        ended = blockrecord.end_recorded(self.submit_dir, self.sites, self.batch, self.clock)
        self._save()
        return ended

    # -- Backend ----------------------------------------------------------------------------
    def submit(self, site: SiteConfig, req: JobRequest, job_name: str) -> Submitted:
        if site.name not in self.settings:
            return self.batch.submit(site, req, job_name)
        job_id = PREFIX + job_name
        self._first.setdefault(site.name, req)
        self.launches[job_id] = Launch.of(job_id, site.name, req, makespan(self.specs.get(req.name)))
        base = req.pilot_args[-1][:-4] if req.pilot_args[-1].endswith(".dag") else req.pilot_args[-1]
        self._place(self.launches[job_id], self.clock())  # at once, when a running block has room for it
        out, err = (os.path.join(req.workdir, base + suffix) for suffix in (".block.out", ".block.err"))
        return Submitted(job_id, out, err, queued=False)

    def found_by_name(self, site: SiteConfig, cluster: str) -> bool:
        """A cluster of a site with pilot jobs is fed to one (the pilot jobs themselves are in pilots.json from
        their submission on); any other is the per-cluster backend's."""
        return site.name not in self.settings and self.batch.found_by_name(site, cluster)

    def ended(self) -> bool | None:
        """Whether a fed cluster's run may have written its done file since the last look (None: none is fed)."""
        return self._done_watch.changed(self.blocks, self.settings, self.clock())

    def query(self, site: SiteConfig, job_ids: Sequence[str]) -> dict[str, QueueStatus]:
        """Where the clusters stand; one queue query asks about the site's batch jobs and pilot jobs alike, at
        most once a poll (a pass woken early by ``ended`` reads the done files and asks the queue nothing)."""
        rest = {j for j in job_ids if not j.startswith(PREFIX)}
        own = [b.job_id for b in self.blocks if b.site == site.name] if site.name in self.settings else []
        states: dict[str, QueueStatus] | None = None  # None: nothing is decided about the blocks this time
        if self._done_watch.may_ask(site.name, self.clock()) or rest:
            try:
                states = self.batch.query(site, [*rest, *own]) if rest or own else {}
            except SubmitError:
                if rest:
                    raise  # the driver's (an outage of the queue)
        if site.name in self.settings:
            self.tick(site, states)
        out = {j: s for j, s in (states or {}).items() if j in rest}
        for job_id in job_ids:
            if job_id.startswith(PREFIX):
                out[job_id] = self._status(self.launches.get(job_id))
        return out

    def _status(self, launch: Launch | None) -> QueueStatus:
        if launch is None:  # an attempt of an earlier driver: its block was ended when this one started
            return QueueStatus(QueueState.FINISHED, "its pilot job ended")
        if launch.block is None:
            if launch.site in self._never:  # the driver cancels it and fails the cluster with this reason
                return QueueStatus(QueueState.PENDING, self._never[launch.site], never_starts=True)
            why = self._refused.given_up(launch.site) or self._died.given_up(launch.site)
            if why:  # the driver cancels it and fails the cluster with this reason
                return QueueStatus(QueueState.PENDING, why, never_starts=True)
            return QueueStatus(
                QueueState.PENDING, "waiting for a pilot job", pending_for=self._pending_for(launch.site, self.clock())
            )
        if launch.fed:
            status = feed.status(launch)
            if status.state is QueueState.FINISHED:
                self._note_cut(launch)
                self._release(launch)
            return status
        if launch.future is None or launch.future.done():
            self._note_cut(launch)
            self._release(launch)
            return QueueStatus(QueueState.FINISHED)
        where = f"pilot job {launch.block.job_id}"
        if os.path.exists(launch.marker):
            return QueueStatus(QueueState.RUNNING, f"in {where}")
        return QueueStatus(QueueState.PENDING, f"starting in {where}")

    def _note_cut(self, launch: Launch) -> None:
        """A cluster that ran out of its block's time is not started in that block again (it would have less)."""
        try:
            result = read_result(os.path.join(launch.workdir, launch.dag))
        except ResultError:
            return  # the driver says what is wrong with it
        if result is not None and result.outcome is RunOutcome.WALLTIME and launch.block is not None:
            self._cut.setdefault(launch.workdir, set()).add(launch.block.label)

    def _release(self, launch: Launch) -> None:
        self.launches.pop(launch.job_id, None)
        if launch.block is not None:
            launch.block.give(launch.job_id)
            if not launch.block.apps:
                launch.block.idle_since = self.clock()

    def find(self, site: SiteConfig, workdir: str, job_name: str) -> str | None:
        if PREFIX + job_name in self.launches:
            return PREFIX + job_name
        return self.batch.find(site, workdir, job_name)  # a batch job an earlier driver may have submitted as that

    def cancel(self, site: SiteConfig, jobs: Sequence[JobRef]) -> list[str]:
        rest = [j for j in jobs if not (j.job_id or "").startswith(PREFIX)]
        out = self.batch.cancel(site, rest) if rest else []  # batch jobs of earlier attempts, in either mode
        for job in jobs:
            launch = self.launches.pop(job.job_id or "", None)
            if launch is not None:
                out.append(launch.job_id)
                self._stop(launch)
        if not self.settings:  # pilot cancel: nothing of the run is left to bind, its blocks go too
            self.shutdown()
            out += self.end_recorded()
        elif self._unwanted(site, self.clock()):  # its last waiting cluster withdrawn from the site
            self._save()
        return out

    def _stop(self, launch: Launch) -> None:
        """Stop one cluster's launch: its app if it has not started, else its launcher's process group (fed: its
        run in the block's pilot run)."""
        if launch.fed:
            feed.cancel(launch)
        else:
            stop_own_run(launch)
        if launch.block is not None:
            launch.block.give(launch.job_id)

    def shutdown(self) -> None:
        """End every block of this driver (as it stops: its clusters resume next time from their rescue logs)."""
        for block in self.blocks:
            feed.stop(block)
            blocks.end_block(block)
        self.blocks = []
        if self.settings:
            self._save()

    # -- binding ------------------------------------------------------------------------------
    def tick(self, site: SiteConfig, states: dict[str, QueueStatus] | None) -> None:
        """Given what the queue says of the site's blocks (None: it did not answer), start waiting clusters where
        they fit, add and end blocks."""
        settings = self.settings[site.name]
        now = self.clock()
        mine = [b for b in self.blocks if b.site == site.name]
        changed = False
        for block in mine:
            status = None if states is None else states.get(block.job_id, QueueStatus(QueueState.FINISHED))
            if status is not None and status.state is QueueState.FINISHED:
                self._lost(block)
                changed = True
            elif status is not None and status.never_starts:
                self._never[site.name] = f"its pilot job {block.job_id} never starts: {status.explained}"
                log.warning("%s: pilot job %s never starts (%s): ending it", site.name, block.job_id, status.explained)
                blocks.end_block(block)
                self.blocks.remove(block)
                changed = True
            elif block.running_since is None and blocks.connected(block):
                block.running_since = now
            if block not in self.blocks or not self.fed or block.running_since is None:
                continue
            if block.agent is None and site.name in self._first:
                feed.start(block, site, self._first[site.name], now)
            elif block.agent is not None and block.agent.done():
                ended = _ended(block.agent)
                if inbox.is_up(block.inbox):
                    self._lost(block, f"its pilot run ended ({ended})")
                else:
                    delay = self._died.failed(site.name, now, f"pilot job {block.job_id}: {ended}")
                    log.warning(
                        "pilot job %s: its pilot run died at start (%s); the next pilot job in %.0f s, for the "
                        "%d cluster(s) fed to it",
                        block.job_id,
                        ended,
                        delay,
                        len(block.apps),
                    )
                    self._lost(block, None)
                changed = True
            elif self._died.failing(site.name) and block.agent is not None and inbox.is_up(block.inbox):
                self._died.cleared(site.name)
        waiting = [x for x in self.launches.values() if x.site == site.name and x.block is None]
        # Several nodes first (then as they came): fed so, each is taken before one-node clusters use its nodes.
        for launch in sorted(waiting, key=lambda x: -x.nodes):
            self._place(launch, now)
        changed |= self._unwanted(site, now)
        changed |= self._scale(site, settings, now)
        if changed:
            self._save()

    def _lost(self, block: blocks.Block, why: str | None = "") -> None:
        """End a block that was lost (``why``: how, or None where that was said already), and free its clusters."""
        if why is not None:
            log.warning(
                "pilot job %s ended with %d cluster(s) in it%s; they resume from their rescue logs",
                block.job_id,
                len(block.apps),
                f" ({why})" if why else "",
            )
        for job_id in list(block.apps):
            launch = self.launches.get(job_id)
            if launch is not None and launch.fed and not feed.taken(launch):  # never started: it waits for another
                launch.block, launch.future, launch.fed = None, None, False
            elif launch is not None:
                launch.future = None  # FINISHED at the next look: the driver reads its result (or none)
        blocks.end_block(block)
        self.blocks.remove(block)

    def _place(self, launch: Launch, now: float) -> None:
        """Bind a waiting cluster to the block pilot.submit.binding chooses, if any, and start it there."""
        cut = self._cut.get(launch.workdir, ())
        mine = [b for b in self.blocks if b.site == launch.site]
        # Fed, a cluster of one node shares the block's workers with every other, one of several holds whole nodes.
        room = {
            b.label: feed.room(b, launch.nodes, sum(1 for w, _ in b.apps.values() if not w))
            if self.fed
            else b.fit(launch.nodes, launch.ranks_per_node)
            for b in mine
        }
        offers = [
            binding.Offer(
                b.label,
                b.running_since is not None and (b.agent is not None or not self.fed),
                room[b.label] is not None,
                b.time_left(now),
                b.margin,
                len(b.apps) if self.fed else b.free_slots,
                b.label in cut,
            )
            for b in mine
        ]
        label = binding.choose(offers, launch.makespan, self._may_add(launch.site))
        block = next((b for b in mine if b.label == label), None)
        if block is None:
            return
        if launch.still_running():
            return  # an earlier attempt lives on (its block's processes not yet gone): never two at once
        minutes = pilot_wall_time(block.time_left(now) / 60.0)
        where = room[block.label]
        assert where is not None  # chosen among the blocks with room
        if self.fed:
            feed.feed(block, launch, minutes, where)
            log.info(
                "%s: fed to pilot job %s (%.0f s of wall time left there)",
                launch.job_id,
                block.job_id,
                block.time_left(now),
            )
            return
        start_own_run(launch, block, self.sites[launch.site], minutes, where)
        log.info(
            "%s: started in pilot job %s (%.0f s of wall time left there)",
            launch.job_id,
            block.job_id,
            block.time_left(now),
        )

    def _pending_for(self, site_name: str, now: float) -> float | None:
        """How long the clusters waiting at the site have waited for a pilot job to start: the seconds its oldest
        pilot job has pended, while none runs (None while one runs: they wait for room in it; or none is queued)."""
        mine = [b for b in self.blocks if b.site == site_name]
        if not mine or any(b.running_since is not None for b in mine):
            return None
        return now - min(b.submitted for b in mine)

    def _unwanted(self, site: SiteConfig, now: float) -> bool:
        """End the site's pilot jobs pending past its ``pending_limit`` once no cluster waits at the site (the
        driver withdrew them to another site): started, each would only idle. ``pilot_min_blocks`` stay."""
        if (
            not site.pending_limit
            or site.name not in self.settings
            or any(x.site == site.name and x.block is None for x in self.launches.values())
        ):
            return False
        mine = [b for b in self.blocks if b.site == site.name]
        late = [b for b in mine if b.running_since is None and now - b.submitted >= site.pending_limit]
        late = late[: max(0, len(mine) - self.settings[site.name].min_blocks)]
        for block in late:
            log.warning(
                "%s: pilot job %s pending for %.0f s (its pending_limit %d s) and no cluster waits for it "
                "there any more: cancelled",
                site.name,
                block.job_id,
                now - block.submitted,
                site.pending_limit,
            )
            blocks.end_block(block)
            self.blocks.remove(block)
        return bool(late)

    def _may_add(self, site_name: str) -> bool:
        settings = self.settings[site_name]
        return sum(1 for b in self.blocks if b.site == site_name) < settings.pilots

    def _scale(self, site: SiteConfig, settings: PilotSettings, now: float) -> bool:
        mine = [b for b in self.blocks if b.site == site.name]
        waiting = [x for x in self.launches.values() if x.site == site.name and x.block is None]
        coming = sum(b.nodes * b.slots for b in mine if b.running_since is None)  # in slots (cores)
        wanted = sum(x.nodes * x.ranks_per_node for x in waiting)
        changed = False
        while (
            (wanted > coming or len(mine) < settings.min_blocks)
            and len(mine) < settings.pilots
            and self._refused.ready(site.name, now)
            and self._died.ready(site.name, now)
            and site.name not in self._never
        ):
            self._count += 1
            label = f"block{self._count}-{os.getpid()}"
            try:
                block = blocks.start_block(
                    site, label, settings.nodes, settings.walltime_minutes, self.run_dir, settings.apps
                )
            except Exception as exc:  # noqa: BLE001 - Parsl raises many kinds: the scheduler said no
                error = " ".join(str(exc).split())[:300]
                delay = self._refused.failed(site.name, now, error)
                log.warning(
                    "%s: a pilot job could not be submitted (%s); trying again in %.0f s", site.name, error, delay
                )
                return changed
            self._refused.cleared(site.name)
            block.submitted = now  # by the clock pending times are measured with
            self.blocks.append(block)
            self._save()  # recorded before anything else: a crash from here on cannot lose it
            mine.append(block)
            coming += block.nodes * block.slots
            changed = True
            log.info(
                "%s: pilot job %s submitted (%d nodes, %.0f min)",
                site.name,
                block.job_id,
                block.nodes,
                settings.walltime_minutes,
            )
        for block in [b for b in mine if not b.apps and b.running_since is not None]:
            idle = not waiting and len(mine) > settings.min_blocks and now - block.idle_since >= settings.idle_timeout
            # No waiting cluster can start there (each ran out of its time there, or too little is left): it
            # makes room for a fresh one.
            spent = bool(waiting) and all(
                block.label in self._cut.get(x.workdir, ()) or block.time_left(now) <= block.margin for x in waiting
            )
            if idle or spent:
                log.info(
                    "%s: pilot job %s %s: ending it",
                    site.name,
                    block.job_id,
                    f"idle for {now - block.idle_since:.0f} s" if idle else "of no use to the clusters waiting",
                )
                blocks.end_block(block)
                self.blocks.remove(block)
                mine.remove(block)
                changed = True
        return changed
