"""``DAG.result``: how a pilot run ended, for ``pilot submit`` (not a PMC file).

One JSON object, replaced atomically at every exit path::

    {"ok": false, "reason": "walltime", "tasks": 4, "done": 2, "unfinished": ["C", "D"],
     "exit": 1, "pid": 123, "host": "n1", "end": 1790000000.0}

``reason`` is a ``RunOutcome``: ``done`` (all tasks succeeded), ``failed`` (tasks
failed after their tries, or -m was reached), ``walltime`` (--max-wall-time, also
when it strikes during start-up), ``signal`` (SIGTERM or SIGINT: the batch system's
time limit, a preemption or a cancel) or ``error`` (the run could not start: bad
DAG, infeasible task, host script). A batch queue reports a vanished job as
completed whatever happened in it; this file says what really did.

Reading distinguishes "no file" (the pilot never got to write one: the job
vanished) from "a file that cannot be read or parsed", which is an error to
report: resubmitting on a corrupt result would hide a real problem.

The master imports this module at start: annotations are evaluated (no
``from __future__ import annotations``), which ``NamedTuple`` would otherwise
compile one by one.
"""

import enum
import json
import os
import time
from typing import NamedTuple

from pilot.errors import ConfigError, PilotError
from pilot.util.atomic import atomic_file

MAX_RESULT_BYTES = 1 << 20  # a result is a few hundred bytes; anything bigger is not one


class RunOutcome(str, enum.Enum):
    """How one ``pilot run`` ended."""

    DONE = "done"
    FAILED = "failed"
    WALLTIME = "walltime"
    SIGNAL = "signal"
    ERROR = "error"


class ResultError(PilotError):
    """A result file exists but cannot be read or is not a result."""


class RunResult(NamedTuple):
    outcome: RunOutcome
    tasks: int
    done: int
    unfinished: list[str]
    exit_code: int

    @property
    def ok(self) -> bool:
        return self.outcome is RunOutcome.DONE


def result_path(dag: str) -> str:
    return dag + ".result"


def write_result(dag: str, ok: bool, reason: RunOutcome | str, tasks: int, done: int, unfinished: list[str],
                 exit_code: int) -> None:
    data = {
        "ok": ok, "reason": RunOutcome(reason).value, "tasks": tasks, "done": done, "unfinished": unfinished[:100],
        "exit": exit_code, "pid": os.getpid(), "host": os.uname().nodename, "end": time.time(),
    }
    with atomic_file(result_path(dag)) as fh:
        json.dump(data, fh)
        fh.write("\n")


def read_result(dag: str) -> RunResult | None:
    """The run's result; None when there is no result file; ResultError when it is unreadable or not a result
    (read bounded: pilot.util.boundedload; counts are counts, never NaN, Infinity or a fraction)."""
    from pilot.util.boundedload import load_json  # here: the master, which only writes results, never loads yaml

    path = result_path(dag)
    see = "see the cluster's batch job output for what went wrong"
    try:
        raw = load_json(path, MAX_RESULT_BYTES)
    except FileNotFoundError:
        return None
    except ConfigError as exc:  # "PATH[:LINE]: what" -> what
        raise ResultError(f"{path}: not a pilot result ({str(exc).removeprefix(path).lstrip(':0123456789 ')}); {see}") from None
    try:
        if not isinstance(raw, dict):
            raise TypeError("not a JSON object")
        outcome = RunOutcome(raw["reason"])
        unfinished = raw.get("unfinished", [])
        if not isinstance(unfinished, list) or not all(isinstance(u, str) for u in unfinished):
            raise TypeError("unfinished is not a list of task ids")
        return RunResult(outcome, _count(raw["tasks"], "tasks"), _count(raw["done"], "done"), unfinished,
                         _count(raw.get("exit", 0 if outcome is RunOutcome.DONE else 1), "exit", low=-(1 << 31)))
    except (ValueError, KeyError, TypeError) as exc:
        raise ResultError(f"{path}: not a pilot result ({type(exc).__name__}: {str(exc)[:200]}); {see}") from None


def _count(value: object, name: str, low: int = 0) -> int:
    if type(value) is not int or not low <= value < 1 << 31:
        raise ValueError(f"{name} {str(value)[:40]!r} is not a count")
    return value
