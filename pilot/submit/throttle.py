"""DAGMan's workflow-wide throttles, which a plan carries: ``dagman.maxjobs`` and ``dagman.maxidle``.

Pegasus hands these properties to DAGMan (``condor_submit_dag -maxjobs/-maxidle``): at most ``maxjobs`` of the
workflow's jobs submitted at once, at most ``maxidle`` of them waiting in a queue without running; 0, or no
property, sets no limit. pilot plan keeps the properties it planned with in the submit directory's
``pegasus.properties`` (checked there: whole numbers, 0 or more), and pilot submit reads them here, so that a
re-planned workflow is throttled as its properties say now. Each applies over all sites, beside each site's
``max_queued``: a batch job is submitted only while all of them have room.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from pilot.contracts.rootfiles import PROPERTIES
from pilot.errors import ConfigError
from pilot.util.safeopen import open_regular_fd

KEYS = ("dagman.maxjobs", "dagman.maxidle")


@dataclass(frozen=True)
class Throttle:
    maxjobs: int | None = None  # the most batch jobs submitted (queued or running) at once; None: no limit
    maxidle: int | None = None  # the most of them waiting in a queue, not yet running; None: no limit


def plan_throttle(submit_dir: str) -> Throttle:
    """The throttles of the plan in ``submit_dir`` (none where it has no properties file)."""
    path = os.path.join(submit_dir, PROPERTIES)
    if not os.path.exists(path):
        return Throttle()
    props: dict[str, tuple[int, str]] = {}  # only these keys: the rest were read, and checked, when planned
    try:
        with open(open_regular_fd(path), encoding="utf-8", errors="replace") as fh:
            lines = list(enumerate(fh, 1))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the plan's properties: {exc.strerror}") from None
    for lineno, line in lines:
        key, sep, value = line.partition("=")  # as pilot.contracts.rootfiles.write_properties writes them
        if sep and key.strip().lower() in KEYS:
            props[key.strip().lower()] = (lineno, value.strip())
    return Throttle(*(_limit(*props[key], key, path) if key in props else None for key in KEYS))


def _limit(lineno: int, raw: str, key: str, path: str) -> int | None:
    if raw == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(
            f"{path}:{lineno}: {key} = {raw!r} is not a whole number: give the most jobs at once, " "or 0 for no limit"
        ) from None
    if value < 0:
        raise ConfigError(
            f"{path}:{lineno}: {key} = {raw!r} is negative: give the most jobs at once, " "or 0 for no limit"
        )
    return value or None
