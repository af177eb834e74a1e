"""Rank 0 of a long-lived ``pilot run --inbox DIR``: the DAGs fed to it run on its workers as they come.

In pilot-job mode a pilot job runs one such run on all of its nodes, and
``pilot submit`` feeds it each ready cluster through the inbox
(``pilot.contracts.inbox``): the cluster's tasks join the running workers'
queue within milliseconds, where a cluster of its own would first pay an MPI
start (a second or more, and many at once queue behind each other's).

The agent owns what the runs share: the workers (registered and set up once,
``Startup``), the hosts' resources (its ``Matcher``), the transport and its
one wait. Each fed cluster is a ``DagRun`` (``pilot.runtime.dagrun``) with
its own DAG state, tries, wall time, rescue log, monitoring files and
result; its record is what its own run would write. The scheduler takes
one ready task of each run in turn (those that have not started one first,
then in the order the runs came), each run's
own queue by its own priorities and time left; a worker runs one task at a time (no work
sent ahead: a fed cluster's tasks are short-lived guests, and each result
must free its slot for any run).

The inbox is looked at between dispatch rounds, at most every
``INBOX_EVERY`` seconds (one stat, and a directory read when it changed),
and the wait for results never lasts longer than that. A request read has
what its run's first task needs on disk opened at once on a thread of its own
(``DagRun.open_files``), in the order the requests came; the run is taken
(``DagRun.begin``: its tasks queued over the shared hosts) once it is, one
per turn of the loop, after every result already in has freed its worker, and
the files it only writes are opened on that thread after (``DagRun.open_later``),
once no fed DAG waits to be taken or to start its first task, at most
``CLOSE_WAIT`` after its take. A run's end is its own: when its last task
ends its record is closed and its done file written, while the others go on
(on a thread of its own, once no fed DAG waits likewise, at most
``CLOSE_WAIT`` later: the DAGs fed at once start first). A DAG fed with hosts to hold whole
(a cluster of several nodes) runs there alone: the others start nothing there
while it runs, and it starts nothing on one where another's task still runs
when it is taken, until that task ended (``pilot.runtime.holds``). The
agent ends when told to (a ``stop`` file), at its own wall time or on
SIGTERM/SIGINT: the runs still going are ended as after a signal (their
rescue logs let them resume elsewhere), then the workers are stopped.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pilot.contracts import inbox
from pilot.dag.model import Task
from pilot.errors import PilotError, UsageError
from pilot.monitor.events import RunEvents
from pilot.runtime.arrivals import Arrival, Arrivals
from pilot.runtime.dagrun import DagRun
from pilot.runtime.deferred import Deferred
from pilot.runtime.holds import Holds
from pilot.runtime.options import RunOptions
from pilot.runtime.protocol import KILL_GRACE, Bye, KillTask, Shutdown, TaskResult, WorkerFailed
from pilot.runtime.slotmatch import Allocation, Matcher
from pilot.runtime.startup import Startup
from pilot.runtime.timeleft import Limits
from pilot.runtime.transport import Transport

# What reads inbox requests, loaded with this module before MPI_Init: the first look would otherwise import it
# (yaml and its patterns, some 25 ms) on the first fed cluster's path.
from pilot.util import boundedload  # noqa: F401 - imported for its load time, above

log = logging.getLogger("pilot.master")

# Seconds between looks at the inbox: the most a fed cluster waits before its tasks are queued (measured in
# docs/architecture.md: the look itself costs some 10 microseconds).
INBOX_EVERY = 0.005
SETTLED_NS = 1_000_000_000  # a directory time older than this, unchanged: nothing new in it
FLUSH_EVERY = 0.5  # monitoring files of every run are flushed this often (as the single-DAG master's)
BYE_TIMEOUT = 10.0
# The longest an ended run's close, or the opening of the files a run taken only writes, waits for the fed DAGs
# to be taken and start their first tasks (its done file tells the driver its children may start, and a monitor
# reads those files: a stream of feeds must not hold either back for long).
CLOSE_WAIT = 0.05
# The longest wait for results while the next DAG to take is still being opened: its take comes at most this
# late after its files are (the opener's thread cannot end the transport's wait).
OPEN_POLL = 0.0005
# What a fed run takes from the agent rather than from its own command line: what the workers do with every
# task (they read their own options) and how the hosts are set up.
WORKER_SIDE = (
    "verbosity",
    "host_script",
    "host_memory",
    "host_cpus",
    "host_gpus",
    "strict_limits",
    "per_task_stdio",
    "invocation_records",
    "sleep_on_recv",
    "keep_affinity",
    "set_affinity",
    "keep_task_processes",
    "max_crashes",
)


class Agent:
    def __init__(
        self,
        opts: RunOptions,
        transport: Transport,
        parse: Callable[[list[str]], RunOptions],
        app: str = "pilot",
        make_events: Callable[[RunOptions], list[RunEvents]] | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        assert opts.inbox is not None
        self.opts = opts
        self.inbox = opts.inbox
        self.t = transport
        self.parse = parse  # a fed cluster's pilot run options, read as its own command line
        self.app = app
        self.make_events = make_events or (lambda o: [])  # noqa: ARG005 - make_events' signature: no events by default
        self.limits = Limits(opts, clock or time.monotonic)
        self.workers = list(range(1, transport.size))
        self.matcher = Matcher()
        self.runs: list[DagRun] = []
        self.running: dict[int, tuple[DagRun, Task, Allocation, int]] = {}  # rank -> its task's run, task, slot, seq
        self.stopping: str | None = None
        self.taken = 0
        self.holds = Holds(self.matcher)  # the hosts fed DAGs hold whole
        self._inbox_mtime = -2  # its modification time at the last read (none yet)
        # Requests read and not yet taken, their runs' files opened ahead: one is taken per turn of the loop,
        # between dispatches and results, so that of many DAGs fed at once the first starts its tasks while the
        # next are being opened.
        self._pending = Arrivals()
        self._alive = set(self.workers)
        # A fed cluster's options by its arguments without the DAG (the clusters of a plan share them): the DAG
        # is only the command line's operand, so one parse serves them all (a parse costs ~0.4 ms of a take).
        self._parsed: dict[tuple[str, ...], RunOptions] = {}
        # Ends runs' records off the dispatch path: a run's end (its summary, the merge of its stdio, the fsyncs of
        # its rescue log, result and done file: some 10 ms) would otherwise hold every other run's next task.
        self._closer = ThreadPoolExecutor(1, thread_name_prefix="pilot-end")
        # Runs ended while fed DAGs wait to be taken or to start: their records are closed once none waits. A
        # cluster waiting to start holds its workflow's critical path; the close of another (its fsyncs, its
        # summary) would cost each first task of a fan of clusters fed at once milliseconds of this interpreter
        # and of the disk. Runs taken whose files they only write are not yet opened are held likewise
        # (``pilot.runtime.deferred``).
        self._ended: Deferred[DagRun] = Deferred(CLOSE_WAIT)
        self._unopened: Deferred[DagRun] = Deferred(CLOSE_WAIT)
        self.run_id = f"{os.uname().nodename}-{os.getpid()}-{time.time_ns():x}"
        self._handlers: dict[type, Callable[[int, Any], None]] = {
            TaskResult: self._result,
            WorkerFailed: self._worker_failed,
            Bye: self._bye,
        }

    def run(self) -> int:
        self.limits.start()
        with self.limits.catching_signals():
            try:
                try:
                    os.makedirs(self.inbox, exist_ok=True)
                except OSError as exc:
                    raise UsageError(
                        f"pilot run: --inbox {self.inbox}: cannot create it ({exc.strerror or exc}); "
                        "give a directory this run can write"
                    ) from None
                startup = Startup(self.opts, self.t, self.matcher, self.limits, self.run_id)
                startup.register(self.workers)
                startup.setup_hosts()
                log.info("Pilot run with %d workers taking DAGs from %s", len(self.workers), self.inbox)
                inbox.write_up(self.inbox)
                self._loop()
            finally:
                for run in list(self.runs):  # an error of the agent itself: every run still ends its record
                    run.abort("the pilot run failed", 0.0, True)
                    self._end(run)
                self._close_ended()
                self._pending.end()  # read and never taken: what was opened is let go
                self._closer.shutdown(wait=True)
                self._stop_workers()
        log.info("Pilot run ends: %d DAG(s) taken (%s)", self.taken, self.stopping or "")
        return 0

    # -- the loop -------------------------------------------------------------
    def _loop(self) -> None:
        clock, limits, handlers = self.limits.clock, self.limits, self._handlers
        next_look = next_flush = 0.0
        while True:
            now = clock()
            if now >= next_look:
                self._look()
                next_look = now + INBOX_EVERY
            if self._pending and self._pending.first_ready():
                self._take_next()
            if self.stopping is None:
                why = limits.stop_reason()
                if why is not None:
                    self._stop_all(why, signalled=limits.signalled is not None)
            for run in self.runs:
                why = run.limits.stop_reason()
                if why is not None and run.abort_reason is None:
                    self._abort(run, why, signalled=False)
            self._dispatch()
            for run in [
                r
                for r in self.runs
                if r.drained and (r.abort_reason or now >= r.settle_at) or (r.abort_reason and now >= r.kill_deadline)
            ]:
                self._end(run)
            if self._ended or self._unopened:
                waiting = self._waiting()
                if self._unopened.due(now, waiting):
                    for run in self._unopened.take():
                        self._pending.open_later(run)
                if self._ended.due(now, waiting):
                    self._close_ended()
            if self.stopping is not None and not self.runs and not self._pending:
                return
            if now >= next_flush:
                for run in self.runs:
                    run.flush()
                next_flush = now + FLUSH_EVERY
            patience = 0.0
            if self._pending:  # the next take as soon as its files are open; results meanwhile
                # Waiting for the opener's thread: a nap, not a spin, which would hold the interpreter it needs.
                timeout = patience = 0.0 if self._pending.first_ready() else OPEN_POLL
            else:
                timeout = max(0.0, min(next_look, next_flush) - clock())
            got = self.t.recv(
                timeout=timeout, wake=limits.interrupted if self.stopping is None else None, patience=patience
            )
            while got is not None:  # every message already here: each result frees its slot before the next take
                source, msg = got
                handler = handlers.get(type(msg))
                if handler is not None:
                    handler(source, msg)
                else:
                    log.error("unexpected %s from worker %d", type(msg).__name__, source)
                got = self.t.recv(timeout=0.0)

    def _look(self) -> None:
        """Take what the inbox holds: new DAGs, cancels, a stop. The directory is read only when it may have
        changed since the last read: its modification time differs, or is too recent to tell (a second: file
        times tick coarsely, and a shared file system's server keeps its own clock)."""
        try:
            mtime = os.stat(self.inbox).st_mtime_ns
        except OSError:
            mtime = -1
        if mtime == self._inbox_mtime and time.time_ns() - mtime > SETTLED_NS:
            return
        self._inbox_mtime = mtime
        seen = inbox.look(self.inbox)
        if seen.stop and self.stopping is None:
            self._stop_all("a stop was requested", signalled=True)
        for req in seen.requests:
            if not isinstance(req, inbox.Request):  # (id, why it cannot be read)
                log.error("inbox request %s: %s", *req)
                inbox.write_done(self.inbox, req[0], 2)
            else:
                self._pending.add(req, self._prepare(req) if self.stopping is None else None)
        if seen.cancels:
            while self._pending.holds_any(seen.cancels):  # taken first, to end as a run's cancel
                self._take_next()
            for run in self.runs:
                if run.id in seen.cancels:
                    self._abort(run, "cancelled", signalled=True)

    def _take_next(self) -> None:
        """Take the first request read (a run that stops answers it unstarted: it resumes elsewhere as it is)."""
        arrival = self._pending.pop()
        if self.stopping is not None:
            arrival.let_go()
            inbox.write_done(self.inbox, arrival.req.id, 1)
        else:
            self._take(arrival)

    def _options(self, req: inbox.Request) -> RunOptions:
        """A fed DAG's options: its own command line, with the agent's worker-side options. PilotError when its
        command line is refused."""
        key = tuple(req.args)
        opts = self._parsed.get(key)
        if opts is None:
            own = self.parse([*req.args, req.dag])
            opts = own._replace(**{name: getattr(self.opts, name) for name in WORKER_SIDE}, inbox=None)
            self._parsed[key] = opts
            return opts
        return opts._replace(dag=req.dag)

    def _prepare(self, req: inbox.Request) -> DagRun | PilotError:
        """The run of a request just read, to be opened ahead; why, when its options are refused."""
        try:
            return self._new_run(req, self._options(req))
        except PilotError as exc:
            return exc

    def _take(self, arrival: Arrival) -> None:
        """Start a fed DAG's run; a DAG that cannot start ends at once, its result and done file saying why."""
        self.taken += 1
        req, run = arrival.req, arrival.run
        if run is None or arrival.opening is None:  # its options were refused when it was read
            log.error("%s: %s", req.id, arrival.refused)
            inbox.write_done(self.inbox, req.id, 2)
            return
        try:
            arrival.opening.result()
            run.begin(len(self.workers))
        except (PilotError, OSError) as exc:
            inbox.write_done(self.inbox, req.id, run.fail(exc))
            return
        log.info(
            "%s: %s taken (%d tasks%s)",
            req.id,
            run.opts.dag,
            run.engine.total if run.engine else 0,
            f", on {', '.join(sorted(run.hosts))} alone" if run.hosts else "",
            extra=run.tag,
        )
        self.holds.take(run, self.running)
        self.runs.append(run)
        self._unopened.add(run, self.limits.clock())

    def _new_run(self, req: inbox.Request, opts: RunOptions) -> DagRun:
        hosts = self.holds.hosts(req)
        return DagRun(
            req.id,
            opts,
            self.matcher,
            self.workers,
            self.app,
            self.make_events,
            req.out,
            self.limits.clock,
            req.err,
            hosts,
            self.holds.barred(hosts),
        )

    def _dispatch(self) -> None:
        """Start what fits, one task of each run in turn, the runs that have not started a task first: a run fed
        while others keep every worker busy starts its first task at the next free slot, not after all of
        theirs (then the runs in the order they came; each run's own queue keeps its order)."""
        send, running = self.t.send, self.running
        turn = [r for r in self.runs if r.matcher.ready_count and r.engine is not None and not r.engine.stopped]
        turn.sort(key=lambda r: r.engine.submitted > 0)  # type: ignore[union-attr] # stable: else in arrival order
        while turn and self.matcher.has_idle_slot():
            nxt = []
            for run in turn:
                pick = run.matcher.assign(run.limits.time_left())
                if pick is None:
                    continue  # nothing of it fits now: it waits for a release
                task, alloc = pick
                msg, seq = run.start(task, alloc)
                send(alloc.rank, msg, ring=True)
                running[alloc.rank] = (run, task, alloc, seq)
                run.log_resources(alloc.host)
                if run.matcher.ready_count:
                    nxt.append(run)
            turn = nxt

    def _abort(self, run: DagRun, reason: str, signalled: bool) -> None:
        run.abort(reason, KILL_GRACE + 5.0, signalled)
        for rank, (owner, *_) in self.running.items():
            if owner is run:
                self.t.send(rank, KillTask(reason))

    def _stop_all(self, why: str, signalled: bool) -> None:
        log.info("Pilot run stopping: %s", why)
        self.stopping = why
        while self._pending:  # answered unstarted
            self._take_next()
        for run in self.runs:
            self._abort(run, why, signalled)

    def _end(self, run: DagRun) -> None:
        """Close a run's record (its last task ended, or it was given up on); its done file for the driver."""
        for rank in [r for r, (owner, *_) in self.running.items() if owner is run]:
            log.error("%s: worker %d did not end its task after the kill; it takes no more tasks", run.id, rank)
            # Its slot stays taken (so do its CPUs); a holder of its host does not wait for it for ever.
            self.holds.left(self.running.pop(rank)[2].host.name, self.running)
        self.runs.remove(run)
        self._unopened.discard(run)  # its close opens them
        self.holds.end(run)
        self._ended.add(run, self.limits.clock())  # nothing but its close touches the run from here on

    def _waiting(self) -> bool:
        """Whether a fed DAG waits to be taken, or was taken and has not started a task yet."""
        return bool(self._pending) or any(
            r.engine is not None and not r.engine.submitted and r.matcher.ready_count for r in self.runs
        )

    def _close_ended(self) -> None:
        for run in self._ended.take():
            self._closer.submit(self._close_run, run)

    def _close_run(self, run: DagRun) -> None:
        try:
            code = run.finish()
        except Exception as exc:  # noqa: BLE001 - one run's end must not end the others
            log.error("%s: ending its run failed: %s", run.id, exc, exc_info=log.isEnabledFor(logging.DEBUG))
            code = 1
        finally:
            run.end_log()
        try:
            inbox.write_done(self.inbox, run.id, code)
        except OSError as exc:  # the driver then learns of its end when the pilot job ends
            log.error("%s: cannot write its done file: %s", run.id, exc.strerror or exc)

    # -- messages ---------------------------------------------------------------
    def _result(self, source: int, res: TaskResult) -> None:
        entry = self.running.pop(source, None)
        if entry is None:
            log.error("worker %d reported a result for %s, which it was not running; ignored", source, res.name)
            return
        run, task, alloc, seq = entry
        run.ended(task, seq, res)
        self.matcher.release(alloc)
        if self.holds.draining:
            self.holds.left(alloc.host.name, self.running)
        run.log_resources(alloc.host)

    def _worker_failed(self, source: int, msg: WorkerFailed) -> None:
        """A worker that cannot go on takes no more tasks; its task counts as failed in its run."""
        log.error("Worker %d: %s", source, msg.error)
        if not msg.fatal:
            return
        entry = self.running.pop(source, None)
        if entry is not None:
            run, task, alloc, seq = entry
            run.ended(task, seq, TaskResult(task.name, 1, time.time(), 0.0, error=f"worker {source} failed"))
            self.holds.left(alloc.host.name, self.running)

    def _bye(self, source: int, msg: Bye) -> None:  # noqa: ARG002 - a handler of _handlers
        self._alive.discard(source)

    def _stop_workers(self) -> None:
        for rank in sorted(self._alive):
            self.t.send(rank, Shutdown(self.stopping or ""))
        deadline = time.monotonic() + BYE_TIMEOUT
        while self._alive and time.monotonic() < deadline:
            got = self.t.recv(timeout=max(0.0, deadline - time.monotonic()))
            if got is None:
                break
            if isinstance(got[1], Bye):
                self._alive.discard(got[0])
        if self._alive:
            log.warning("worker(s) %s did not confirm shutdown", ", ".join(map(str, sorted(self._alive))))
