"""``pilot cancel``'s last step: end the pilot runs that outlived their cancelled batch jobs, or say which did.

Cancelling a batch job ends what the scheduler started, but a pilot run can
escape it: its job id was never recorded (the driver stopped while
submitting), or the provider could not take the job over (a local job whose
script is gone). The DAG lock tells the truth: ``pilot run`` holds it for its
whole run (pilot.runtime.lock). So once the jobs are cancelled, every
cluster's DAG lock is looked at. A run still holding it gets a while to end
(the cancel's own SIGTERM may be at work: the master ends its tasks and writes
its result), then its holder on this host gets SIGTERM, then SIGKILL, and the
task processes marked with the DAG's key (pilot.runtime.reaper) are ended
after it. A holder on another host can only be named.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pilot.contracts.daglock import DagRun, running
from pilot.runtime import reaper
from pilot.runtime.startup import dag_key
from pilot.util.procs import cmdline

# Seconds a run gets to let go of its DAG lock after its job was cancelled, then after SIGTERM, then after SIGKILL.
# The first covers the master's own stop: its tasks get protocol.KILL_GRACE (3 s) between SIGTERM and SIGKILL.
CANCEL_WAIT = 10.0
TERM_WAIT = 8.0
KILL_WAIT = 3.0


@dataclass
class Ended:
    ended: list[str] = field(default_factory=list)  # one line per run this step had to end itself
    left: dict[str, str] = field(default_factory=dict)  # cluster -> what of it still runs, one line


def end_runs(
    dags: dict[str, str],
    waits: tuple[float, float, float] = (CANCEL_WAIT, TERM_WAIT, KILL_WAIT),
    clock: Callable[[], float] = time.monotonic,
    pause: Callable[[float], None] = time.sleep,
) -> Ended:
    """End the pilot runs holding the DAG locks of these clusters (cluster -> DAG path)."""
    out = Ended()
    held = {name: run for name, dag in dags.items() if (run := running(dag)) is not None}
    held = _wait_released(held, dags, waits[0], clock, pause)
    signalled: dict[str, DagRun] = {}
    strangers = {name for name, run in held.items() if run.pid is not None and not _is_pilot(run.pid)}
    for signum, wait in ((signal.SIGTERM, waits[1]), (signal.SIGKILL, waits[2])):
        for name, run in held.items():
            if run.pid is not None and name not in strangers and _signal(run.pid, signum):
                signalled.setdefault(name, run)
        held = _wait_released(held, dags, wait, clock, pause)
    for name, run in signalled.items():
        key = dag_key(dags[name]) + ":"

        def marked(value: str, key: str = key) -> bool:
            return value.startswith(key)

        tasks = reaper.end_marked(marked, grace=1.0)
        if name not in held:
            out.ended.append(
                f"cluster {name}: ended its pilot run ({run.where()})"
                + (f" and {tasks} task process(es)" if tasks else "")
            )
    for name, run in held.items():
        if name in strangers:
            out.left[name] = (
                f"cluster {name}: {run.where()} holds {dags[name]} and is not a pilot run: not signalled; "
                f"see what it is (ps -p {run.pid} -o args)"
            )
        elif run.pid is not None:
            out.left[name] = (
                f"cluster {name}: its pilot run ({run.where()}) still holds {dags[name]} after SIGKILL; "
                f"end it by hand (kill -9 {run.pid})"
            )
        else:
            out.left[name] = (
                f"cluster {name}: a pilot run on another host still holds {dags[name]}; end its batch "
                f"job there (or wait for it), then run pilot cancel again"
            )
    return out


def _wait_released(
    held: dict[str, DagRun],
    dags: dict[str, str],
    seconds: float,
    clock: Callable[[], float],
    pause: Callable[[float], None],
) -> dict[str, DagRun]:
    """The runs of ``held`` that still hold their locks after at most ``seconds`` (each looked at again)."""
    deadline = clock() + seconds
    while held:
        held = {name: run for name in held if (run := running(dags[name])) is not None}
        if not held or clock() >= deadline:
            break
        pause(0.1)
    return held


def _is_pilot(pid: int) -> bool:
    """Whether process ``pid`` runs pilot (``pilot run``, ``python -m pilot run``, ``pilot-mpi-cluster``): only
    the DAG lock's own holder is signalled, never whatever else has taken a lock on the file."""
    args = cmdline(pid)
    return args is None or any(b"pilot" in os.path.basename(arg) for arg in args[:3])  # None: gone already


def _signal(pid: int, signum: int) -> bool:
    try:
        os.kill(pid, signum)
        return True
    except (ProcessLookupError, PermissionError):  # gone, or another user's: named in what is left if it holds on
        return False
