"""Rank 0: the DAG engine's driver, the scheduler's caller, and the only writer of logs.

Sequence: lock the DAG, parse it, read the rescue log, wait for every worker
to register, check that every task fits some host, run host scripts, then
dispatch and collect until nothing is left. Every exit path (success,
failures, -m, wall time, SIGTERM/SIGINT, errors) goes through ``_finish``:
workers are told to stop, stdio merged, rescue log, jobstate.log and
dagman.out flushed and closed.
"""

from __future__ import annotations

import gc
import logging
import os
import signal
import time
from array import array
from typing import BinaryIO, Callable

from pilot.contracts.rescue import RescueLog, read_rescue
from pilot.contracts.result import RunOutcome
from pilot.dag import read_dag
from pilot.dag.model import Dag, Task
from pilot.errors import LockError
from pilot.monitor import stdio
from pilot.monitor.events import Fanout, RunEvents
from pilot.monitor.resource_log import ResourceLog
from pilot.runtime import ahead, crashes, outputs, report, timeleft
from pilot.runtime.crashes import CrashLog
from pilot.runtime.engine import Engine
from pilot.runtime.forwarding import FdCache
from pilot.runtime.lock import DagLock
from pilot.runtime.options import RunOptions
from pilot.runtime.policy import Allocation, Host, Matcher
from pilot.runtime.slots import Slots
from pilot.runtime.startup import Startup
from pilot.runtime.protocol import (
    KILL_GRACE,
    Bye,
    KillTask,
    Recall,
    Recalled,
    Resume,
    RunTask,
    TaskResult,
    WorkerFailed,
)
from pilot.runtime.transport import Transport

log = logging.getLogger("pilot.master")

# Prefetch a task onto a busy slot only while recent tasks are this short:
# that is where a round trip to the master costs a noticeable share.
PREFETCH_BELOW = 0.25
# How much work (in seconds of recent mean task time) to queue behind each
# running task, and the most tasks that may wait on one worker.
PREFETCH_SECONDS = 0.008
PREFETCH_MAX = 8
# While recent tasks are this short, the master waits for the next result
# without sleeping for a few mean task times, when a worker is on another host
# (ranks of one host wake each other; see MpiTransport.recv): the reaction to a
# result is part of the cost of every step of a chain of short tasks.
HOT_BELOW = 0.005
HOT_MAX = 0.005
# Monitoring files are buffered; an idle master still flushes them this often,
# so a live pegasus-monitord sees a finished task while long ones still run.
FLUSH_EVERY = 0.5


class Master:
    def __init__(self, opts: RunOptions, transport: Transport, events: list[RunEvents] | None = None, app: str = "pilot",
                 make_events: Callable[[], list[RunEvents]] | None = None, clock: Callable[[], float] | None = None) -> None:
        self.opts = opts
        # Seconds for the wall-time limit; a simulation passes its virtual clock.
        self.clock = clock or time.monotonic
        self.t = transport
        self.app = app
        self.workers = list(range(1, transport.size))
        self.matcher = Matcher()
        self.events = Fanout(list(events or []))
        self._make_events = make_events  # monitoring files, opened in _prepare so a bad path is a clean error
        self.task_out: BinaryIO | None = None  # -o / -e, opened before any task runs
        self.task_err: BinaryIO | None = None
        self.slots = Slots()
        self.mean_duration = float("inf")  # unknown until a task ends: no prefetch before
        self.seq = 0  # attempts numbered as they become ready (PMC's submit sequence)
        # Per task order: the number of its attempt waiting to start, 0 if none (machine ints: no int object a task).
        self.queued_seq = array("q")
        self.runtime_total = 0.0
        self.signalled: str | None = None
        self.abort_reason: str | None = None
        self.engine: Engine | None = None
        self.dag: Dag | None = None
        self.rescue: RescueLog | None = None
        self.crash: CrashLog | None = None
        self.lost: crashes.LostWatch | None = None
        self.isolation: crashes.Isolation | None = None
        self.resource_log: ResourceLog | None = None
        self.fdcache = FdCache(opts.maxfds)
        self.lock = DagLock(opts.dag)
        self.start = time.time()
        self.makespan_start = 0.0
        self.makespan_end = 0.0
        self.deadline: float | None = None
        self._timed = False  # the time-left rule applies: a wall-time limit and tasks with runtimes
        self._kill_deadline = 0.0
        self._alive = set(self.workers)
        self._started_events = False
        self._next_flush = 0.0
        self._kept: dict[str, int] = {}  # per-worker files a failed earlier run left: their sizes at start
        # With -m a worker waits after a failed task before it goes on to a prefetched one.
        self._hold_on_failure = opts.max_failures > 0
        self.trace = log.isEnabledFor(5)
        self.run_id = f"{os.uname().nodename}-{os.getpid()}-{time.time_ns():x}"

    # -- entry ----------------------------------------------------------------
    def run(self) -> int:
        self.start = time.time()
        self._kept = {} if self.opts.per_task_stdio else stdio.merged_offsets(self.opts.dag)
        mono = self.clock()
        if self.opts.max_wall_time:
            self.deadline = mono + self.opts.max_wall_time * 60.0
            log.info("Setting max walltime to %f minutes", self.opts.max_wall_time)
        old = {s: signal.signal(s, self._on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            try:
                self._prepare()
                self._loop()
            except BaseException as exc:
                self._fail(exc)
                raise
            return self._finish()
        finally:
            # Only now: a second signal during the shutdown must not kill the master
            # before its logs and result are written.
            for s, h in old.items():
                signal.signal(s, h)

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
            if self.signalled:
                outcome = RunOutcome.SIGNAL
            elif self.deadline is not None and self.clock() >= self.deadline:
                outcome = RunOutcome.WALLTIME  # out of time during start-up: a resubmission can finish it
            else:
                outcome = RunOutcome.ERROR
            report.write_outcome(self, outcome, getattr(exc, "exit_code", 1))

    def _on_signal(self, signum, frame) -> None:  # noqa: ARG002
        self.signalled = signal.Signals(signum).name

    # -- setup ----------------------------------------------------------------
    def _prepare(self) -> None:
        opts = self.opts
        if not opts.nolock:
            self.lock.acquire()
        self.dag = dag = read_dag(opts.dag)
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
            self.resource_log = outputs.opened(opts.dag + ".resource", "the resource log", "use --no-resource-log or fix the directory",
                                               lambda: ResourceLog(opts.dag + ".resource"))
        self.engine = Engine(dag, opts.tries, opts.max_failures, done)
        self.crash = CrashLog(opts.dag, dag.tasks)  # what killed earlier runs' workers (pilot.runtime.crashes)
        self.lost = crashes.LostWatch(opts.dag)
        log.info("Master starting with %d workers", len(self.workers))
        startup = Startup(opts, self.t, self.matcher, lambda: self.signalled, self._interrupted, self.run_id)
        startup.register(self.workers)
        for host in self.matcher.hosts.values():
            self._log_resources(host)
        self.events.run_started(opts.dag, len(dag), len(self.workers))
        self._started_events = True
        startup.check_feasible(dag, self.engine)
        startup.setup_hosts()
        self._timed = timeleft.prepare(opts, dag, self.matcher, None if self.deadline is None else self.deadline - self.clock())
        self.queued_seq = array("q", bytes(8 * len(dag)))
        self.matcher.reserve(len(dag))
        crashes.begin(self, self.engine.initial_ready())

    # -- main loop ------------------------------------------------------------
    def _interrupted(self) -> bool:
        return self.signalled is not None or (self.deadline is not None and self.clock() >= self.deadline)

    def _loop(self) -> None:
        engine = self.engine
        assert engine is not None
        self.makespan_start = time.time()
        while True:
            if self.abort_reason is None:
                self._check_limits()
            self._dispatch()  # once stopped, it only takes back prefetched work
            self.events.status(engine.done_count, engine.running, self.matcher.ready_count, engine.failed_count)
            if engine.running == 0 and (engine.stopped or self.matcher.ready_count == 0):
                break
            if self.abort_reason is not None:
                timeout: float | None = self._kill_deadline - self.clock()
                if timeout <= 0:
                    log.error("%d task(s) did not end after the kill; giving up on them", engine.running)
                    break
                wake = None
            else:
                timeout = None if self.deadline is None else max(0.0, self.deadline - self.clock())
                wake = self._interrupted
            now = self.clock()
            if now >= self._next_flush:
                crashes.check_lost(self)
                self._flush_logs()
                self._next_flush = now + FLUSH_EVERY
            timeout = FLUSH_EVERY if timeout is None else min(timeout, FLUSH_EVERY)
            hot = min(HOT_MAX, 4 * self.mean_duration + 5e-4) if self.mean_duration < HOT_BELOW and self.slots.running else 0.0
            got = self.t.recv(timeout=timeout, wake=wake, patience=ahead.patience(self), hot=hot)
            if got is not None:
                self._handle(*got)
        self.makespan_end = time.time()
        self.events.drained()
        if self.matcher.held and self.abort_reason is None and not engine.stopped:
            timeleft.report_held(self.matcher, self.deadline - self.clock())  # type: ignore[operator]

    def time_left(self) -> float | None:
        """Seconds a task started now may run (None: no time-left rule; see pilot.runtime.timeleft)."""
        return self.deadline - self.clock() - timeleft.START_MARGIN if self._timed else None  # type: ignore[operator]

    def _check_limits(self) -> None:
        if self.signalled:
            self._abort(f"{self.signalled} received")
        elif self.deadline is not None and self.clock() >= self.deadline:
            self._abort(f"max wall time of {self.opts.max_wall_time:g} minutes reached")

    def _abort(self, reason: str) -> None:
        assert self.engine is not None
        log.error("Aborting workflow: %s", reason)
        self.abort_reason = reason
        self.engine.stop(reason)
        self._kill_deadline = self.clock() + KILL_GRACE + 5.0
        for rank in self.slots.running:
            self.t.send(rank, KillTask(reason))

    def _dispatch(self) -> None:
        matcher = self.matcher
        engine = self.engine
        assert engine is not None
        if self.isolation is not None and crashes.step(self):
            return  # a task that was running when the job died runs alone
        left = self.time_left()
        while not engine.stopped:
            pick = matcher.assign(left)
            if pick is None:
                break
            task, alloc = pick
            self._send_task(task, alloc)
            self._started(task, alloc)
            self._log_resources(alloc.host)
            self._attach_child(alloc.rank, task, alloc)
        if engine.stopped:
            # -m reached: prefetched tasks must not start after all.
            if not self.slots.queued_total:
                return  # the common case while the run drains: no pass over every rank
            for rank, task in self.slots.recall_all():
                self.t.send(rank, Recall(task.name))
            return
        if matcher.ready_count:
            if self.mean_duration < PREFETCH_BELOW:
                self._prefetch()
        elif self.slots.queued_total and matcher.has_idle_slot():
            ahead.recall(self)

    def _send_task(self, task: Task, alloc: Allocation, after: Task | None = None) -> None:
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
                task.name, task.argv, attempt, spec.memory, spec.cpus, gpu_ids, task.pegasus_id,
                spec.pipe_forwards, spec.file_forwards, task.transformation, task.dax_id,
                alloc.cpu_ids[: spec.cpus] if spec.cpus > 1 else (), after.name if after is not None else None,
                bool(task.children), spec.cwd, task.stdio, spec.env,
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

    def _started(self, task: Task, alloc: Allocation) -> None:
        seq = self.queued_seq[task.order]
        if not seq:  # sent ahead to run after its parent: it became ready as it started
            self.seq += 1
            seq = self.seq
            self.events.task_queued(task, seq)
        self.queued_seq[task.order] = 0
        self.slots.start(alloc.rank, task, alloc, seq)
        self.events.task_dispatched(task, seq, alloc.rank, alloc.host.name)

    def _attach_child(self, rank: int, task: Task, alloc: Allocation) -> None:
        if self.isolation is None:  # a suspect runs alone: nothing follows it on its worker
            ahead.attach_child(self, rank, task, alloc)

    def _prefetch(self) -> None:
        ahead.prefetch(self)

    def _handle(self, source: int, msg) -> None:
        if isinstance(msg, TaskResult):
            self._task_done(source, msg)
        elif isinstance(msg, Recalled):
            ahead.recalled(self, source, msg.name)
        elif isinstance(msg, WorkerFailed):
            self._worker_failed(source, msg)
        elif isinstance(msg, Bye):
            self._alive.discard(source)
        else:
            log.error("unexpected %s from worker %d", type(msg).__name__, source)

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
        held = self._hold_on_failure and res.status != 0 if held is None else held
        # A task sent to run only after this one is given back unstarted when this one failed.
        dropped = res.status != 0 and source in self.slots.conditional
        task, alloc, seq, nxt = self.slots.finish(source, went_on=not held and not dropped)
        if self.isolation is not None:
            crashes.ended(self, task)
        self._record_result(task, seq, source, res)
        if held and not engine.stopped:  # go on: a worker holds after every failure under -m, queue or not
            self.t.send(source, Resume())
            if not dropped and self.slots.queued.get(source):
                nxt = self.slots.resume(source)  # dropped ones come back as Recalled instead
        if nxt is not None:
            self._started(nxt, alloc)  # the worker went straight on to its prefetched task
            self._attach_child(source, nxt, alloc)
        else:
            self.matcher.release(alloc)
            self._log_resources(alloc.host)

    def _record_result(self, task: Task, seq: int, source: int, res: TaskResult) -> None:
        engine = self.engine
        assert engine is not None and self.rescue is not None
        self.runtime_total += res.duration
        if self.mean_duration == float("inf"):
            self.mean_duration = res.duration
        else:
            self.mean_duration += (res.duration - self.mean_duration) * 0.1
        self.slots.depth = max(1, min(PREFETCH_MAX, int(PREFETCH_SECONDS / max(self.mean_duration, 1e-6))))
        status = res.status
        if status == 0 and res.forwards:
            try:
                for dest, data in res.forwards:
                    self.fdcache.write(dest, data)
            except OSError as exc:
                log.error("Task %s failed due to collective I/O errors: writing to %s failed (%s)", task.name, dest, exc.strerror or exc)
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
            log.error("Task %s failed with %s%s on attempt %d; retrying", task.name, how, why, engine.attempts[task.order])
            self._ready(task)
        else:
            log.error("Task %s failed with %s%s", task.name, how, why)

    def _flush_logs(self) -> None:
        self.events.flush()
        if self.resource_log is not None:
            self.resource_log.flush()

    def _log_resources(self, host: Host) -> None:
        if self.resource_log is not None:
            self.resource_log.record(len(host.idle), host.free_cpus, host.free_memory, host.name)

    # -- the end --------------------------------------------------------------
    def _stop_workers(self) -> None:
        report.stop_workers(self)

    def _close(self) -> None:
        for closer in (self.rescue, self.crash, self.resource_log, self.fdcache, self.events, self.task_out, self.task_err):
            if closer is not None:
                try:
                    closer.close()
                except OSError as exc:  # pragma: no cover - disk full at exit
                    log.error("closing logs: %s", exc)
        self.lock.release()

    def _finish(self) -> int:
        engine = self.engine
        assert engine is not None
        ok = engine.success and self.abort_reason is None
        try:
            self._report(ok)
        finally:
            self._close()
            # Tasks held for lack of time end the run as a wall-time cut: the resubmitted job runs them.
            reason = (RunOutcome.DONE if ok else RunOutcome.SIGNAL if self.signalled else RunOutcome.WALLTIME
                      if self.abort_reason or (self.matcher.held and not engine.stopped) else RunOutcome.FAILED)
            report.write_outcome(self, reason, 0 if ok else 1)
        report.outcome_line(self, ok)
        return 0 if ok else 1

    def _report(self, ok: bool) -> None:
        """Workers stopped, stdio merged, report and summary printed, monitoring closed."""
        self._stop_workers()
        report.final_report(self, ok)
