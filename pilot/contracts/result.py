"""``DAG.result``: how a pilot run ended, for ``pilot submit`` and ``pilot report`` (not a PMC file).

Written by ``pilot run`` (and, for a sub-workflow's cluster, by its nested
``pilot submit``): one JSON object, replaced atomically at every exit path::

    {"ok": false, "reason": "walltime", "tasks": 4, "done": 2, "unfinished": ["C", "D"],
     "exit": 1, "pid": 123, "host": "n1", "end": 1790000000.0,
     "failed": 1, "aborted": false, "crashed": {"C": 2}}

``reason`` is a ``RunOutcome``: ``done`` (all tasks succeeded), ``failed`` (tasks
failed after their tries, or -m was reached), ``walltime`` (--max-wall-time, also
when it strikes during start-up), ``signal`` (SIGTERM or SIGINT: the batch system's
time limit, a preemption or a cancel) or ``error`` (the run could not start: bad
DAG, infeasible task, host script; or it could not write what it must, a full disk:
a rerun completes it from the rescue log). A batch queue reports a vanished job as
completed whatever happened in it; this file says what really did.

``failed`` counts the tasks that failed for good, ``aborted`` says whether -m cut
the run short, and ``crashed`` names the failed tasks that were not started again
because they crashed their worker ``--max-crashes`` times (with their crash
counts): a task that kills its worker does so again, so ``pilot submit`` spends no
retry on a run whose only failures are those. Results written before these
fields existed read as ``failed`` and ``crashed`` None, ``aborted`` false.

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

RESULT_SUFFIX = ".result"
MAX_RESULT_BYTES = 1 << 20  # a result is a few hundred bytes; anything bigger is not one
MAX_UNFINISHED = 100  # the unfinished tasks a result names; pilot status shows fewer


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
    """One result file's content (its writer's pid and host, written for people, are not read back)."""

    outcome: RunOutcome
    tasks: int
    done: int
    unfinished: list[str]  # at most MAX_UNFINISHED are written
    exit_code: int
    end: float | None = None  # when the run ended (epoch); None when writing: now
    failed: int | None = None  # tasks failed for good; None in a result that does not say
    aborted: bool = False  # -m stopped the run before everything that could run had run
    crashed: dict[str, int] | None = None  # failed tasks stopped at --max-crashes -> their crashes

    def crash_text(self) -> str:
        """What the tasks stopped at --max-crashes did, in a few words: 'task t crashed its worker 2 times
        (--max-crashes)', more than one task named together."""
        crashed = self.crashed or {}
        names = sorted(crashed)
        counts = sorted(set(crashed.values()))
        times = f"{counts[0]} times" if len(counts) == 1 else f"{counts[0]}-{counts[-1]} times"
        who = (
            f"task {names[0]} crashed its worker"
            if len(names) == 1
            else f"tasks {', '.join(names[:5])}{' ...' if len(names) > 5 else ''} crashed their workers"
        )
        return f"{who} {times} (--max-crashes)" if names else ""

    @property
    def only_crashes(self) -> bool:
        """Whether every failure of the run is a task stopped at --max-crashes, and nothing else was left for a
        rerun to do (not cut short by -m): a rerun would fail those tasks again at once."""
        return bool(self.crashed) and self.failed == len(self.crashed or ()) and not self.aborted

    @property
    def ok(self) -> bool:
        return self.outcome is RunOutcome.DONE


def result_path(dag: str) -> str:
    """The result file of a run of ``dag``."""
    return dag + RESULT_SUFFIX


def write_result(path: str, result: RunResult) -> None:
    """Replace the result file ``path`` (``result_path(dag)``; a nested pilot submit is given its parent's)."""
    data: dict[str, object] = {
        "ok": result.ok,
        "reason": result.outcome.value,
        "tasks": result.tasks,
        "done": result.done,
        "unfinished": result.unfinished[:MAX_UNFINISHED],
        "exit": result.exit_code,
        "pid": os.getpid(),
        "host": os.uname().nodename,
        "end": time.time() if result.end is None else result.end,
    }
    if result.failed is not None:
        crashed = dict(list((result.crashed or {}).items())[:MAX_UNFINISHED])
        data.update(failed=result.failed, aborted=result.aborted, crashed=crashed)
    with atomic_file(path) as fh:
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
        raise ResultError(
            f"{path}: not a pilot result ({str(exc).removeprefix(path).lstrip(':0123456789 ')}); {see}"
        ) from None
    try:
        if not isinstance(raw, dict):
            raise TypeError("not a JSON object")
        outcome = RunOutcome(raw["reason"])
        unfinished = raw.get("unfinished", [])
        if not isinstance(unfinished, list) or not all(isinstance(u, str) for u in unfinished):
            raise TypeError("unfinished is not a list of task ids")
        end = raw.get("end")
        if end is not None and (type(end) not in (int, float) or not 0 <= end < 1e12):
            raise ValueError(f"end {str(end)[:40]!r} is not a time")
        crashed = raw.get("crashed", {})
        if not isinstance(crashed, dict) or not all(isinstance(k, str) for k in crashed):
            raise TypeError("crashed is not an object of task ids")
        aborted = raw.get("aborted", False)
        if not isinstance(aborted, bool):
            raise TypeError("aborted is not true or false")
        failed = raw.get("failed")
        return RunResult(
            outcome,
            _count(raw["tasks"], "tasks"),
            _count(raw["done"], "done"),
            unfinished,
            _count(raw.get("exit", 0 if outcome is RunOutcome.DONE else 1), "exit", low=-(1 << 31)),
            None if end is None else float(end),
            None if failed is None else _count(failed, "failed"),
            aborted,
            {k: _count(v, "crashes") for k, v in crashed.items()} if "crashed" in raw else None,
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise ResultError(f"{path}: not a pilot result ({type(exc).__name__}: {str(exc)[:200]}); {see}") from None


def _count(value: object, name: str, low: int = 0) -> int:
    if type(value) is not int or not low <= value < 1 << 31:
        raise ValueError(f"{name} {str(value)[:40]!r} is not a count")
    return value
