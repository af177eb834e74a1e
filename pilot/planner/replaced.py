"""Keys pilot accepts although it reaches their result its own way: one warning line per key per plan.

A Pegasus workflow often says how HTCondor, DAGMan, PegasusLite or kickstart would have done something pilot
does otherwise (the site's batch system instead of HTCondor, the shared scratch instead of condorio, its own
workers instead of kickstart). Such a key is accepted, so the workflow plans as its authors wrote it, and said
once: a million jobs carrying it give one line, naming the key, the first place it is written and what pilot
does instead. The lines are collected while a plan is made (``collecting``) and logged when it is done, so they
come after the reading and never between the lines of an error.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

log = logging.getLogger("pilot.plan")

# key -> its line, for the plan being made; None: no plan is being made (a catalog read alone says nothing).
_lines: ContextVar[dict[str, str] | None] = ContextVar("pilot_replaced_lines", default=None)


def line(key: str, where: str, instead: str) -> str:
    """The warning a replaced key gives (without the program's prefix, which the log format adds)."""
    return f"warning: {key} ({where}): {instead}"


def note(key: str, where: str, instead: str) -> None:
    """Say once per plan that ``key`` (as written, e.g. ``pegasus::style``), first met at ``where``, is
    replaced by ``instead``."""
    seen = _lines.get()
    if seen is not None and key not in seen:
        seen[key] = line(key, where, instead)


def note_line(key: str, text: str) -> None:
    """``note`` for a line made earlier (a site entry's keys, said only when a job uses the site)."""
    seen = _lines.get()
    if seen is not None and key not in seen:
        seen[key] = text


@contextmanager
def collecting() -> Iterator[dict[str, str]]:
    """Collect the lines of one plan; the caller logs them (``report``) once the plan is made."""
    token = _lines.set({})
    try:
        yield _lines.get()  # type: ignore[misc]  # set just above: never None here
    finally:
        _lines.reset(token)


def report(lines: dict[str, str]) -> list[str]:
    """Log the collected lines as warnings, in the order met; returns them."""
    out = list(lines.values())
    for text in out:
        log.warning("%s", text)
    return out
