"""Waiting in tests: poll a condition until a deadline, never a fixed sleep. Every test that waits uses this."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(
    predicate: Callable[[], T],
    timeout: float = 60.0,
    what: str = "the condition",
    every: float = 0.1,
    detail: Callable[[], object] | None = None,
) -> T:
    """Poll ``predicate`` until it returns something true and return that; fail after ``timeout`` seconds,
    saying ``what`` was waited for and, with ``detail``, what it returns then (the state that was seen)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            seen = f" ({detail()})" if detail is not None else ""
            raise AssertionError(f"{what}: not within {timeout:g} s{seen}")
        time.sleep(every)


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is no zombie (a child that ended but was not reaped counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False
