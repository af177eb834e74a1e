"""Root monitoring for the life of ``pilot submit``: the root dagman.out, and pegasus-monitord following it.

pegasus-run starts pegasus-monitord beside DAGMan so that pegasus-status,
-statistics and -analyzer work while the workflow runs; ``pilot submit`` does
the same when pegasus-wms is importable (``--no-monitord`` turns it off). It
runs ``pegasus-monitord <wf>-0.dag.dagman.out`` in the submit directory, the
stampede DB being monitord's default (``<wf>-0.stampede.db`` there).

monitord writes its own jobstate.log; the driver already writes the root
``jobstate.log``, so monitord's copy goes to ``monitord-jobstate.log``
(its ``-j`` option) instead of being interleaved with it.

Restarts: a restarted ``pilot submit`` appends to the same dagman.out. A
monitord that resumed at the line where it stopped would not know the
clusters still in the queue (their later events would be dropped), so before
starting monitord on a dagman.out that already has lines, ``pilot submit``
leaves the ``monitord.recover`` file that monitord itself leaves when it dies
mid-run: monitord then drops this workflow from its DB and reads the whole
dagman.out again. Nothing is counted twice and nothing is lost. That
monitord meets the earlier run's EXITING line, which a later STARTING UP does
not undo, so it stops at its first look that finds the file unchanged, often
before the restarted run ends; ``pilot submit`` therefore replays the whole
dagman.out into the DB once a restarted run has ended (``Monitord.replay``). A monitord
of an earlier ``pilot submit`` still running is stopped first (SIGINT, its
graceful exit), as monitord refuses to run twice on one directory.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

from pilot.contracts.submitstate import ClusterState
from pilot.errors import ConfigError
from pilot.monitor.root import Phase, RootMonitor, root_braindump
from pilot.submit.options import retries_for
from pilot.util.procs import cmdline
from pilot.util.safeopen import open_file, read_at_most

log = logging.getLogger("pilot.submit")

RECOVER = "monitord.recover"
PID_FILE = "monitord.pid"
LOG_FILE = "monitord.out"
JOBSTATE = "monitord-jobstate.log"
FINISH_TIMEOUT = 60.0  # seconds: how long monitord may go without any CPU time before it counts as stuck
INCOMPLETE = "monitord.incomplete"
NOTE_BYTES = 4096  # of monitord.pid and monitord.incomplete: one line each


def pegasus_cli(tool: str) -> list[str] | None:
    """The command line of a pegasus-wms tool (they ship as modules under Pegasus/cli/), or None."""
    spec = importlib.util.find_spec("Pegasus")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], "cli", f"{tool}.py")
    return [sys.executable, path] if os.path.exists(path) else None


def _stop_earlier(submit_dir: str, deadline: float = 15.0) -> None:
    """SIGINT a monitord an earlier pilot submit left running on this directory; wait until it is gone."""
    try:
        pid = int(read_at_most(os.path.join(submit_dir, PID_FILE), NOTE_BYTES).decode("ascii", "replace").split()[1])
    except (OSError, ValueError, IndexError):
        return
    if not any(b"pegasus-monitord" in arg for arg in cmdline(pid) or []):
        return
    log.info("stopping the pegasus-monitord (pid %d) of an earlier pilot submit", pid)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGINT)
    end = time.monotonic() + deadline
    while time.monotonic() < end and os.path.exists(f"/proc/{pid}"):
        time.sleep(0.1)


class Monitord:
    """One pegasus-monitord process following the root dagman.out."""

    def __init__(self, submit_dir: str, dagman_out: str) -> None:
        self.submit_dir = submit_dir
        self.dagman_out = dagman_out
        self.proc: subprocess.Popen | None = None

    def start(self, recover: bool) -> bool:
        """Start monitord; ``recover``: the dagman.out has an earlier run's lines (see the module doc)."""
        cmd = pegasus_cli("pegasus-monitord")
        if cmd is None:
            return False
        _stop_earlier(self.submit_dir)
        if recover:
            with open_file(os.path.join(self.submit_dir, RECOVER), "w", encoding="utf-8") as fh:
                fh.write("line_processed 1\n")
        with open_file(os.path.join(self.submit_dir, LOG_FILE), "ab") as out:
            self.proc = subprocess.Popen(
                [*cmd, "-j", JOBSTATE, os.path.basename(self.dagman_out)],
                cwd=self.submit_dir,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                start_new_session=True,
            )
        log.info("pegasus-monitord follows %s (pid %d; log %s)", self.dagman_out, self.proc.pid, LOG_FILE)
        return True

    def exited(self) -> bool:
        """Whether monitord has already ended (a call before the run's end: it stopped too early)."""
        return self.proc is not None and self.proc.poll() is not None

    def replay(self) -> int | None:
        """Read the whole dagman.out again into the DB, as ``pegasus-monitord -r`` after the fact.

        A monitord that re-reads a restarted run's dagman.out meets the earlier run's EXITING line; its
        ``STARTING UP`` after it does not reset that (monitord resets it only for two starts in a row), so
        it ends at the first look that finds the file unchanged, well before the run does. The replay
        reads to the end whatever it meets on the way.
        """
        cmd = pegasus_cli("pegasus-monitord")
        if cmd is None:
            return None
        with open_file(os.path.join(self.submit_dir, RECOVER), "w", encoding="utf-8") as fh:
            fh.write("line_processed 1\n")
        with open_file(os.path.join(self.submit_dir, LOG_FILE), "ab") as out:
            return subprocess.call(
                [*cmd, "-r", "-j", JOBSTATE, os.path.basename(self.dagman_out)],
                cwd=self.submit_dir,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
            )

    def finish(self, window: float = FINISH_TIMEOUT) -> int | None:
        """Wait for monitord to read the end of the run (it exits on EXITING). It is never stopped while it
        makes progress: after each ``window`` without an exit its CPU time is looked at, and only a monitord
        that used none over a whole window (stuck) is stopped (SIGINT). Returns its exit status; None when
        none ran or it had to be stopped."""
        if self.proc is None:
            return None
        used = _cpu_seconds(self.proc.pid)
        waited = 0.0
        while True:
            try:
                return self.proc.wait(window)
            except subprocess.TimeoutExpired:
                waited += window
            now = _cpu_seconds(self.proc.pid)
            if now is None or used is None or now <= used:
                break
            if waited == window:
                log.info(
                    "pegasus-monitord is still reading the run's records; waiting for it (it is not stopped "
                    "while it makes progress)"
                )
            used = now
        log.warning("pegasus-monitord made no progress for %.0f s; stopping it", window)
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return None

    def complete_command(self) -> str:
        """The one command that reads the whole run into the DB again (what a stopped monitord left undone)."""
        cmd = pegasus_cli("pegasus-monitord") or ["pegasus-monitord"]
        return (
            f"cd {shlex.quote(self.submit_dir)} && echo 'line_processed 1' > {RECOVER} && "
            f"{shlex.join(cmd)} -r -j {JOBSTATE} {shlex.quote(os.path.basename(self.dagman_out))}"
        )


def _cpu_seconds(pid: int) -> float | None:
    """User and system CPU time a process has used so far (/proc), None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def mark_incomplete(submit_dir: str, command: str | None) -> None:
    """``monitord.incomplete``: the command that completes the monitoring DB (None: the DB is complete)."""
    path = os.path.join(submit_dir, INCOMPLETE)
    if command is None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        return
    with open_file(path, "w", encoding="utf-8") as fh:
        fh.write(command + "\n")


def incomplete_note(submit_dir: str) -> str | None:
    """The line pilot status shows when the monitoring DB is known to be incomplete, else None."""
    try:
        command = read_at_most(os.path.join(submit_dir, INCOMPLETE), NOTE_BYTES).decode("utf-8", "replace").strip()
    except OSError:
        return None
    return f"the monitoring DB is incomplete (pegasus-monitord stopped early); complete it with: {command}"


# DAGMan's status when it is removed (condor_rm, SIGUSR1), whatever its nodes did: EXIT_ABORT.
EXIT_REMOVED = 2


def exit_code(driver) -> int:
    """DAGMan's exit status for the run: 0 all done, 1 a cluster failed, 2 stopped with clusters left."""
    states = [c.state for c in driver.state.clusters.values()]
    if all(s is ClusterState.DONE for s in states):
        return 0
    if any(s is ClusterState.FAILED for s in states):
        return 1
    return 2


def _catch_up(monitor: RootMonitor, driver) -> None:
    """Events an earlier pilot submit saved in its state but died before logging (it logs right after saving)."""
    for c in driver.state.clusters.values():
        node = monitor.nodes.get(c.name)
        if node is None:
            continue
        if c.state is ClusterState.WAITING and node.phase is Phase.FAILED:
            node.phase = Phase.WAITING  # a rerun tries the failed cluster again (DAGMan's rescue DAG)
        elif c.state is ClusterState.QUEUED and node.phase is Phase.WAITING:
            monitor.submitted(c.name, c.job_id or "", c.site or "-")
        elif node.phase in (Phase.QUEUED, Phase.RUNNING) and c.state in (
            ClusterState.DONE,
            ClusterState.FAILED,
            ClusterState.WAITING,
        ):
            limit = retries_for(driver.opts, driver.specs[c.name].retry) + driver.opts.max_resubmits
            monitor.ended(c.name, retry=c.state is ClusterState.WAITING, retry_limit=limit)


def require_root_files(submit_dir: str) -> None:
    """Refuse, in one line, a directory planned before root monitoring, before anything is written there."""
    root_braindump(submit_dir)


def cancel_monitoring(driver) -> contextlib.AbstractContextManager:
    """``pilot cancel``: the removed clusters' batch jobs logged as aborted, as a DAGMan removal is.

    A directory planned before root monitoring is cancelled all the same.
    """
    try:
        root_braindump(driver.submit_dir)
    except ConfigError:
        return contextlib.nullcontext()
    return root_monitoring(driver, removed=True)


@contextlib.contextmanager
def root_monitoring(driver, run_monitord: bool = True, removed: bool = False) -> Iterator[RootMonitor]:
    """Attach the root writers to ``driver`` for the ``with`` block; start monitord if asked and possible.

    ``removed``: the run is being cancelled; it ends with ``EXIT_REMOVED``, as a removed DAGMan
    does even when a node had failed before.
    """
    monitor = RootMonitor(driver.submit_dir)  # a one-line error for a directory without root files
    monitord = Monitord(monitor.submit_dir, monitor.path)
    restarted = monitor.restarted
    monitor.start()
    _catch_up(monitor, driver)
    driver.monitor = monitor
    started = run_monitord and monitord.start(recover=restarted)
    if run_monitord and not started:
        log.info("pegasus-wms is not installed: no live pegasus-monitord (see the README's monitoring section)")
    try:
        yield monitor
    finally:
        early = started and monitord.exited()  # before the run's own EXITING line
        monitor.finished(EXIT_REMOVED if removed else exit_code(driver))
        monitor.close()
        if started:
            status = monitord.finish()
            if early or restarted:  # it may have stopped at the earlier run's EXITING (see Monitord.replay)
                log.info(
                    "replaying %s into the monitoring DB: pegasus-monitord may stop at an earlier run's end",
                    os.path.basename(monitor.path),
                )
                status = monitord.replay()
            complete = None if status == 0 else monitord.complete_command()
            mark_incomplete(monitor.submit_dir, complete)
            if complete:
                log.warning(
                    "the monitoring DB is incomplete (pegasus-monitord ended with %s); complete it with: %s",
                    "a stop" if status is None else f"status {status}",
                    complete,
                )
