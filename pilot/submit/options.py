"""How the driver behaves: retry and resubmission limits, polling and back-off, and the clock it reads.

The clock is a parameter so the driver's tests run hours of back-off in milliseconds.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol

from pilot.sites import DEFAULT_UNREACHABLE_LIMIT

# Pegasus' default for the dagman.retry profile ("Default : 1" in its profile reference, dagman namespace).
DEFAULT_RETRY = 1
DEFAULT_MAX_RESUBMITS = 3
DEFAULT_SUBMIT_TRIES = 5
UNREACHABLE_LIMIT = float(DEFAULT_UNREACHABLE_LIMIT)  # a site's own is its unreachable_limit key
# Seconds between the lines that say a site's scheduler is still out of reach (at most: sooner for a short limit).
OUTAGE_EVERY = 60.0


@dataclass
class Options:
    retry: int = DEFAULT_RETRY  # for clusters whose jobs carry no dagman.retry
    max_resubmits: int = DEFAULT_MAX_RESUBMITS
    submit_tries: int = DEFAULT_SUBMIT_TRIES
    poll: float = 2.0
    backoff: float = 2.0
    max_backoff: float = 300.0
    outage_every: float = OUTAGE_EVERY
    # Late binding (pilot.submit.pilots): at most this many pilot jobs at once (0: a batch job per cluster),
    # and what the site's pilot_* keys say, when given here.
    pilots: int = 0
    pilot_nodes: int | None = None
    pilot_walltime: str | None = None
    pilot_min: int | None = None
    pilot_idle: int | None = None


def retries_for(opts: Options, plan_retry: int | None) -> int:
    """Retries of a cluster whose tasks failed: its jobs' largest ``dagman.retry`` (``plan_retry``), else ``--retry``."""
    return plan_retry if plan_retry is not None else opts.retry


class Clock(Protocol):
    def monotonic(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    monotonic = staticmethod(time.monotonic)
    sleep = staticmethod(time.sleep)
