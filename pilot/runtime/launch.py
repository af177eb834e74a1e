"""A ``pilot run`` on one rank: its logging, its role (master or worker), MPI's start and end."""

from __future__ import annotations

import importlib
import logging
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from pilot.errors import UsageError
from pilot.runtime.options import RunOptions

if TYPE_CHECKING:
    from pilot.monitor.events import RunEvents
    from pilot.runtime.transport import MpiTransport

TRACE = 5
_RANK_VARS = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "MV2_COMM_WORLD_RANK", "SLURM_PROCID", "PALS_RANKID")


def env_rank() -> int:
    """This process's MPI rank as the launcher announced it, before MPI starts (0 if unknown)."""
    for var in _RANK_VARS:
        value = os.environ.get(var)
        if value and value.isdigit():
            return int(value)
    return 0


def _setup_logging(verbosity: int, rank: int) -> None:
    """PMC's log lines on stderr: ``[level]``, and ``Worker N:`` on a worker's."""
    level = {2: TRACE, 1: logging.DEBUG, 0: logging.INFO, -1: logging.WARNING, -2: logging.ERROR}.get(
        max(-3, min(2, verbosity)), logging.CRITICAL
    )
    logging.addLevelName(TRACE, "TRACE")
    names = {
        TRACE: "trace",
        logging.DEBUG: "debug",
        logging.INFO: "info",
        logging.WARNING: "warn",
        logging.ERROR: "error",
        logging.CRITICAL: "fatal",
    }

    class _Formatter(logging.Formatter):
        def format(self, record: logging.LogRecord) -> str:
            prefix = f"[{names.get(record.levelno, record.levelname.lower())}]"
            if rank:
                prefix += f" Worker {rank}:"  # PMC's wording, which scripts grep for
            return f"{prefix} {record.getMessage()}"

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter())
    root = logging.getLogger("pilot")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False


def run(opts: RunOptions, prog: str, parse: Callable[[list[str]], RunOptions] | None = None) -> int:
    """Run this rank's side of a ``pilot run`` (rank 0 the master, the others workers); its exit code.

    ``prog`` names the command in the messages of a run that cannot start; ``parse`` reads the options of a DAG
    fed to a run with an inbox (the command line's reader, which this layer does not import).
    """
    rank = env_rank()
    _setup_logging(opts.verbosity, rank)
    token = os.urandom(6).hex()  # marks this worker's task processes
    guard = None
    if rank != 0:
        from pilot.runtime import watchdog

        # Before MPI_Init (see pilot.runtime.watchdog), and before the rank loads its side:
        # the fewer pages the two processes share, the fewer the worker copies as it writes them.
        # With --keep-task-processes it only reports the worker's death, ending nothing.
        guard = watchdog.start(token, watchdog.lost_path(opts.dag), rank, end_tasks=not opts.keep_task_processes)
    from pilot.runtime.transport import MpiTransport

    # Import this rank's side before MPI starts: MPI_Init waits for every rank,
    # so the imports fill that wait instead of delaying the first task after it.
    importlib.import_module(
        ("pilot.runtime.agent" if opts.inbox else "pilot.runtime.master") if rank == 0 else "pilot.runtime.worker"
    )
    try:
        transport = MpiTransport(sleep_on_recv=opts.sleep_on_recv)
    except ImportError as exc:
        if guard is not None:
            guard.release()
        raise UsageError(
            f"{prog}: mpi4py is not installed ({exc}); pip install 'pilot-hpc[mpich]' or build mpi4py against your MPI"
        ) from None
    if guard is not None and (transport.rank == 0 or transport.size < 2):
        guard.release()
        guard = None
    if transport.size < 2:
        raise UsageError(
            f"{prog}: At least one worker process is required: rank 0 is the master, the others run tasks; "
            f"start it as: mpiexec -n N {prog} ... with N >= 2"
        )
    if transport.rank == 0 and opts.inbox is not None:
        from pilot.runtime.agent import Agent

        assert parse is not None, "a run with an inbox reads its DAGs' options"
        code = Agent(
            opts, transport, parse, app=sys.argv[0], make_events=lambda o: _monitors(o, live=False, late=True)
        ).run()
    elif transport.rank == 0:
        from pilot.runtime.master import Master

        code = Master(opts, transport, app=sys.argv[0], make_events=lambda: _monitors(opts)).run()
    else:
        from pilot.runtime.worker import Worker

        code = Worker(opts, transport, token, guard).run()
    return _leave(transport, code)


def _leave(transport: MpiTransport, code: int) -> int:
    """After a run that ended by returning (its logs, stdio and result closed): end MPI, then the process.

    The interpreter's teardown (a last garbage collection, every module
    freed) costs each rank some 4 ms of CPU once its work is done; mpi4py
    calls MPI_Finalize only after it, and MPI_Finalize waits for every rank,
    so the teardown of the slowest rank, and of every rank where ranks share
    cores, delays the end of the job. So the rank flushes its streams, ends
    MPI and calls the C library's exit(), which skips the teardown but still
    runs the MPI library's own exit handlers: MPICH ends its PMI session
    there, and a rank leaving through os._exit() is taken for a crash, the
    launcher killing the other ranks. Where MPI was already up (a program
    that embeds the pilot), the program's own exit ends it.
    """
    if not transport.started_mpi:
        return code
    logging.shutdown()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed or broken stream: the interpreter's exit reports it
        return code
    transport.end()
    import ctypes  # noqa: PLC0415 - loaded already: mpi4py imports it

    ctypes.CDLL(None).exit(code)
    return code  # not reached


def _monitors(opts: RunOptions, live: bool = True, late: bool = False) -> list[RunEvents]:
    """The monitoring writers the options ask for (``live``: with a progress line on a terminal; ``late``: their
    files opened by ``open_late``, after the first tasks of a DAG fed to a long-lived run)."""
    from pilot.runtime.outputs import opened

    sinks: list[RunEvents] = []
    if opts.jobstate_log:
        from pilot.contracts.jobstate import JOBSTATE_FILE, jobstate_path
        from pilot.monitor.jobstate import JobstateLog

        path = jobstate_path(os.path.dirname(os.path.abspath(opts.dag)))
        sinks.append(
            opened(path, JOBSTATE_FILE, "make the DAG's directory writable", lambda: JobstateLog(path, late=late))
        )
    if opts.monitord_hack:
        from pilot.monitor.dagman_out import DagmanOut

        path = opts.dag + ".dagman.out"
        sinks.append(
            opened(
                path,
                "the dagman.out file",
                "make the DAG's directory writable",
                lambda: DagmanOut(path, opts.dag, late=late),
            )
        )
    from pilot.monitor.liveline import LiveLine, stderr_reaches_terminal

    if live and stderr_reaches_terminal():  # someone watches: a progress line (never in a batch job)
        line = LiveLine(sys.stderr)
        for handler in logging.getLogger("pilot").handlers:
            line.attach(handler)
        sinks.append(line)
    return sinks
