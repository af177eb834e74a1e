"""One cluster's run inside a long-lived pilot run: its DAG, tries, rescue log, monitoring files and result.

A pilot run that takes clusters from its inbox (``pilot.runtime.agent``)
holds one ``DagRun`` per cluster fed to it, all sharing its workers. Each
writes exactly what a ``pilot run`` of that DAG alone writes, with the same
writers: the rescue log, jobstate.log and dagman.out (``--jobstate-log``,
``--monitord-hack``), the per-worker task stdio merged into ``-o``/``-e``,
``DAG.result``, and the ``[cluster-summary]`` record in the cluster's job
output; and it holds the DAG's lock for as long as it runs, so the driver's
"does a run still hold it" check works as for a cluster's own run. So the
record per cluster is per-cluster mode's, whichever way it ran.

What is shared is the agent's: the transport, the workers and the hosts'
resources (the run's ``Matcher`` is a ready queue of its own over the
agent's hosts: ``Matcher.sharing``). A run's options are the run-wide ones
of its own command line (tries, -m, --max-wall-time counted from when it
was taken, logs, -o/-e); host and worker options are the agent's.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from array import array
from collections.abc import Callable
from typing import Any, BinaryIO

from pilot.contracts.rescue import RescueLog, read_rescue
from pilot.contracts.result import RunOutcome
from pilot.dag import read_dag
from pilot.dag.model import Dag, Task
from pilot.errors import DagError, PilotError
from pilot.monitor.events import Fanout, RunEvents, written_to
from pilot.monitor.resource_log import ResourceLog
from pilot.runtime import outputs, taskdir
from pilot.runtime.engine import Engine, State
from pilot.runtime.forwarding import FdCache
from pilot.runtime.lock import DagLock
from pilot.runtime.options import RunOptions
from pilot.runtime.protocol import RunTask, TaskResult
from pilot.runtime.report import RunReport
from pilot.runtime.slotmatch import Allocation, Host, Matcher
from pilot.runtime.timeleft import Limits
from pilot.util.latefile import LateFile, open_if_late

log = logging.getLogger("pilot.master")
# Seconds a run whose task was killed (SIGTERM, SIGKILL) waits before it ends as failed. When a pilot job is
# ended (a node lost, a cancel) its scheduler signals each node on its own: a task on another node may be killed,
# and its worker's report reach the master, before the master's own signal; the run then ends as signalled (it
# resumes elsewhere) and not as failed (which would cost the cluster a retry).
KILLED_GRACE = 2.0
KILLED = (-15, -9)  # a task's status when SIGTERM or SIGKILL ended it


def in_dag_dir(opts: RunOptions) -> RunOptions:
    """The options with the DAG and every relative path of them taken from the DAG's directory, as its own
    run, started there, reads them: the long-lived run serves clusters of many directories."""
    where = os.path.dirname(os.path.abspath(opts.dag))

    def there(path: str | None) -> str | None:
        return None if path is None else os.path.join(where, path)

    return opts._replace(
        dag=os.path.abspath(opts.dag),
        stdout=there(opts.stdout),
        stderr=there(opts.stderr),
        rescue=there(opts.rescue),
        task_files=there(opts.task_files),
    )


class RunLog(logging.Handler):
    """A run's log lines, also in its cluster's job stderr, where its own run would have written them: the
    records logged for it (``extra=run.tag``) and those its end logs (on the thread that ends it). The file is
    opened by ``open``, after the run's first tasks (pilot.util.latefile); its lines are kept until then."""

    def __init__(self, run_id: str, path: str) -> None:
        super().__init__()
        self.run_id = run_id
        self.path = path
        self.thread: int | None = None
        self.stream: LateFile[str] = LateFile(lambda: open(path, "a", encoding="utf-8"))  # noqa: SIM115 - closed with the run
        main = logging.getLogger("pilot").handlers
        if main:
            self.setFormatter(main[0].formatter)

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "dagrun", None) == self.run_id or record.thread == self.thread:
            try:
                self.stream.write(self.format(record) + "\n")
                self.stream.flush()
            except (OSError, ValueError):
                pass  # its job stderr is a copy: the pilot run's own stderr has every line

    def open(self) -> OSError | None:
        return self.stream.open()

    def close(self) -> None:
        try:
            self.stream.close()
        except OSError:
            pass  # said when its opening failed
        super().close()


class DagRun:
    """One fed cluster's run: the state and writers of a single-DAG ``pilot run``, over shared workers."""

    def __init__(
        self,
        job_id: str,
        opts: RunOptions,
        shared: Matcher,
        workers: list[int],
        app: str,
        make_events: Callable[[RunOptions], list[RunEvents]],
        out: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        err: str | None = None,
        hosts: frozenset[str] | None = None,
        barred: set[str] | None = None,
    ) -> None:
        self.id = job_id
        self.hosts = hosts  # the hosts it holds whole (its tasks run there alone), None: it shares
        self.opts = opts = in_dag_dir(opts)
        self.out = out  # the job output file of the cluster (its [cluster-summary] record), None: ours
        self.err = err  # its job stderr (its log lines), None: ours only
        self.tag = {"dagrun": job_id}  # ``extra`` of its log lines
        self.runlog: RunLog | None = None
        self.where = os.path.dirname(opts.dag)
        self.limits = Limits(opts, clock)
        self.matcher = shared.sharing(hosts, barred)  # barred: what its queue may not use now (pilot.runtime.holds)
        self.events = Fanout([])
        self._make_events = make_events
        self.fdcache = FdCache(opts.maxfds)
        self.lock = DagLock(opts.dag)
        self.report = RunReport(opts, app, workers, self.matcher, self.events, self.fdcache)
        self.events.on_error = self.report.lost
        self.engine: Engine | None = None
        self.dag: Dag | None = None
        self.task_files: dict[
            str, taskdir.Files
        ] = {}  # --task-files: task -> (inputs, outputs, optional outputs), sent with its RunTask
        self.rescue: RescueLog | None = None
        self.task_out: BinaryIO | None = None
        self.task_err: BinaryIO | None = None
        self.resource_log: ResourceLog | None = None
        self.seq = 0
        self.queued_seq = array("q")
        self.runtime_total = 0.0
        self.abort_reason: str | None = None
        self.signalled = False  # ended by a signal, a stop or a cancel (result "signal"), not by its wall time
        self.kill_deadline = 0.0
        self.settle_at = 0.0  # drained, it ends no sooner (KILLED_GRACE)
        self._started_events = False

    # -- start ----------------------------------------------------------------
    def open_files(self) -> None:
        """What its first task needs on disk (as ``Master._prepare``, with ``begin``): the DAG's lock, the DAG, the
        rescue log; and its other files checked (``-o``/``-e``, the DAG's directory) and made to be opened just
        after its first tasks (``open_later``). It touches nothing the runs share (the hosts, the transport), so
        the agent does it on a thread of its own for DAGs waiting to be taken: creating a file costs a
        millisecond where file creation is slow (a VM's disk, a shared file system's metadata server), and each
        DAG of a fan fed at once would wait for the creations of all before it."""
        opts = self.opts
        if self.err is not None:
            self.runlog = RunLog(self.id, self.err)
            logging.getLogger("pilot").addHandler(self.runlog)
        self.report.begin()
        if not opts.nolock:
            self.lock.acquire()
        self.dag = dag = read_dag(opts.dag)
        if opts.task_files:  # its tasks in directories of their own, under the long-lived run's --local-scratch
            self.task_files = taskdir.read_lists(opts.task_files, dag)
        outputs.check_dag_dir(opts)
        self.task_out, self.task_err = outputs.open_task_output(opts, late=True)
        self.events.sinks.extend(self._make_events(opts))
        done: set[str] = set()
        if not opts.skip_rescue:
            done = read_rescue(opts.rescue_path, dag.tasks)
            if done:
                log.info(
                    "%s: rescue log %s: %d of %d tasks already done",
                    self.id,
                    opts.rescue_path,
                    len(done),
                    len(dag),
                    extra=self.tag,
                )
        self.rescue = RescueLog(opts.rescue_path, sorted(done))
        if opts.resource_log:
            path = opts.dag + ".resource"
            self.resource_log = ResourceLog(path, on_error=self.report.lost, late=True)
        self.engine = Engine(dag, opts.tries, opts.max_failures, done)

    def open_later(self) -> None:
        """The files its first tasks did not wait for, opened (on the agent's opening thread, after its take):
        what was written to them meanwhile goes first. One that cannot be opened is said as a file the run
        could not write (its writer's next write or close raises why; the tasks go on)."""
        if self.runlog is not None:
            exc = self.runlog.open()
            if exc is not None:
                log.warning("%s: cannot write its job stderr %s: %s", self.id, self.runlog.path, exc.strerror or exc)
        for late in (self.task_out, self.task_err):
            open_if_late(late)
        self.events.open_late()
        if self.resource_log is not None:
            self.resource_log.open_late()

    def begin(self, workers: int) -> None:
        """The run starts over the shared hosts (after ``open_files``, on the agent's thread): its wall time
        counts from now, its tasks must fit some host, the tasks ready now are queued."""
        opts, dag, engine = self.opts, self.dag, self.engine
        assert dag is not None and engine is not None
        self.limits.start()
        self.events.run_started(opts.dag, len(dag), workers)
        self._started_events = True
        for task in dag:
            if engine.state[task.order] is not State.DONE:  # it must fit some host
                why = self.matcher.infeasible(task)
                if why:
                    raise DagError(
                        opts.dag, task.line, f"FATAL ERROR: No host is capable of running task {task.name}: {why}"
                    )
        self.limits.prepare(dag, self.matcher)
        self.queued_seq = array("q", bytes(8 * len(dag)))
        self.matcher.reserve(len(dag))
        self.report.dispatching()
        for task in engine.initial_ready():
            self.ready(task)

    # -- tasks ----------------------------------------------------------------
    def ready(self, task: Task) -> None:
        self.seq += 1
        self.queued_seq[task.order] = self.seq
        self.events.task_queued(task, self.seq)
        self.matcher.push(task)

    def start(self, task: Task, alloc: Allocation) -> tuple[RunTask, int]:
        """Start an attempt of ``task`` on ``alloc``: the message its worker gets (its stdio next to this DAG, run
        in this DAG's directory, as the cluster's own run starts it there) and the attempt's number in the logs."""
        assert self.engine is not None
        attempt = self.engine.start(task)
        spec = task.spec
        seq = self.queued_seq[task.order]
        self.queued_seq[task.order] = 0
        self.events.task_dispatched(task, seq, alloc.rank, alloc.host.name)
        return RunTask(
            task.name,
            task.argv,
            attempt,
            spec.memory,
            spec.cpus,
            alloc.gpu_ids[: spec.gpus] if spec.gpus else (),
            task.pegasus_id,
            spec.pipe_forwards,
            spec.file_forwards,
            task.transformation,
            task.dax_id,
            alloc.cpu_ids[: spec.cpus] if spec.cpus > 1 else (),
            None,
            True,  # nothing queued behind it: wake the master
            os.path.join(self.where, spec.cwd) if spec.cwd else self.where,
            task.stdio,
            spec.env,
            dag=self.opts.dag,
            files=self.task_files.get(task.name) if self.task_files else None,
        ), seq

    def ended(self, task: Task, seq: int, res: TaskResult) -> None:
        """A task's attempt ended (as ``Master._record_result``)."""
        engine, rescue = self.engine, self.rescue
        assert engine is not None and rescue is not None
        self.runtime_total += res.duration
        status = res.status
        if status == 0 and res.forwards:
            try:
                for dest, data in res.forwards:
                    self.fdcache.write(os.path.join(self.where, dest), data)
            except OSError as exc:
                log.error(
                    "Task %s failed due to collective I/O errors: writing to %s failed (%s)",
                    task.name,
                    dest,
                    exc.strerror or exc,
                    extra=self.tag,
                )
                status = 1
        if status == 0:
            rescue.done(task.name)
            self.events.task_ended(task, seq, 0, False)
            for child in engine.succeeded(task):
                self.ready(child)
            return
        if status in KILLED and self.abort_reason is None:
            self.settle_at = self.limits.clock() + KILLED_GRACE
        retry = engine.failed(task, retry=self.abort_reason is None)
        self.events.task_ended(task, seq, status, retry)
        why = f" ({res.error})" if res.error else ""
        how = f"exitcode {status}" if status >= 0 else f"signal {-status}"
        if retry:
            log.error(
                "%s: task %s failed with %s%s on attempt %d; retrying",
                self.id,
                task.name,
                how,
                why,
                engine.attempts[task.order],
                extra=self.tag,
            )
            self.ready(task)
        else:
            log.error("%s: task %s failed with %s%s", self.id, task.name, how, why, extra=self.tag)

    def abort(self, reason: str, grace: float, signalled: bool) -> None:
        assert self.engine is not None
        if self.abort_reason is None:
            log.error("%s: aborting: %s", self.id, reason, extra=self.tag)
            self.abort_reason = reason
            self.signalled = signalled
            self.engine.stop(reason)
            self.kill_deadline = self.limits.clock() + grace

    @property
    def drained(self) -> bool:
        """Nothing of it runs, and nothing more will start: its record can end."""
        engine = self.engine
        assert engine is not None
        return engine.running == 0 and (engine.stopped or self.matcher.ready_count == 0)

    def log_resources(self, host: Host) -> None:
        if self.resource_log is not None:
            self.resource_log.record(len(host.idle), host.free_cpus, host.free_memory, host.name)

    def flush(self) -> None:
        self.events.flush()
        if self.resource_log is not None:
            self.resource_log.flush()

    # -- the end --------------------------------------------------------------
    def finish(self) -> int:
        """End its record as its own run ends it (``Master._finish``); its exit status."""
        engine = self.engine
        assert engine is not None
        if self.runlog is not None:
            self.runlog.thread = threading.get_ident()  # what its end logs, from here on, is its own
        if self.matcher.held and self.abort_reason is None and not engine.stopped:
            self.limits.report_held(self.matcher)
        self.report.drained()
        self.events.drained()
        ok = engine.success and self.abort_reason is None
        try:
            if self.rescue is not None:
                self.rescue.sync()
            with self._job_output():
                self.report.summary(ok, engine, self.runtime_total, self.task_out, self.task_err)
        finally:
            self._close()
            reason = (
                RunOutcome.DONE
                if ok
                else RunOutcome.SIGNAL
                if self.signalled
                else RunOutcome.WALLTIME
                if self.abort_reason or (self.matcher.held and not engine.stopped)
                else RunOutcome.FAILED
            )
            if self.report.unwritten and reason in (RunOutcome.DONE, RunOutcome.FAILED):
                reason = RunOutcome.ERROR
            code = 0 if ok and not self.report.unwritten else 1
            self.report.write_outcome(engine, reason, code)
        self.report.last_line(engine, ok, self.abort_reason)
        self.end_log()
        return code

    def fail(self, exc: BaseException) -> int:
        """It could not start (a bad DAG, an infeasible task, a lock another run holds): close and record why."""
        if self._started_events:
            self.events.run_finished(False, {})
        self._close()
        code = getattr(exc, "exit_code", 1) if isinstance(exc, PilotError) else 1
        from pilot.errors import LockError  # noqa: PLC0415 - the rare path

        if not isinstance(exc, LockError):  # another run holds the DAG: its result file is not ours
            self.report.write_outcome(self.engine, RunOutcome.ERROR, code)
        log.error("%s: %s", self.id, exc, extra=self.tag)
        self.end_log()
        return code

    @contextlib.contextmanager
    def _job_output(self) -> Any:
        """Standard output is the cluster's job output while its summary record is written."""
        if self.out is None:
            yield
            return
        try:
            fh = open(self.out, "a", encoding="utf-8")  # noqa: SIM115 - closed below
        except OSError as exc:
            self.report.lost(f"the job output {self.out}", exc)
            yield
            return
        with fh, contextlib.redirect_stdout(fh):
            yield

    def _close(self) -> None:
        for closer in (self.rescue, self.resource_log, self.fdcache, self.events, self.task_out, self.task_err):
            if closer is not None:
                try:
                    closer.close()
                except OSError as exc:
                    self.report.lost(written_to(closer), exc)
        if self.rescue is not None and self.rescue.write_failed:
            self.report.unwritten.append(
                f"the rescue log {self.rescue.path} (tasks that ended after it failed run again)"
            )
        self.lock.release()

    def discard(self) -> None:
        """Opened but never begun (its pilot run stops first): its files closed and its lock released, nothing
        recorded, so that it resumes elsewhere as it is."""
        self._close()
        self.end_log()

    def end_log(self) -> None:
        """After its last line: its job stderr takes no more."""
        if self.runlog is not None:
            logging.getLogger("pilot").removeHandler(self.runlog)
            self.runlog.close()
            self.runlog = None
