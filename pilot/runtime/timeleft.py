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
"""

from __future__ import annotations

import logging

from pilot.dag.model import Dag
from pilot.runtime.options import RunOptions
from pilot.runtime.policy import Matcher

log = logging.getLogger("pilot.master")

# The cost of starting a task and taking its result, kept free before the limit.
START_MARGIN = 0.05


def prepare(opts: RunOptions, dag: Dag, matcher: Matcher, left: float | None) -> bool:
    """Order equal priorities by runtime; return whether the time-left rule applies to this run.

    ``left``: seconds until the wall-time limit as dispatching begins (None: no limit).
    """
    if opts.ignore_runtimes or not matcher.order_by_runtime(list(dag)) or left is None:
        return False
    matcher.full = left - START_MARGIN
    longer = [t for t in dag if t.runtime is not None and t.runtime > matcher.full]
    if longer:
        log.warning("%d task(s) have a runtime longer than the %.1f s this run has for tasks (--max-wall-time less start-up; "
                    "%s: %g s): no run could finish them, they start whenever they are ready",
                    len(longer), max(0.0, matcher.full), longer[0].name, longer[0].runtime)
    return True


def report_held(matcher: Matcher, left: float) -> None:
    held = matcher.held
    log.error("%d task(s) left for the next run: their runtime exceeds the %.1f s left before the wall-time limit "
              "(%s: %g s)", len(held), max(0.0, left), held[0].name, held[0].runtime)
