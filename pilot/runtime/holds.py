"""The hosts of a long-lived pilot run that fed DAGs hold whole, and those a holder still waits for.

A cluster of several nodes fed to a pilot job's run holds whole hosts, as it
would with nodes of its own in the block: its tasks run there alone. The
other DAGs start nothing on a held host while it runs (``held``, which their
queues read as barred). A task of another DAG may already run on one of them
when the holder is taken (fed earlier, it started there while nothing was
held): the holder starts nothing on that host until that task ended
(``draining``, which the holder's queue reads as barred), never beside it.
Both sets are read in place by the queues (``Matcher.sharing``): they change
here only by updating, never by rebinding.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING

from pilot.contracts import inbox
from pilot.dag.model import Task
from pilot.runtime.slotmatch import Allocation, Matcher, whole_hosts

if TYPE_CHECKING:  # the runs hold their queues over these sets; this module only reads what runs where
    from pilot.runtime.dagrun import DagRun

log = logging.getLogger("pilot.master")

Running = Mapping[int, tuple["DagRun", Task, Allocation, int]]  # rank -> its task's run, task, slot, seq


class Holds:
    """The two sets of one pilot run and the rules that change them, as runs are taken, tasks end and runs end."""

    def __init__(self, matcher: Matcher) -> None:
        self.matcher = matcher  # the agent's: every worker's host
        self.held: set[str] = set()  # hosts a fed DAG holds whole: the other DAGs start nothing there
        self.draining: set[str] = set()  # of those, where another DAG's task still runs: the holder waits

    def hosts(self, req: inbox.Request) -> frozenset[str] | None:
        """The workers' names of the hosts a request holds whole; None when it shares (said in one line when it
        asked for hosts: see ``whole_hosts``)."""
        if not req.hosts:
            return None
        hosts = whole_hosts(req.hosts, self.matcher.hosts)
        if hosts is None:
            log.warning(
                "%s: it holds hosts %s, but this run's workers are on %s: it shares them all",
                req.id,
                ", ".join(req.hosts),
                ", ".join(sorted(self.matcher.hosts)),
            )
        return hosts

    def barred(self, hosts: frozenset[str] | None) -> set[str]:
        """The hosts a run's queue may not use now: sharing (``hosts`` None), those other runs hold; holding
        ``hosts``, those where other runs' tasks still run."""
        return self.held if hosts is None else self.draining

    def take(self, run: DagRun, running: Running) -> None:
        """``run`` was just taken: the hosts it holds are barred to the others, and those where their tasks
        still run to it, until they ended."""
        if not run.hosts:
            return
        self.held |= run.hosts
        busy = Counter(
            alloc.host.name
            for owner, _, alloc, _ in running.values()
            if owner is not run and alloc.host.name in run.hosts
        )
        if busy:
            self.draining.update(busy)
            log.info(
                "%s: it starts nothing on %s until the other DAGs' task(s) there ended (%s)",
                run.id,
                ", ".join(sorted(busy)),
                ", ".join(f"{n} on {h}" for h, n in sorted(busy.items())),
                extra=run.tag,
            )

    def left(self, host: str, running: Running) -> None:
        """A task left ``host`` (it ended, or its worker is gone): its holder may start there once no other
        DAG's task is left on it."""
        if host in self.draining and not any(
            alloc.host.name == host and host not in (owner.hosts or ()) for owner, _, alloc, _ in running.values()
        ):
            self.draining.discard(host)

    def end(self, run: DagRun) -> None:
        """``run`` ended: the hosts it held are every DAG's again."""
        if run.hosts:
            self.held -= run.hosts
            self.draining -= run.hosts
