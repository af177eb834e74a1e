"""Feeding ready clusters to a pilot job's one long-lived ``pilot run`` (pilot-job mode's way to start a cluster).

Each pilot job (block) runs one ``pilot run --inbox DIR`` on all of its nodes,
started as soon as its worker pool connects (``start``), and the driver feeds
it each cluster bound to it (``feed``): a request file in the block's inbox
(``pilot.contracts.inbox``) naming the cluster's DAG and the options its own
``pilot run`` line would get. The run queues the cluster's tasks on its
running workers within milliseconds, writes the cluster's record as the
cluster's own run would, and answers with a done file, which ``status``
reads at each poll in place of a queue query. A cluster of its own would
first pay an MPI start, and many at once queue behind each other's.

The inbox lives in the block's directory under the submit directory: the file
system the workflow lives on, which the driver and every node of the block
already share (docs/architecture.md says why this channel, measured).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

from pilot.contracts import inbox
from pilot.contracts.queue import QueueState, QueueStatus
from pilot.jobrequest import JobRequest, pilot_wall_time
from pilot.sites import SiteConfig
from pilot.submit import blocks

if TYPE_CHECKING:
    from pilot.submit.launches import Launch

_ID_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.")


def worker_args(run_args: list[str]) -> list[str]:
    """The worker-side options of a cluster's ``pilot run`` options, as the parser of that line declares each
    (pilot.cli.run.OptionSide): the block's run takes them from its first cluster (a plan gives every cluster of a
    site the same), the cluster's own travel in each request."""
    from pilot.cli.run import OptionSide, option_sides

    sides = option_sides()
    out: list[str] = []
    args = iter(run_args)
    for a in args:
        name = a.split("=", 1)[0]
        value = [] if "=" in a or not sides.takes_value.get(name) else [next(args, "")]
        if name in sides.implies:
            out.append(sides.implies[name])
        elif sides.side.get(name) is OptionSide.WORKER:
            out += [a, *value]
    return out


def request_id(launch: Launch) -> str:
    """The cluster's name in the inbox: its job name, any other character spelled ``_XX`` (hex)."""
    name = launch.job_id.split(":", 1)[-1]
    return "".join(c if c in _ID_CHARS and c != "_" else f"_{ord(c):02x}" for c in name)


def start(block: blocks.Block, site: SiteConfig, req: JobRequest, now: float) -> None:
    """Start the block's long-lived pilot run, sized to the block, with its first cluster's worker options."""
    os.makedirs(block.inbox, exist_ok=True)
    whole = dataclasses.replace(req, nodes=block.nodes, ranks_per_node=block.slots)
    _, host_flag = blocks.mpi_launcher(site)
    minutes = pilot_wall_time(block.time_left(now) / 60.0)
    pilot = [
        *req.pilot_command,
        "run",
        "--inbox",
        block.inbox,
        "--max-wall-time",
        f"{minutes:g}",
        *worker_args(req.pilot_args[:-1]),
    ]
    block.agent = blocks.launch_agent(block, whole.launch_prefix(), host_flag, pilot)


def room(block: blocks.Block, nodes: int, shared: int) -> tuple[int, ...] | None:
    """Where a cluster of ``nodes`` nodes goes in ``block`` (``shared``: clusters of one node fed there): one of
    several nodes holds that many whole nodes, as its own run in the block would (its tasks run there alone, and
    never wait behind another cluster's), leaving the clusters that share one node at least; one of one node
    shares every node no other cluster holds. None: no room now (the nodes held, by index, else ())."""
    free = [i for i in range(block.nodes) if block.used[i] == 0]
    if nodes <= 1:
        return () if free else None
    if len(free) < nodes + (1 if shared else 0):
        return None
    return tuple(free[-nodes:])  # the last: the first node also runs the pilot run's master


def hosts_at(block: blocks.Block, where: tuple[int, ...]) -> list[str] | None:
    """The names of the block's nodes ``where`` (from the host list its script writes), or None when the names do
    not tell the nodes apart (one machine's "nodes", all ``localhost``; or two names of one short host name): no
    host can be held by name there, and whole nodes are distinct hosts only."""
    try:
        with open(os.path.join(block.script_dir, "hosts"), encoding="utf-8") as fh:
            names = fh.read().split()
    except OSError:
        return None
    if len({n.split(".", 1)[0] for n in names}) != len(names) or any(i >= len(names) for i in where):
        return None  # two names of one host (its full name and its short one, as the pilot run tells hosts apart)
    return [names[i] for i in where]


def feed(block: blocks.Block, launch: Launch, minutes: float, where: tuple[int, ...] = ()) -> None:
    """Hand ``launch``'s cluster to the block's run, with ``minutes`` of wall time (its block's time left), holding
    the block's nodes ``where`` whole (``room``)."""
    job = request_id(launch)
    inbox.clear(block.inbox, job)
    base = launch.dag[:-4] if launch.dag.endswith(".dag") else launch.dag
    inbox.write_request(
        block.inbox,
        inbox.Request(
            job,
            os.path.join(launch.workdir, launch.dag),
            ["--max-wall-time", f"{minutes:g}", *launch.run_args[:-1]],
            os.path.join(launch.workdir, base + ".block.out"),
            os.path.join(launch.workdir, base + ".block.err"),
            hosts_at(block, where) if where else None,
        ),
    )
    block.take(launch.job_id, where, block.slots if where else 0)
    launch.block, launch.future, launch.fed = block, block.agent, True


def status(launch: Launch) -> QueueStatus:
    """Where a fed cluster stands: FINISHED once its run answered (or the block's run is gone)."""
    block = launch.block
    assert block is not None
    where = f"pilot job {block.job_id}"
    if launch.future is None or launch.future.done() or inbox.read_done(block.inbox, request_id(launch)) is not None:
        return QueueStatus(QueueState.FINISHED)
    if not taken(launch):
        return QueueStatus(QueueState.PENDING, f"fed to {where}")
    return QueueStatus(QueueState.RUNNING, f"in {where}")


def taken(launch: Launch) -> bool:
    """Whether the block's run took the cluster's request (its tasks may have started there)."""
    assert launch.block is not None
    return not os.path.exists(os.path.join(launch.block.inbox, request_id(launch) + inbox.REQUEST_SUFFIX))


def cancel(launch: Launch) -> None:
    """End a fed cluster's run in its block (its tasks killed), as a cancel of its own job would."""
    block = launch.block
    if block is not None and block.agent is not None and not block.agent.done():
        try:
            inbox.write_cancel(block.inbox, request_id(launch))
        except OSError:
            pass  # the block is going: the cluster goes with it


def stop(block: blocks.Block) -> None:
    """Tell the block's run to end (its clusters end as after a signal, resuming from their rescue logs)."""
    if block.agent is not None and not block.agent.done():
        try:
            inbox.write_stop(block.inbox)
        except OSError:
            pass


class DoneWatch:
    """Tells the driver, between its polls, that a fed cluster may have ended, so that its children are
    released then and not a poll later (a chain of clusters would wait a poll per link).

    Each look stats the done directory of each block running fed clusters: one metadata call per block,
    whatever the number of clusters, cheap on the shared file system (a look per cluster would not be).
    A directory's time can be coarse (a clock tick on ext4; over NFS its attribute cache may hide a change
    for seconds): two done files landing within one tick show as one change, so each change is followed
    by one more wake ``RECHECK`` seconds later, and what is still missed is read at the next poll as before.
    """

    RECHECK = 0.05

    def __init__(self, poll: float) -> None:
        self.poll = poll
        self._seen: dict[str, int] = {}  # inbox -> its done directory's modification time, last looked at
        self._again: float | None = None  # when to wake once more after a change
        self._early: set[str] = set()  # sites whose next query comes in a pass woken early
        self._asked: dict[str, float] = {}  # site -> when its queue was last asked about its blocks

    def may_ask(self, site: str, now: float) -> bool:
        """Whether this pass asks the site's queue: a pass at a poll does; one woken early by ``changed`` only
        when a poll's time has passed since the last query, so that the queue is asked once a poll."""
        early = site in self._early
        self._early.discard(site)
        if early and now - self._asked.get(site, now - self.poll) < self.poll:
            return False
        self._asked[site] = now
        return True

    def changed(self, every: Iterable[blocks.Block], sites: Iterable[str], now: float) -> bool | None:
        """Whether a done file may have come since the last look (then the next pass of each of ``sites`` is an
        early one); None when no block runs a fed cluster."""
        watched = [b for b in every if b.apps and b.agent is not None]
        if not watched:
            return None
        hit = False
        for block in watched:
            try:
                mtime = os.stat(os.path.join(block.inbox, inbox.DONE_DIR)).st_mtime_ns
            except OSError:
                mtime = 0  # none ended there yet
            if self._seen.get(block.inbox) != mtime:
                self._seen[block.inbox] = mtime
                hit = True
        if hit:
            self._again = now + self.RECHECK
        elif self._again is not None and now >= self._again:
            self._again = None
        else:
            return False
        self._early = set(sites)
        return True
