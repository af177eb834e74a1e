"""The end of a run on the master: merged task stdio, the utilisation report, the summary record, the result.

``RunReport`` keeps what the end needs from earlier in the run: when it
started, when dispatching began and ended (the makespan), and the sizes of
the per-worker stdio files a failed earlier run left. The master calls
``summary`` once the workers have said Bye (their stdio files are closed);
the ``[cluster-summary]`` record goes to the master's stdout, where
pegasus-monitord and pegasus-exitcode look for it.

Whatever the run could not write (a full disk: task stdio, a monitoring file,
the summary record, the rescue log, the result) is said once as it happens
(``lost``), kept in ``unwritten``, and named again in the run's last line with
what to do: the run exits 1 and its result says ``error``, so that a rerun,
which skips what the rescue log holds, completes it.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import BinaryIO

from pilot.contracts.result import RunOutcome, RunResult, result_path, write_result
from pilot.monitor import records, stdio
from pilot.monitor.events import RunEvents
from pilot.runtime.crashes import recorded_crashes
from pilot.runtime.engine import Engine, State
from pilot.runtime.forwarding import FdCache
from pilot.runtime.options import RunOptions
from pilot.runtime.slotmatch import Matcher
from pilot.util import stdstreams

log = logging.getLogger("pilot.master")


class RunReport:
    """How one run ended, said in the log, the job output and ``DAG.result``."""

    def __init__(
        self, opts: RunOptions, app: str, workers: list[int], matcher: Matcher, events: RunEvents, fdcache: FdCache
    ) -> None:
        self.opts = opts
        self.app = app
        self.workers = workers
        self.matcher = matcher
        self.events = events
        self.fdcache = fdcache
        self.start = time.time()
        self.makespan_start = 0.0
        self.makespan_end = 0.0
        self._kept: dict[str, int] = {}  # per-worker files a failed earlier run left: their sizes at start
        self.unwritten: list[str] = []  # what the run could not write, each named once
        self._lost_files: set[str] = set()

    def lost(self, what: str, exc: OSError, path: str | None = None) -> None:
        """``what`` (the file ``path``, by default ``what`` itself) could not be written: said now, and named
        again in the last line; a file said once is not said again (its close fails as its writes did)."""
        key = path or what
        if key not in self._lost_files:
            self._lost_files.add(key)
            self.unwritten.append(what)
            log.error("cannot write %s: %s", what, exc.strerror or exc)

    def begin(self) -> None:
        """The run starts: before any worker can write to the per-worker stdio files."""
        self.start = time.time()
        self._kept = {} if self.opts.per_task_stdio else stdio.merged_offsets(self.opts.dag)

    def dispatching(self) -> None:
        self.makespan_start = time.time()

    def drained(self) -> None:
        self.makespan_end = time.time()

    def summary(
        self, ok: bool, engine: Engine, runtime_total: float, task_out: BinaryIO | None, task_err: BinaryIO | None
    ) -> None:
        """Utilisation lines, task stdio merged into -o/-e, run_finished to the monitors, the summary record."""
        opts = self.opts
        wall = time.time() - self.start
        makespan = max(0.0, self.makespan_end - self.makespan_start)
        for line in records.utilisation_report(
            runtime_total, wall, makespan, len(self.workers), engine.succeeded_this_run
        ):
            log.info("%s", line)
        log.info("File descriptor cache hit rate: %f", self.fdcache.hit_rate)
        if not opts.per_task_stdio:
            self._merge(ok, task_out, task_err)
        # failed= counts tasks that failed for good; attempts that were retried are in submitted= only.
        counts = {
            "tasks": engine.total,
            "submitted": engine.submitted,
            "succeeded": engine.succeeded_this_run,
            "failed": engine.failed_count,
            "done": engine.done_count,
        }
        self.events.run_finished(ok, counts)
        summary = records.cluster_summary(
            ok,
            engine.total,
            engine.submitted,
            engine.succeeded_this_run,
            engine.failed_count,
            self.start,
            wall,
            os.getpid(),
            self.app,
            runtime_total,
            len(self.workers),
            self.matcher.total_cpus,
        )
        try:
            sys.stdout.write(summary)
            sys.stdout.flush()
        except OSError as exc:
            stdstreams.discard(sys.stdout)  # the interpreter's exit must not fail on it again
            self.lost("the [cluster-summary] record (standard output)", exc)
        if task_out is not None and opts.invocation_records:
            # The -o file is then the job output monitord reads: the summary belongs with its task records.
            try:
                task_out.write(summary.encode())
                task_out.flush()
            except OSError as exc:
                self.lost(f"the [cluster-summary] record ({opts.stdout})", exc, opts.stdout)

    def _merge(self, ok: bool, task_out: BinaryIO | None, task_err: BinaryIO | None) -> None:
        """Task stdio of the per-worker files into -o/-e or the master's streams (kept on disk unless all is well)."""
        opts = self.opts
        try:
            kept = stdio.merge_worker_files(opts.dag, self.workers, task_out, task_err, delete=ok, offsets=self._kept)
        except stdio.MergeError as exc:
            out = exc.stream == "stdout"
            target = opts.stdout if out else opts.stderr
            if target is None:
                stdstreams.discard(sys.stdout if out else sys.stderr)
            shown = target or ("standard output" if out else "standard error")
            kept_in = f"{opts.dag}.{'out' if out else 'err'}.<rank>"
            self.lost(f"task {exc.stream} ({shown}; kept in {kept_in} for the next run)", exc.error, target)
            return
        except OSError as exc:
            self.lost(stdio.merged_path(opts.dag), exc)
            return
        if kept:
            log.info("Task stdio of this run kept in %s.out.<rank> / .err.<rank>", opts.dag)

    def write_outcome(self, engine: Engine | None, reason: RunOutcome, exit_code: int) -> None:
        """DAG.result: how the run ended, for pilot submit (a run that could not write it is logged, not raised).

        ``engine`` is None when the run ended before its DAG was read."""
        path = result_path(self.opts.dag)
        try:
            write_result(
                path,
                RunResult(
                    reason,
                    engine.total if engine else 0,
                    engine.done_count if engine else 0,
                    engine.unfinished() if engine else [],
                    exit_code,
                    None,
                    engine.failed_count if engine else 0,
                    bool(engine and engine.stop_reason),
                    self._crashed(engine),
                ),
            )
        except OSError as exc:
            if reason != RunOutcome.ERROR or stdstreams.is_no_space(exc):
                self.lost(path, exc)
            else:  # after an error the run's one line already says what is wrong (often this very directory)
                log.debug("cannot write %s: %s", path, exc.strerror)

    def _crashed(self, engine: Engine | None) -> dict[str, int]:
        """The failed tasks that were not started again for their crashes (--max-crashes), with their counts."""
        if engine is None or not engine.failed_count:
            return {}
        counts = recorded_crashes(self.opts.dag)
        state = engine.state
        return {
            t.name: counts[t.name]
            for t in engine.dag.tasks.values()
            if counts.get(t.name, 0) >= self.opts.max_crashes and state[t.order] is State.FAILED
        }

    def last_line(self, engine: Engine, ok: bool, abort_reason: str | None) -> None:
        """The run's last log line: success, or which tasks are not done and why; then what could not be written."""
        if not ok:
            self._failed_line(engine, abort_reason)
        if self.unwritten:
            done = f"All {engine.total} tasks done, but the run" if ok else "The run"
            log.error(
                "%s could not write %s: free space and rerun: the rescue log keeps what is done",
                done,
                "; ".join(self.unwritten),
            )
        elif ok:
            log.info("Workflow succeeded")

    def _failed_line(self, engine: Engine, abort_reason: str | None) -> None:
        """Which tasks are not done, and why."""
        if engine.stop_reason and abort_reason is None:
            log.error("Max failures reached: DAG prematurely aborted")
        unfinished = engine.unfinished()
        shown = ", ".join(unfinished[:10]) + (f" and {len(unfinished) - 10} more" if len(unfinished) > 10 else "")
        held = self.matcher.held
        why = abort_reason or (f"{len(held)} task(s) need more time than was left" if held else "")
        log.error(
            "Workflow failed: %d of %d tasks not done (%s)%s",
            len(unfinished),
            engine.total,
            shown,
            f"; {why}" if why else "",
        )
