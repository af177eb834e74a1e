"""Runtimes in the DAG and the wall-time limit: which tasks a run may still start.

A task's runtime comes from a ``#pilot runtime=<s>`` line before its TASK line
(the planner writes it from the Pegasus ``runtime`` profile; PMC reads it as a
comment). With runtimes, equal priorities go longest first (``Matcher``); with
``--max-wall-time`` too, a task is started only if its runtime fits in the
time left, less ``START_MARGIN``. One that does not fit is held for the rest
of the run: the run ends as soon as nothing that fits is ready or running,
with result ``walltime``, and the resubmitted job (resuming from the rescue
log) runs it with a fresh limit, instead of this one starting it only to kill
it at the limit. A task longer than the time a run has once it starts
dispatching (the limit less start-up) is never held: no later run could
finish it either, and holding it would only end run after run with nothing
done. ``--ignore-runtimes`` turns all of it off.

``Limits`` holds both ends of that, for the master: the wall-time limit and
the signals (SIGTERM, SIGINT) that end a run early, and the time a task
started now may use.
"""

from __future__ import annotations

import contextlib
import logging
import signal
from collections.abc import Callable, Iterator
from types import FrameType

from pilot.dag.model import Dag
from pilot.runtime.options import RunOptions
from pilot.runtime.slotmatch import Matcher

log = logging.getLogger("pilot.master")

# The cost of starting a task and taking its result, kept free before the limit.
START_MARGIN = 0.05


class Limits:
    """What ends a run early (the wall-time limit, SIGTERM/SIGINT), and the seconds a task started now may use.

    ``clock``: monotonic seconds for the limit; a simulation passes its virtual clock.
    """

    def __init__(self, opts: RunOptions, clock: Callable[[], float]) -> None:
        self.opts = opts
        self.clock = clock
        self.deadline: float | None = None  # the clock's reading at the limit, None without one
        self.signalled: str | None = None  # the name of the signal that ends the run
        self._timed = False  # the time-left rule applies: a wall-time limit and tasks with runtimes

    def start(self) -> None:
        """The run starts: the wall-time limit counts from now."""
        if self.opts.max_wall_time:
            self.deadline = self.clock() + self.opts.max_wall_time * 60.0
            log.info("Setting max walltime to %f minutes", self.opts.max_wall_time)

    @contextlib.contextmanager
    def catching_signals(self) -> Iterator[None]:
        """While it lasts, SIGTERM and SIGINT only set ``signalled`` (the master stops at its next look).

        The old handlers come back only at its end: a second signal during the
        shutdown must not kill the master before its logs and result are written.
        """
        old = {s: signal.signal(s, self._on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            yield
        finally:
            for s, h in old.items():
                signal.signal(s, h)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:  # noqa: ARG002 - a signal handler's signature
        self.signalled = signal.Signals(signum).name

    def out_of_time(self) -> bool:
        return self.deadline is not None and self.clock() >= self.deadline

    def interrupted(self) -> bool:
        """A signal came or the limit is reached: what a wait for workers wakes up for."""
        return self.signalled is not None or (self.deadline is not None and self.clock() >= self.deadline)

    def stop_reason(self) -> str | None:
        """Why the run must stop now; None while it may go on."""
        if self.signalled:
            return f"{self.signalled} received"
        if self.deadline is not None and self.clock() >= self.deadline:
            return f"max wall time of {self.opts.max_wall_time:g} minutes reached"
        return None

    def prepare(self, dag: Dag, matcher: Matcher) -> None:
        """Dispatching begins: order equal priorities by runtime, and see whether the time-left rule applies."""
        if self.opts.ignore_runtimes or not matcher.order_by_runtime(list(dag)) or self.deadline is None:
            return
        self._timed = True
        matcher.full = self.deadline - self.clock() - START_MARGIN
        longer = [t for t in dag if t.runtime is not None and t.runtime > matcher.full]
        if longer:
            log.warning(
                "%d task(s) have a runtime longer than the %.1f s this run has for tasks (--max-wall-time less start-up; "
                "%s: %g s): no run could finish them, they start whenever they are ready",
                len(longer),
                max(0.0, matcher.full),
                longer[0].name,
                longer[0].runtime,
            )

    def time_left(self) -> float | None:
        """Seconds a task started now may run (None: no time-left rule)."""
        return self.deadline - self.clock() - START_MARGIN if self._timed else None  # type: ignore[operator]  # _timed implies a deadline

    def report_held(self, matcher: Matcher) -> None:
        """The run ends with tasks held for lack of time (``matcher.held``): say which, and why."""
        held, left = matcher.held, self.deadline - self.clock()  # type: ignore[operator]  # called only in a timed run, which has a deadline
        log.error(
            "%d task(s) left for the next run: their runtime exceeds the %.1f s left before the wall-time limit "
            "(%s: %g s)",
            len(held),
            max(0.0, left),
            held[0].name,
            held[0].runtime,
        )
