"""The end of a run on the master: merged task stdio, the utilisation report, the summary record.

Called once the workers have said Bye (their stdio files are closed); the
``[cluster-summary]`` record goes to the master's stdout, where
pegasus-monitord and pegasus-exitcode look for it.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import TYPE_CHECKING

from pilot.contracts.result import RunOutcome, RunResult, result_path, write_result
from pilot.monitor import records, stdio
from pilot.runtime import ahead
from pilot.runtime.protocol import Bye, Recalled, Shutdown, TaskResult, WorkerFailed

if TYPE_CHECKING:
    from pilot.runtime.master import Master

log = logging.getLogger("pilot.master")

BYE_TIMEOUT = 10.0


def final_report(master: Master, ok: bool) -> None:
    engine = master.engine
    assert engine is not None
    opts = master.opts
    wall = time.time() - master.start
    makespan = max(0.0, master.makespan_end - master.makespan_start)
    for line in records.utilisation_report(master.runtime_total, wall, makespan, len(master.workers), engine.succeeded_this_run):
        log.info("%s", line)
    log.info("File descriptor cache hit rate: %f", master.fdcache.hit_rate)
    if not opts.per_task_stdio:
        kept = stdio.merge_worker_files(opts.dag, master.workers, master.task_out, master.task_err, delete=ok,
                                        offsets=master._kept)
        if kept:
            log.info("Task stdio of this run kept in %s.out.<rank> / .err.<rank>", opts.dag)
    # failed= counts tasks that failed for good; attempts that were retried are in submitted= only.
    counts = {
        "tasks": engine.total,
        "submitted": engine.submitted,
        "succeeded": engine.succeeded_this_run,
        "failed": engine.failed_count,
        "done": engine.done_count,
    }
    master.events.run_finished(ok, counts)
    summary = records.cluster_summary(
        ok, engine.total, engine.submitted, engine.succeeded_this_run, engine.failed_count,
        master.start, wall, os.getpid(), master.app, master.runtime_total, len(master.workers),
        master.matcher.total_cpus,
    )
    sys.stdout.write(summary)
    sys.stdout.flush()
    if master.task_out is not None and opts.invocation_records:
        # The -o file is then the job output monitord reads: the summary belongs with its task records.
        master.task_out.write(summary.encode())
        master.task_out.flush()


def write_outcome(master: Master, reason: RunOutcome, exit_code: int) -> None:
    """DAG.result: how the run ended, for pilot submit (a run that could not write it is logged, not raised)."""
    engine = master.engine
    dag = master.opts.dag
    try:
        write_result(result_path(dag), RunResult(reason, engine.total if engine else 0, engine.done_count if engine else 0,
                                                 engine.unfinished() if engine else [], exit_code))
    except OSError as exc:
        # After an error the run's one line already says what is wrong (often this very directory).
        log.log(logging.DEBUG if reason == RunOutcome.ERROR else logging.ERROR, "cannot write %s: %s", result_path(dag), exc.strerror)


def outcome_line(master: Master, ok: bool) -> None:
    """The run's last log line: success, or which tasks are not done and why."""
    engine = master.engine
    assert engine is not None
    if ok:
        log.info("Workflow succeeded")
        return
    if engine.stop_reason and master.abort_reason is None:
        log.error("Max failures reached: DAG prematurely aborted")
    unfinished = engine.unfinished()
    shown = ", ".join(unfinished[:10]) + (f" and {len(unfinished) - 10} more" if len(unfinished) > 10 else "")
    held = master.matcher.held
    why = master.abort_reason or (f"{len(held)} task(s) need more time than was left" if held else "")
    log.error("Workflow failed: %d of %d tasks not done (%s)%s", len(unfinished), engine.total, shown, f"; {why}" if why else "")


def stop_workers(master: Master) -> None:
    """Shutdown to every worker; take the results and give-backs still coming, until each says Bye."""
    for rank in sorted(master._alive):
        master.t.send(rank, Shutdown(master.abort_reason or ""))
    if master.rescue is not None:
        # While the workers clean up: the rescue log's fsync at close then finds little or nothing to do.
        master.rescue.sync()
    deadline = time.monotonic() + BYE_TIMEOUT
    while master._alive and time.monotonic() < deadline:
        got = master.t.recv(timeout=max(0.0, deadline - time.monotonic()))
        if got is None:
            break
        source, msg = got
        if isinstance(msg, Bye):
            master._alive.discard(source)
        elif isinstance(msg, TaskResult) and source in master.slots.running and master.engine is not None:
            master._task_done(source, msg)
        elif isinstance(msg, Recalled) and master.engine is not None:
            ahead.recalled(master, source, msg.name)
        elif isinstance(msg, WorkerFailed):
            master._worker_failed(source, msg)
    if master._alive:
        log.warning("worker(s) %s did not confirm shutdown", ", ".join(map(str, sorted(master._alive))))
