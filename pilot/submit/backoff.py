"""Pilot jobs failing in a row at one site, and when the next may be tried.

Two things make a site's pilot jobs fail before any cluster runs in them: the
scheduler refuses the submission, or the pilot job starts and its pilot run
dies before its workers are up (a bad ``pilot_command``, a launcher that
cannot start on those nodes). Submitting a replacement at once, at every
poll, would flood the queue with jobs that fail the same way; never
replacing one would leave the clusters waiting for ever. So each failure
doubles the wait before the next try (1, 2, 4 ... seconds, at most
``MAX_DELAY``), a success clears it, and after ``TRIES`` in a row the
clusters waiting for a pilot job there fail, saying why.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_DELAY = 300.0  # seconds: the longest wait between two tries
TRIES = 5  # failures in a row before the clusters waiting for a pilot job fail


@dataclass
class Streak:
    failures: int = 0
    next_try: float = 0.0
    why: str = ""


class Backoff:
    """One kind of failure (``what``: how the clusters' reason starts), counted per site."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._sites: dict[str, Streak] = {}

    def failed(self, site: str, now: float, why: str) -> float:
        """Count a failure at ``site``; the seconds until the next try."""
        streak = self._sites.setdefault(site, Streak())
        delay = min(MAX_DELAY, 2.0**streak.failures)
        streak.failures += 1
        streak.next_try, streak.why = now + delay, why
        return delay

    def cleared(self, site: str) -> None:
        self._sites.pop(site, None)

    def failing(self, site: str) -> bool:
        return site in self._sites

    def ready(self, site: str, now: float) -> bool:
        """Whether a pilot job may be tried at ``site`` now."""
        streak = self._sites.get(site)
        return streak is None or now >= streak.next_try

    def given_up(self, site: str) -> str | None:
        """Why the clusters waiting at ``site`` fail (``TRIES`` failures in a row), else None."""
        streak = self._sites.get(site)
        if streak is None or streak.failures < TRIES:
            return None
        return f"{self.what} ({streak.failures} tries): {streak.why}"
