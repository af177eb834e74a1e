"""Rank 0: the DAG engine's driver, the scheduler's caller, and the only writer of logs.

Sequence: lock the DAG, parse it, read the rescue log, wait for every worker
to register, check that every task fits some host, run host scripts, then
dispatch and collect until nothing is left. Every exit path (success,
failures, -m, wall time, SIGTERM/SIGINT, errors) goes through ``_finish`` or
``_fail``: workers are told to stop, stdio merged, rescue log, jobstate.log
and dagman.out flushed and closed, ``DAG.result`` written.

The master owns its helpers and calls them; none of them knows the master.
``Limits`` (``timeleft``) watches the wall-time limit and signals,
``Startup`` registers the workers and runs host scripts, ``Ahead`` sends
work ahead of need, ``CrashGuard`` and ``Isolation`` deal with tasks that
kill their worker (``crashes``), ``RunReport`` says how the run ended. Each
gets the objects it works on (engine, matcher, slots, transport) and, where
it must start or queue a task, the master's own method for that. Every
message from a worker goes through one table, ``_handlers``, during the run
and while the workers are stopped.
"""

from __future__ import annotations

import gc
import logging
import os
import time
from array import array
from collections.abc import Callable
from typing import Any, BinaryIO

from pilot.contracts.rescue import RescueLog, read_rescue
from pilot.contracts.result import RunOutcome
from pilot.dag import read_dag
from pilot.dag.model import Dag, Task
from pilot.errors import LockError
from pilot.monitor.events import Fanout, RunEvents, written_to
from pilot.monitor.resource_log import ResourceLog
from pilot.runtime import outputs, taskdir
from pilot.runtime.ahead import Ahead
from pilot.runtime.crashes import CrashGuard, Isolation, Turn
from pilot.runtime.engine import Engine
from pilot.runtime.forwarding import FdCache
from pilot.runtime.lock import DagLock
from pilot.runtime.options import RunOptions
from pilot.runtime.protocol import (
    KILL_GRACE,
    Bye,
    KillTask,
    Recalled,
    Resume,
    RunTask,
    Shutdown,
    TaskResult,
    WorkerFailed,
)
from pilot.runtime.report import RunReport
from pilot.runtime.slotmatch import Allocation, Host, Matcher
from pilot.runtime.slots import Slots
from pilot.runtime.startup import Startup
from pilot.runtime.timeleft import Limits
from pilot.runtime.transport import Transport

log = logging.getLogger("pilot.master")

# While recent tasks are this short, the master waits for the next result
# without sleeping for a few mean task times, when a worker is on another host
# (ranks of one host wake each other; see MpiTransport.recv): the reaction to a
# result is part of the cost of every step of a chain of short tasks.
HOT_BELOW = 0.005
HOT_MAX = 0.005
# Monitoring files are buffered; an idle master still flushes them this often,
# so a live pegasus-monitord sees a finished task while long ones still run.
FLUSH_EVERY = 0.5
# How long the stopped workers have to say Bye.
BYE_TIMEOUT = 10.0


class Master:
    def __init__(
        self,
        opts: RunOptions,
        transport: Transport,
        events: list[RunEvents] | None = None,
        app: str = "pilot",
        make_events: Callable[[], list[RunEvents]] | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.opts = opts
        # The wall-time limit and signals; a simulation passes its virtual clock.
        self.limits = Limits(opts, clock or time.monotonic)
        self.t = transport
        self.workers = list(range(1, transport.size))
        self.matcher = Matcher()
        self.events = Fanout(list(events or []))
        self._make_events = make_events  # monitoring files, opened in _prepare so a bad path is a clean error
        self.task_out: BinaryIO | None = None  # -o / -e, opened before any task runs
        self.task_err: BinaryIO | None = None
        self.slots = Slots()
        self.seq = 0  # attempts numbered as they become ready (PMC's submit sequence)
        # Per task order: the number of its attempt waiting to start, 0 if none (machine ints: no int object a task).
        self.queued_seq = array("q")
        self.runtime_total = 0.0
        self.abort_reason: str | None = None
        self.engine: Engine | None = None
        self.dag: Dag | None = None
        self.task_files: dict[
            str, taskdir.Files
        ] = {}  # --task-files: task -> (inputs, outputs, optional outputs), sent with its RunTask
        self.rescue: RescueLog | None = None
        self.ahead: Ahead | None = None
        self.crash: CrashGuard | None = None
        self.isolation: Isolation | None = None  # while suspects run alone, before any other work
        self.resource_log: ResourceLog | None = None
        self.fdcache = FdCache(opts.maxfds)
        self.lock = DagLock(opts.dag)
        self.report = RunReport(opts, app, self.workers, self.matcher, self.events, self.fdcache)
        self.events.on_error = self.report.lost  # a monitoring file on a full disk: said, and the run goes on
        self._kill_deadline = 0.0
        self._alive = set(self.workers)
        # Shutdown sent: a worker drops its queue (each task given back) and goes on to nothing after its result.
        self._shut_down = False
        self._started_events = False
        self._next_flush = 0.0
        # With -m a worker waits after a failed task before it goes on to a prefetched one.
        self._hold_on_failure = opts.max_failures > 0
        self.trace = log.isEnabledFor(5)
        self.run_id = f"{os.uname().nodename}-{os.getpid()}-{time.time_ns():x}"
        # What to do with each message a registered worker sends, by its class: the one dispatch of the run and
        # of its end. Results and give-backs join once the engine exists (see _prepare).
        self._handlers: dict[type, Callable[[int, Any], None]] = {WorkerFailed: self._worker_failed, Bye: self._bye}

    # -- entry ----------------------------------------------------------------
    def run(self) -> int:
        self.report.begin()
        self.limits.start()
        with self.limits.catching_signals():  # until the logs and result are written
            try:
                self._prepare()
                self._loop()
            except BaseException as exc:
                self._fail(exc)
                raise
            return self._finish()

    def _fail(self, exc: BaseException) -> None:
        """The run could not go on: stop workers, close the logs, record why."""
        try:
            self._stop_workers()
        except Exception:  # noqa: BLE001 - the original error is the one to report
            log.debug("stopping workers failed", exc_info=True)
        if self._started_events:
            self.events.run_finished(False, {})
        self._close()
        if not isinstance(exc, LockError):  # another run holds the DAG: its result file is not ours
            if self.limits.signalled:
                outcome = RunOutcome.SIGNAL
            elif self.limits.out_of_time():
                outcome = RunOutcome.WALLTIME  # out of time during start-up: a resubmission can finish it
            else:
                outcome = RunOutcome.ERROR
            self.report.write_outcome(self.engine, outcome, getattr(exc, "exit_code", 1))

    # -- setup ----------------------------------------------------------------
    def _prepare(self) -> None:
        opts = self.opts
        if not opts.nolock:
            self.lock.acquire()
        self.dag = dag = read_dag(opts.dag)
        if opts.task_files:
            self.task_files = taskdir.read_lists(opts.task_files, dag)
        outputs.check_dag_dir(opts)
        self.task_out, self.task_err = outputs.open_task_output(opts)
        if self._make_events is not None:
            self.events.sinks.extend(self._make_events())
        gc.freeze()  # the DAG lives as long as the run: keep it out of every later collection
        done: set[str] = set()
        if not opts.skip_rescue:
            done = read_rescue(opts.rescue_path, dag.tasks)
            if done:
                log.info("Rescue log %s: %d of %d tasks already done", opts.rescue_path, len(done), len(dag))
        self.rescue = RescueLog(opts.rescue_path, sorted(done))
        if opts.resource_log:
            self.resource_log = outputs.opened(
                opts.dag + ".resource",
                "the resource log",
                "use --no-resource-log or fix the directory",
                lambda: ResourceLog(opts.dag + ".resource", on_error=self.report.lost),
            )
        self.engine = engine = Engine(dag, opts.tries, opts.max_failures, done)
        self.ahead = ahead = Ahead(engine, self.matcher, self.slots, self.t, self.send_task, self.limits.time_left)
        self._handlers.update({TaskResult: self._task_done, Recalled: ahead.recalled})
        # What killed earlier runs' workers (pilot.runtime.crashes).
        self.crash = CrashGuard(
            opts, dag, engine, self.matcher, self.slots, self.events, self.task_out, self._ready, self._number
        )
        log.info("Master starting with %d workers", len(self.workers))
        startup = Startup(opts, self.t, self.matcher, self.limits, self.run_id)
        startup.register(self.workers)
        for host in self.matcher.hosts.values():
            self._log_resources(host)
        self.events.run_started(opts.dag, len(dag), len(self.workers))
        self._started_events = True
        startup.check_feasible(dag, engine)
        startup.setup_hosts()
        self.limits.prepare(dag, self.matcher)
        self.queued_seq = array("q", bytes(8 * len(dag)))
        self.matcher.reserve(len(dag))
        self.isolation, ready = self.crash.begin(engine.initial_ready())
        for task in ready:
            self._ready(task)

    # -- main loop ------------------------------------------------------------
    def _loop(self) -> None:
        engine, ahead, slots, handlers, limits = self.engine, self.ahead, self.slots, self._handlers, self.limits
        assert engine is not None and ahead is not None
        clock, deadline = limits.clock, limits.deadline
        self.report.dispatching()
        while True:
            if self.abort_reason is None:
                why = limits.stop_reason()
                if why is not None:
                    self._abort(why)
            self._dispatch()  # once stopped, it only takes back prefetched work
            self.events.status(engine.done_count, engine.running, self.matcher.ready_count, engine.failed_count)
            if engine.running == 0 and (engine.stopped or self.matcher.ready_count == 0):
                break
            if self.abort_reason is not None:
                left = self._kill_deadline - clock()
                if left <= 0:
                    log.error("%d task(s) did not end after the kill; giving up on them", engine.running)
                    break
                timeout: float | None = left
                wake = None
            else:
                timeout = None if deadline is None else max(0.0, deadline - clock())
                wake = limits.interrupted
            now = clock()
            if now >= self._next_flush:
                self._drop_lost_workers()
                self._flush_logs()
                self._next_flush = now + FLUSH_EVERY
            timeout = FLUSH_EVERY if timeout is None else min(timeout, FLUSH_EVERY)
            mean = ahead.mean_duration
            hot = min(HOT_MAX, 4 * mean + 5e-4) if mean < HOT_BELOW and slots.running else 0.0
            got = self.t.recv(timeout=timeout, wake=wake, patience=ahead.patience(), hot=hot)
            if got is not None:
                source, msg = got
                handler = handlers.get(type(msg))
                if handler is not None:
                    handler(source, msg)
                else:
                    log.error("unexpected %s from worker %d", type(msg).__name__, source)
        self.report.drained()
        self.events.drained()
        if self.matcher.held and self.abort_reason is None and not engine.stopped:
            limits.report_held(self.matcher)

    def _abort(self, reason: str) -> None:
        assert self.engine is not None
        log.error("Aborting workflow: %s", reason)
        self.abort_reason = reason
        self.engine.stop(reason)
        self._kill_deadline = self.limits.clock() + KILL_GRACE + 5.0
        for rank in self.slots.running:
            self.t.send(rank, KillTask(reason))

    def _dispatch(self) -> None:
        matcher, engine, ahead, isolation = self.matcher, self.engine, self.ahead, self.isolation
        assert engine is not None and ahead is not None
        if isolation is not None:
            turn = isolation.step()
            if turn is Turn.WAIT:
                return  # a task that was running when the job died runs alone
            if turn is Turn.OVER:
                self.isolation = isolation = None
        left = self.limits.time_left()
        while not engine.stopped:
            pick = matcher.assign(left)
            if pick is None:
                break
            task, alloc = pick
            self.send_task(task, alloc)
            self._started(task, alloc)
            self._log_resources(alloc.host)
            if isolation is None:  # a suspect runs alone: nothing follows it on its worker
                ahead.attach_child(alloc.rank, task, alloc)
        if engine.stopped:
            # -m reached: prefetched tasks must not start after all (the common case while the run drains:
            # nothing queued, no pass over every rank).
            if self.slots.queued_total:
                ahead.recall_all()
            return
        if matcher.ready_count:
            if ahead.short:
                ahead.prefetch()
        elif self.slots.queued_total and matcher.has_idle_slot():
            ahead.recall()

    def send_task(self, task: Task, alloc: Allocation, after: Task | None = None) -> None:
        """Start an attempt of ``task`` in the engine and send it to ``alloc``'s worker (after ``after``
        succeeds there, for a follow-on child)."""
        engine = self.engine
        assert engine is not None
        if self.trace:
            log.log(5, "Scheduling task %s", task.name)
        attempt = engine.start(task) if after is None else engine.start_after(task)
        spec = task.spec
        gpu_ids = alloc.gpu_ids[: spec.gpus] if spec.gpus else ()
        self.t.send(
            alloc.rank,
            RunTask(
                task.name,
                task.argv,
                attempt,
                spec.memory,
                spec.cpus,
                gpu_ids,
                task.pegasus_id,
                spec.pipe_forwards,
                spec.file_forwards,
                task.transformation,
                task.dax_id,
                alloc.cpu_ids[: spec.cpus] if spec.cpus > 1 else (),
                after.name if after is not None else None,
                bool(task.children),
                spec.cwd,
                task.stdio,
                spec.env,
                files=self.task_files.get(task.name) if self.task_files else None,
            ),
            ring=alloc.rank not in self.slots.running,  # a busy worker waits on its task, and looks when it ends
        )

    def _ready(self, task: Task) -> None:
        """Queue a task that became ready. Its SUBMIT is logged now and its EXECUTE when it starts, so the
        records' queue time is the time it waited for a slot."""
        self.seq += 1
        self.queued_seq[task.order] = self.seq
        self.events.task_queued(task, self.seq)
        if self.isolation is None or not self.isolation.defer(task):
            self.matcher.push(task)

    def _number(self, task: Task) -> int:
        """Number an attempt that never waited in the ready queue, and log it queued."""
        self.seq += 1
        self.events.task_queued(task, self.seq)
        return self.seq

    def _started(self, task: Task, alloc: Allocation) -> None:
        seq = self.queued_seq[task.order]
        if not seq:  # sent ahead to run after its parent: it became ready as it started
            seq = self._number(task)
        self.queued_seq[task.order] = 0
        self.slots.start(alloc.rank, task, alloc, seq)
        self.events.task_dispatched(task, seq, alloc.rank, alloc.host.name)

    def _bye(self, source: int, msg: Bye) -> None:  # noqa: ARG002 - a handler of _handlers
        self._alive.discard(source)

    def _worker_failed(self, source: int, msg: WorkerFailed) -> None:
        """A worker reports an error; a fatal one ends the run (its task counts as failed, nothing waits on it)."""
        log.error("Worker %d: %s", source, msg.error)
        if not msg.fatal:
            return
        if self.abort_reason is None:
            self._abort(f"worker {source} cannot go on ({msg.error})")
        if source in self.slots.running:
            name = self.slots.running[source][0].name
            self._task_done(source, TaskResult(name, 1, time.time(), 0.0, error=f"worker {source} failed"), held=True)

    def _task_done(self, source: int, res: TaskResult, held: bool | None = None) -> None:
        engine = self.engine
        assert engine is not None and self.rescue is not None
        if source not in self.slots.running:
            # The protocol gives a worker no way to send this: say so rather than end the run over it.
            log.error("worker %d reported a result for %s, which it was not running; ignored", source, res.name)
            return
        held = self._hold_on_failure and res.status != 0 if held is None else held
        # A task sent to run only after this one is given back unstarted when this one failed.
        dropped = res.status != 0 and source in self.slots.conditional
        task, alloc, seq, nxt = self.slots.finish(source, went_on=not held and not dropped and not self._shut_down)
        if dropped:
            self.slots.given_back(source)
        if self.isolation is not None:
            self.isolation.ended(task)
        self._record_result(task, seq, source, res)
        if held and not engine.stopped and not self._shut_down:  # go on: a worker holds after every failure under -m
            self.t.send(source, Resume())
            if self.slots.queued.get(source):  # (dropped ones are being given back: no longer queued)
                nxt = self.slots.resume(source)
        if nxt is not None:
            self._started(nxt, alloc)  # the worker went straight on to its prefetched task
            if self.isolation is None:
                self.ahead.attach_child(source, nxt, alloc)  # type: ignore[union-attr]  # set by run() before any task is dispatched
        else:
            self.matcher.release(alloc)
            self._log_resources(alloc.host)

    def _record_result(self, task: Task, seq: int, source: int, res: TaskResult) -> None:
        engine = self.engine
        assert engine is not None and self.rescue is not None
        self.runtime_total += res.duration
        self.ahead.observe(res.duration)  # type: ignore[union-attr]  # set by run() before any task is dispatched
        status = res.status
        if status == 0 and res.forwards:
            try:
                for dest, data in res.forwards:
                    self.fdcache.write(dest, data)
            except OSError as exc:
                log.error(
                    "Task %s failed due to collective I/O errors: writing to %s failed (%s)",
                    task.name,
                    dest,
                    exc.strerror or exc,
                )
                status = 1
        if status == 0:
            self.rescue.done(task.name)
            self.events.task_ended(task, seq, 0, False)
            for child in engine.succeeded(task):
                self._ready(child)
            log.debug("task %s succeeded on worker %d in %.3f s", task.name, source, res.duration)
            return
        retry = engine.failed(task, retry=self.abort_reason is None)
        self.events.task_ended(task, seq, status, retry)
        why = f" ({res.error})" if res.error else ""
        how = f"exitcode {status}" if status >= 0 else f"signal {-status}"
        if retry:
            log.error(
                "Task %s failed with %s%s on attempt %d; retrying", task.name, how, why, engine.attempts[task.order]
            )
            self._ready(task)
        else:
            log.error("Task %s failed with %s%s", task.name, how, why)

    def _drop_lost_workers(self) -> None:
        """Workers whose watchdog says they died are taken out of the run (see pilot.runtime.crashes)."""
        crash = self.crash
        assert crash is not None
        for rank in crash.lost_ranks():
            if rank in self._alive:
                self._alive.discard(rank)
                crash.lose_worker(rank, self.isolation)

    def _flush_logs(self) -> None:
        self.events.flush()
        if self.resource_log is not None:
            self.resource_log.flush()

    def _log_resources(self, host: Host) -> None:
        if self.resource_log is not None:
            self.resource_log.record(len(host.idle), host.free_cpus, host.free_memory, host.name)

    # -- the end --------------------------------------------------------------
    def _stop_workers(self) -> None:
        """Shutdown to every worker; take the results and give-backs still coming, until each says Bye.

        They go through ``_handlers`` as during the run, except a result from a rank with nothing running
        (the run failed part way) and what a registered worker never sends (start-up was cut short).
        """
        self._shut_down = True
        for rank in sorted(self._alive):
            self.t.send(rank, Shutdown(self.abort_reason or ""))
        if self.rescue is not None:
            # While the workers clean up: the rescue log's fsync at close then finds little or nothing to do.
            self.rescue.sync()
        handlers = self._handlers
        deadline = time.monotonic() + BYE_TIMEOUT
        while self._alive and time.monotonic() < deadline:
            got = self.t.recv(timeout=max(0.0, deadline - time.monotonic()))
            if got is None:
                break
            source, msg = got
            handler = handlers.get(type(msg))
            if handler is not None and (type(msg) is not TaskResult or source in self.slots.running):
                handler(source, msg)
        if self._alive:
            log.warning("worker(s) %s did not confirm shutdown", ", ".join(map(str, sorted(self._alive))))

    def _close(self) -> None:
        for closer in (
            self.rescue,
            self.crash,
            self.resource_log,
            self.fdcache,
            self.events,
            self.task_out,
            self.task_err,
        ):
            if closer is not None:
                try:
                    closer.close()
                except OSError as exc:  # a full disk at exit: the last line names the file, the exit status is 1
                    self.report.lost(written_to(closer), exc)
        if self.rescue is not None and self.rescue.write_failed:
            self.report.unwritten.append(
                f"the rescue log {self.rescue.path} (tasks that ended after it failed run again)"
            )
        self.lock.release()

    def _finish(self) -> int:
        engine = self.engine
        assert engine is not None
        ok = engine.success and self.abort_reason is None
        try:
            self._stop_workers()
            self.report.summary(ok, engine, self.runtime_total, self.task_out, self.task_err)
        finally:
            self._close()
            # Tasks held for lack of time end the run as a wall-time cut: the resubmitted job runs them.
            reason = (
                RunOutcome.DONE
                if ok
                else RunOutcome.SIGNAL
                if self.limits.signalled
                else RunOutcome.WALLTIME
                if self.abort_reason or (self.matcher.held and not engine.stopped)
                else RunOutcome.FAILED
            )
            if self.report.unwritten and reason in (RunOutcome.DONE, RunOutcome.FAILED):
                reason = RunOutcome.ERROR  # output lost to a full disk: a rerun (from the rescue log) completes it
            self.report.write_outcome(engine, reason, 0 if ok and not self.report.unwritten else 1)
        self.report.last_line(engine, ok, self.abort_reason)
        return 0 if ok and not self.report.unwritten else 1
