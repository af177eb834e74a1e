"""``DAG.result``: how a pilot run ended, for ``pilot submit`` (not a PMC file).

One JSON object, replaced atomically at every exit path::

    {"ok": false, "reason": "walltime", "tasks": 4, "done": 2, "unfinished": ["C", "D"],
     "exit": 1, "pid": 123, "host": "n1", "end": 1790000000.0}

``reason`` is ``done`` (all tasks succeeded), ``failed`` (tasks failed after their
tries, or -m was reached), ``walltime`` (--max-wall-time), ``signal`` (SIGTERM or
SIGINT: the batch system's time limit or a cancel) or ``error`` (the run could not
start: bad DAG, infeasible task, host script). A batch queue reports a vanished
job as completed whatever happened in it; this file says what really did.
"""

from __future__ import annotations

import json
import os
import time


def result_path(dag: str) -> str:
    return dag + ".result"


def write_result(dag: str, ok: bool, reason: str, tasks: int, done: int, unfinished: list[str], exit_code: int) -> None:
    data = {
        "ok": ok, "reason": reason, "tasks": tasks, "done": done, "unfinished": unfinished[:100],
        "exit": exit_code, "pid": os.getpid(), "host": os.uname().nodename, "end": time.time(),
    }
    path = result_path(dag)
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(data, fh)
            fh.write("\n")
        os.replace(tmp, path)
    except OSError:
        try:  # a full disk: leave no temp file behind
            os.unlink(tmp)
        except OSError:
            pass
        raise


def read_result(dag: str) -> dict | None:
    try:
        with open(result_path(dag), encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None
