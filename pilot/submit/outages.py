"""A site's scheduler out of reach: since when, until when the driver keeps trying, and what it says meanwhile.

A controller that cannot be reached makes every scheduler command fail or
hang (``sbatch: error: ... Unable to contact slurm controller``). The driver
goes on trying with back-off; a user watching it must not see silence for
half an hour. So the first failure says at once that it retries and until
when (the site's ``unreachable_limit`` from then: the clusters waiting to be
submitted there fail after it), a line follows at least every
``Options.outage_every`` seconds while it lasts (sooner for a short limit), and
one more says when the scheduler answers again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger("pilot.submit")


@dataclass
class Outage:
    since: float  # monotonic seconds
    until: float  # when clusters waiting to be submitted to the site fail
    said: float  # when the last line about it was logged
    what: str  # the scheduler's last words


class Outages:
    """The sites whose scheduler does not answer, by name."""

    def __init__(self, monotonic: Callable[[], float], every: float) -> None:
        self.monotonic = monotonic
        self.every = every
        self.by_site: dict[str, Outage] = {}

    def failed(self, site: str, limit: float, what: str) -> Outage:
        """A command to ``site``'s scheduler failed (``what`` it said); the first failure says so at once."""
        now = self.monotonic()
        what = " ".join(what.split())
        outage = self.by_site.get(site)
        if outage is None:
            outage = self.by_site[site] = Outage(now, now + limit, now, what)
            log.warning(
                "%s: the scheduler does not answer (%s); retrying with back-off until %s, when the clusters "
                "waiting to be submitted there fail (Ctrl-C stops pilot submit)",
                site,
                what,
                clock_time(outage.until, now),
            )
        outage.what = what
        return outage

    def answered(self, site: str) -> None:
        outage = self.by_site.pop(site, None)
        if outage is not None:
            log.info("%s: the scheduler answers again (after %.0f s)", site, self.monotonic() - outage.since)

    def remind(self, waiting: Callable[[str], str]) -> None:
        """The line for every outage not spoken of for a while: how long, what it said, what waits, until when.
        ``waiting(site)`` says what of the run waits for that site ("" for nothing: then nothing is said)."""
        now = self.monotonic()
        for site, outage in self.by_site.items():
            if now - outage.said >= min(self.every, max(1.0, (outage.until - outage.since) / 4)):
                what_waits = waiting(site)
                if not what_waits:
                    continue
                outage.said = now
                until = (
                    f"retrying until {clock_time(outage.until, now)}"
                    if now < outage.until
                    else "its clusters waiting to be submitted fail at their next look"
                )
                log.warning(
                    "%s: the scheduler still does not answer after %.0f s (%s); %s; %s",
                    site,
                    now - outage.since,
                    outage.what,
                    what_waits,
                    until,
                )


def clock_time(at: float, now: float) -> str:
    """The wall-clock time (HH:MM:SS) of monotonic time ``at``."""
    return time.strftime("%H:%M:%S", time.localtime(time.time() + at - now))
