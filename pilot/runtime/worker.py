"""A worker rank: register, run what the master sends, report, repeat.

The worker owns everything that touches the task's process: spawning,
stdio files, forwarding pipes and files, the records each attempt leaves
(``taskrecords``), the host script of its host, and ending tasks on KillTask
or SIGTERM. It keeps no DAG state.

Nothing a task does can leave the master waiting: an error while starting or
watching a task is that task's failure, and an error in the worker's own loop
is reported as ``WorkerFailed(fatal=True)``, after which the worker still
answers the master until Shutdown. Task processes carry the run's mark
(``reaper``); what they leave running is ended when the worker shuts down,
unless --keep-task-processes.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from typing import TYPE_CHECKING

from pilot.runtime import crashes, hostinfo, instances, reaper, taskdir, taskexec
from pilot.runtime.hostscript import HostScript
from pilot.runtime.options import RunOptions
from pilot.runtime.protocol import (
    PROTOCOL_VERSION,
    Bye,
    Hello,
    HostReady,
    HostSetup,
    KillTask,
    Message,
    Recall,
    Recalled,
    Resume,
    RunTask,
    Shutdown,
    TaskResult,
    WorkerFailed,
)
from pilot.runtime.taskrecords import TaskRecords, file_size
from pilot.runtime.taskstdio import TaskStdio
from pilot.runtime.transport import Transport
from pilot.runtime.watchdog import Watchdog
from pilot.runtime.workqueue import WorkQueue

if TYPE_CHECKING:
    from types import FrameType

log = logging.getLogger("pilot.worker")

MASTER = 0
# After the result of a task this short, the next task (its child, in a chain)
# usually follows within a millisecond: a worker whose master is on another
# host waits for it without sleeping this long (see MpiTransport.recv).
HOT_AFTER = 0.01
HOT_WAIT = 0.003


class Worker:
    def __init__(
        self, opts: RunOptions, transport: Transport, token: str = "", watchdog: Watchdog | None = None
    ) -> None:
        self.opts = opts
        self.token = token or os.urandom(6).hex()
        self.watchdog = watchdog
        self.dag_key = ""  # the master's HostSetup brings it; no task runs before that
        self.mark = reaper.mark(self.dag_key, "", self.token)
        self._pending: tuple[TaskResult, bool] | None = (
            None  # a result (and RunTask.urgent) to send once the next task started
        )
        self.t = transport
        self.rank = transport.rank
        self.hostname = hostinfo.hostname()
        self.host_rank = 0
        self.host_script: HostScript | None = None
        self.terminating = False
        self.kill_requested = False
        self.shutdown_pending = False
        # What the master sent and the worker has not started; it also decides which may still run.
        self.queue = WorkQueue(hold_on_failure=opts.max_failures > 0)
        self.files = TaskStdio(opts, self.rank)  # where its tasks' stdout and stderr go
        self._env = dict(os.environ)
        self._waker: taskexec.ChildWaker | None = None
        self._slot: crashes.Slot | None = None  # the name of the running task, for the next run (pilot.runtime.crashes)
        self._containers = instances.Instances(self.token, not opts.containers_exec) if opts.containers_once else None
        self._dirs = taskdir.TaskDirs(taskdir.local_scratch(opts.local_scratch, self._env), opts.keep_task_dirs)
        self._records = TaskRecords(opts, self.hostname, self.rank)  # what each attempt appends to its stdout

    # -- lifecycle ------------------------------------------------------------
    def run(self) -> int:
        _make_inherited_fds_cloexec()
        if not self.opts.keep_affinity:
            _reset_affinity()
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        self._waker = taskexec.ChildWaker()
        cores, sockets = hostinfo.cpu_topology()
        self.t.send(
            MASTER,
            Hello(
                PROTOCOL_VERSION,
                self.rank,
                self.hostname,
                hostinfo.memory_mb(),
                hostinfo.cpu_count(),
                hostinfo.gpu_ids(),
                os.getpid(),
                cores,
                sockets,
            ),
        )
        try:
            try:
                self._serve_until_shutdown()
            finally:
                self._send_pending()
                self.cleanup()
            self.t.send(MASTER, Bye(self.rank))
            crashes.close_slot(self._slot, self.opts.dag, self.rank)  # a clean end: nothing to suspect
        finally:
            # Only after the Bye: the master waits for every Bye, and need not also wait
            # for the watchdog to wake and leave. What tasks left is ended by then (cleanup).
            self._release_watchdog()
        return 0

    def _serve_until_shutdown(self) -> None:
        """Serve; an error in the worker's own loop is reported as fatal, then it answers until Shutdown."""
        while not self.shutdown_pending:
            try:
                self._serve()
            except Exception as exc:  # noqa: BLE001 - the master must hear of it, not wait forever
                log.error("cannot go on: %s: %s", type(exc).__name__, exc, exc_info=log.isEnabledFor(logging.DEBUG))
                self.queue.broken = True
                self._send_pending()
                self._drop_queue()
                self.t.send(MASTER, WorkerFailed(self.rank, f"{type(exc).__name__}: {exc}", fatal=True))

    def _serve(self) -> None:
        """Run queued tasks and take messages until Shutdown."""
        hot = 0.0
        while not self.shutdown_pending:
            task = self.queue.next()
            if task is not None:
                result = self.run_task(task)
                if result.status == 0 and self.queue and not self.kill_requested:
                    # The next task starts at once; this result goes out right after its
                    # spawn, so the master's work on it overlaps the next task.
                    self._pending = (result, task.urgent)
                    continue
                # Follow-ons of a failed task go back unstarted; under -m the worker then holds (WorkQueue.ended).
                dropped = self.queue.ended(task, result.status)
                self.t.send(MASTER, result)
                for gone in dropped:
                    self.t.send(MASTER, Recalled(gone.name))
                hot = HOT_WAIT if result.duration < HOT_AFTER else 0.0
                continue
            # After SIGTERM the worker still waits for the master's Shutdown.
            got = self.t.recv(hot=hot)
            hot = 0.0
            if got is not None:
                self._on_message(got[1], running=False)

    def _on_message(self, msg: Message, running: bool) -> None:
        """Handle one message from the master; ``running`` says a task is under way."""
        if isinstance(msg, RunTask):
            if not self.queue.take(msg):
                self.t.send(MASTER, Recalled(msg.name))
        elif isinstance(msg, Resume):
            self.queue.resume()
        elif isinstance(msg, Recall):
            if self.queue.recall(msg.name):
                self.t.send(MASTER, Recalled(msg.name))
            # else: it already started; its result will tell the master
        elif isinstance(msg, (KillTask, Shutdown)):
            self._drop_queue()
            if running:
                self.kill_requested = True
            if isinstance(msg, Shutdown):
                self.shutdown_pending = True
        elif isinstance(msg, HostSetup):
            ready = self.setup_host(msg)
            if ready is not None:
                self.t.send(MASTER, ready)
        else:
            log.error("worker %d: unexpected message %s", self.rank, type(msg).__name__)

    def _drop_queue(self) -> None:
        for task in self.queue.drop_all():
            self.t.send(MASTER, Recalled(task.name))

    def cleanup(self) -> None:
        if self._containers is not None:  # before the reaper, which would only kill their processes
            self._containers.stop_all()
        if self.host_script is not None:
            self.host_script.stop()
            self.host_script = None
        if not self.opts.keep_task_processes:
            suffix = ":" + self.token
            left = reaper.end_marked(lambda value: value.endswith(suffix), grace=1.0)
            if left:
                log.info("ended %d process(es) that tasks left running (--keep-task-processes keeps them)", left)
        self.files.close()
        if self._waker is not None:
            self._waker.close()
            self._waker = None

    def _release_watchdog(self) -> None:
        if self.watchdog is not None:
            self.watchdog.release()
            self.watchdog = None

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:  # noqa: ARG002 - a signal handler's signature
        # The master gets the same signal from the launcher and aborts the
        # run; the worker ends its task and waits for the master's Shutdown.
        self.terminating = True

    # -- host setup -----------------------------------------------------------
    def setup_host(self, msg: HostSetup) -> HostReady | None:
        """Take the host rank; start the host script if this worker runs it (the master waits for that answer only)."""
        self.host_rank = msg.host_rank
        self.dag_key = msg.dag_key
        if self._slot is None:  # only now: the master has read what the previous run's slots said
            self._slot = crashes.open_slot(self.opts.dag, self.rank)
        self.mark = reaper.mark(self.dag_key, msg.run_id, self.token)
        if msg.end_stale and msg.dag_key:
            prefix, current = self.dag_key + ":", f"{self.dag_key}:{msg.run_id}:"
            stale = reaper.end_marked(
                lambda value: value.startswith(prefix) and not value.startswith(current), grace=1.0
            )
            if stale:
                log.warning("ended %d process(es) that an earlier run of this DAG left running", stale)
        if msg.script:
            log.info("Launching host script %s", msg.script)
            self.host_script = HostScript(msg.script, self.rank)
            error = self.host_script.start_and_wait(lambda: self.terminating)
            if error is None:
                log.info("Host script exited with status 0")
            else:
                error = f"Worker {self.rank}: {error}"
            return HostReady(self.hostname, error)
        return None

    # -- tasks ----------------------------------------------------------------
    def run_task(self, msg: RunTask) -> TaskResult:
        """Run one attempt; whatever goes wrong comes back as a failed result."""
        try:
            return self._run_task(msg)
        except Exception as exc:  # noqa: BLE001 - a task's inputs must never take the worker down
            error = f"Unable to run task {msg.name}: {type(exc).__name__}: {exc}"
            log.error("%s", error, exc_info=log.isEnabledFor(logging.DEBUG))
            return TaskResult(msg.name, 1, time.time(), 0.0, error=error)
        finally:
            self._send_pending()

    def _send_pending(self) -> None:
        """Send the previous task's result, held back until this task was started.

        This worker is busy again, so the master is woken for it only if other
        tasks wait for this one (``RunTask.urgent``); otherwise it takes the result
        on its next look, with the ones of other workers.
        """
        if self._pending is not None:
            (result, urgent), self._pending = self._pending, None
            self.t.send(MASTER, result, ring=urgent)

    def _run_task(self, msg: RunTask) -> TaskResult:
        self.kill_requested = False
        try:
            out_fd, err_fd, own, out_path, err_path = self.files.open(msg)
        except OSError as exc:
            error = f"cannot open stdio files for task {msg.name}: {exc}"
            self.t.send(MASTER, WorkerFailed(self.rank, error))
            return TaskResult(msg.name, 1, time.time(), 0.0, error=error)
        if self._slot is not None:
            self._slot.running(msg.name)
        out_start = file_size(out_fd)
        try:
            return self._execute(msg, out_fd, err_fd, out_path, err_path)
        except OSError as exc:  # a full or failing disk under the stdio files: report, do not vanish
            error = f"task {msg.name}: writing its output failed: {exc.strerror or exc}"
            log.error("worker %d: %s", self.rank, error)
            # What the attempt wrote before the disk filled goes, record and all: a torn piece would run into
            # the next task's output when the files are merged, and the attempt counts as failed anyway.
            _truncate(out_fd, out_start)
            return TaskResult(msg.name, 1, time.time(), 0.0, error=error)
        finally:
            if self._slot is not None:
                self._slot.idle()
            if own:
                os.close(out_fd)
                os.close(err_fd)

    def _task_env(self, msg: RunTask) -> dict[str, str]:
        env = dict(self._env)
        if msg.env:
            env.update(msg.env)  # the job's env profiles; the PMC_* variables below still say what the pilot gave
        env["PMC_TASK"] = msg.name
        env["PMC_MEMORY"] = str(msg.memory)
        env["PMC_CPUS"] = str(msg.cpus)
        env["PMC_RANK"] = str(self.rank)
        env["PMC_HOST_RANK"] = str(self.host_rank)
        env[reaper.MARK_VAR] = self.mark
        if msg.cpu_ids:
            env["PMC_AFFINITY"] = ",".join(map(str, msg.cpu_ids))
        if msg.gpu_ids:
            ids = ",".join(msg.gpu_ids)
            env["PMC_GPUS"] = ids
            env["CUDA_VISIBLE_DEVICES"] = ids
            env["ROCR_VISIBLE_DEVICES"] = ids
        return env

    def _execute(
        self, msg: RunTask, out_fd: int, err_fd: int, out_path: str | None, err_path: str | None
    ) -> TaskResult:
        argv, env = msg.argv, self._task_env(msg)
        if self._containers is not None:
            argv, env = self._containers.command_for(argv, env, msg.cwd, self.mark, self._must_end)
        err_start = file_size(err_fd) if self.opts.invocation_records else 0
        if self.opts.strict_limits and msg.memory > 0:
            argv = taskexec.limited_argv(argv, msg.memory)
        bind = self.opts.set_affinity and bool(msg.cpu_ids)
        task_dir = None if msg.files is None else self._dirs.prepare(msg.name, self.dag_key, msg.cwd, msg.files)
        cwd = msg.cwd if task_dir is None else task_dir
        try:
            if bind:  # posix_spawn has no affinity attribute: the task inherits ours for the moment of the spawn
                os.sched_setaffinity(0, msg.cpu_ids)
            try:
                if cwd is None and msg.stdio is None:
                    run = taskexec.spawn(argv, env, out_fd, err_fd, msg.pipe_forwards)
                else:
                    run = taskexec.spawn_in(cwd, msg.stdio, argv, env, out_fd, err_fd, msg.pipe_forwards)
            finally:
                if bind:
                    _reset_affinity()
                self._send_pending()
        except OSError as exc:
            start = time.time()
            failure = f"Unable to exec command {msg.argv[0]} for task {msg.name}: {exc.strerror or exc}"
            if cwd is not None and exc.filename == cwd:
                failure = f"Unable to enter working directory {cwd} for task {msg.name}: {exc.strerror or exc}"
            elif msg.stdio is not None and exc.filename and exc.filename in msg.stdio:
                failure = f"Unable to open {exc.filename} as stdio of task {msg.name}: {exc.strerror or exc}"
            os.write(err_fd, (failure + "\n").encode())
            status = (
                127
                if msg.files is None or task_dir is None
                else self._dirs.finish(msg.name, task_dir, msg.cwd, msg.files, 127, err_fd)
            )
            self._records.append(msg, out_fd, start, 0.0, status, err_fd, err_start)
            return TaskResult(msg.name, status, start, 0.0, error=failure, stdout=out_path, stderr=err_path)
        assert self._waker is not None
        taskexec.wait(run, self._waker, self._must_end)
        duration = time.monotonic() - run.started
        status = run.status if run.status is not None else -signal.SIGKILL
        if (
            msg.files is not None and task_dir is not None
        ):  # its outputs go to the workflow's directory (or it fails), its directory goes
            status = self._dirs.finish(msg.name, task_dir, msg.cwd, msg.files, status, err_fd)
        forwards: list[tuple[str, bytes]] = []
        error: str | None = None
        if status == 0:
            forwards = taskexec.pipe_data(run)
        for src, dest in msg.file_forwards:
            if status != 0:
                _remove(src)
                continue
            try:
                data = taskexec.read_file_forward(src)
                if data is not None:  # a source the task did not write: nothing to forward
                    forwards.append((dest, data))
            except ValueError as exc:
                error = f"Task {msg.name}: {exc}"
                log.error("%s", error)
                os.write(err_fd, (error + "\n").encode("utf-8", "surrogateescape"))
                status = 1
                forwards = []
        self._records.append(msg, out_fd, run.start, duration, status, err_fd, err_start)
        return TaskResult(msg.name, status, run.start, duration, forwards, error, out_path, err_path)

    def _must_end(self) -> bool:
        """Pump the master's messages while a task runs; True once it must be ended."""
        while not (self.kill_requested or self.terminating):
            got = self.t.recv(timeout=0)
            if got is None:
                break
            self._on_message(got[1], running=True)
        if self.terminating:
            self._drop_queue()
        return self.kill_requested or self.terminating


def _truncate(fd: int, size: int) -> None:
    try:
        os.ftruncate(fd, size)
    except OSError:
        pass


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _make_inherited_fds_cloexec() -> None:
    """Keep the MPI library's descriptors (PMI sockets, shm) out of tasks."""
    try:
        fds = [int(x) for x in os.listdir("/proc/self/fd")]
    except OSError:
        return
    for fd in fds:
        if fd > 2:
            try:
                os.set_inheritable(fd, False)
            except OSError:
                pass


def _reset_affinity() -> None:
    """Let tasks use every CPU of the host (PMC does the same unless --keep-affinity)."""
    try:
        os.sched_setaffinity(0, range(os.cpu_count() or 1))
    except (OSError, AttributeError):
        log.debug("could not reset CPU affinity", exc_info=True)
