"""Command-line options of ``pilot run`` / ``pilot-mpi-cluster`` (PMC's, plus a few).

Every option of the pegasus-mpi-cluster man page is accepted with its
meaning; PMC_HOST_SCRIPT, PMC_HOST_MEMORY, PMC_HOST_CPUS and PMC_MAX_WALL_TIME
supply defaults that the command line overrides. Ours: ``--host-gpus`` (and
PMC_HOST_GPUS). Parsing errors are one line and exit status 2.

Every rank parses the options at start, before MPI_Init: ``RunOptions`` is a
named tuple, cheap to define, and annotations are evaluated (no
``from __future__ import annotations``), which ``NamedTuple`` would otherwise
compile one by one.
"""

import argparse
import math
import os
import re
import resource
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from pilot import __version__
from pilot.contracts.rescue import rescue_path
from pilot.errors import UsageError
from pilot.util.cmdline import Parser


DEFAULT_MAX_CRASHES = 2  # crashes of its worker while a task ran alone before it is failed (pilot.runtime.crashes)


class RunOptions(NamedTuple):
    dag: str
    verbosity: int = 0
    skip_rescue: bool = False
    stdout: str | None = None
    stderr: str | None = None
    max_failures: int = 0
    tries: int = 1
    nolock: bool = False
    rescue: str | None = None
    host_script: str | None = None
    host_memory: int | None = None
    host_cpus: int | None = None
    host_gpus: int | None = None
    strict_limits: bool = False
    max_wall_time: float | None = None
    per_task_stdio: bool = False
    jobstate_log: bool = False
    monitord_hack: bool = False
    invocation_records: bool = False
    resource_log: bool = True
    sleep_on_recv: bool = True
    maxfds: int | None = None
    keep_affinity: bool = False
    set_affinity: bool = False
    keep_task_processes: bool = False
    ignore_runtimes: bool = False
    max_crashes: int = 2  # DEFAULT_MAX_CRASHES

    @property
    def rescue_path(self) -> str:
        return self.rescue or rescue_path(self.dag)


def build_parser(prog: str) -> argparse.ArgumentParser:
    p = Parser(
        prog=prog,
        description="Run a PMC-format DAG of tasks under MPI: rank 0 is the master, ranks 1..N-1 run tasks. "
        "Start it as: mpiexec -n N %s [options] workflow.dag" % prog,
    )
    p.add_argument("dag", metavar="workflow.dag", help="the DAG file (PMC format)")
    p.add_argument("-V", "--version", action="version", version=f"%(prog)s {__version__}")
    p.add_argument("-v", "--verbose", action="count", default=0, help="more logging (repeatable); also shows tracebacks")
    p.add_argument("-q", "--quiet", action="count", default=0, help="less logging (repeatable)")
    p.add_argument("-s", "--skip-rescue", action="store_true", help="ignore the rescue log (a new one is still written)")
    p.add_argument("-o", "--stdout", metavar="path", help="file for task stdout (default: the master's stdout)")
    p.add_argument("-e", "--stderr", metavar="path", help="file for task stderr (default: the master's stderr)")
    p.add_argument("-m", "--max-failures", metavar="M", type=_leading_int_at_least(0), default=0,
                   help="stop starting tasks after M tasks failed permanently (0: no limit)")
    p.add_argument("--max-crashes", metavar="N", type=_int_at_least(1),
                   help="fail a task that was running alone when its worker died N times, instead of starting it "
                        "again (PMC_MAX_CRASHES; default 2)")
    p.add_argument("-t", "--tries", metavar="T", type=_leading_int_at_least(1), default=1, help="tries per task (default 1)")
    p.add_argument("-n", "--nolock", action="store_true", help="do not lock the DAG file")
    p.add_argument("-r", "--rescue", metavar="path", help="rescue log path (default: DAG.rescue)")
    p.add_argument("--host-script", metavar="path", help="script run once per host before any task (PMC_HOST_SCRIPT)")
    p.add_argument("--host-memory", metavar="MB", type=_host_size, help="memory per host in MB (PMC_HOST_MEMORY; "
                   "0: detect, the default)")
    p.add_argument("--host-cpus", metavar="N", type=_host_size, help="CPUs per host (PMC_HOST_CPUS; 0: detect, the default)")
    p.add_argument("--host-gpus", metavar="N", type=_int_at_least(0), help="GPUs per host (PMC_HOST_GPUS)")
    p.add_argument("--strict-limits", action="store_true", help="enforce each task's memory request")
    p.add_argument("--max-wall-time", metavar="minutes", type=_wall_minutes,
                   help="abort the run after this many minutes (PMC_MAX_WALL_TIME; fractions allowed; 0 or less: no "
                        "limit, as Pegasus writes for short clustered jobs)")
    p.add_argument("--per-task-stdio", action="store_true", help="write TASK.out.NNN/TASK.err.NNN per attempt")
    p.add_argument("--jobstate-log", action="store_true", help="append to jobstate.log next to the DAG")
    p.add_argument("--monitord-hack", action="store_true", help="write DAG.dagman.out for pegasus-monitord (implies --per-task-stdio)")
    p.add_argument("--invocation-records", action="store_true",
                   help="after each task's [cluster-task] record, an invocation record (arguments, exit, stderr) "
                        "for pegasus-monitord, in the task's stdout stream: no file per task")
    p.add_argument("--no-resource-log", action="store_true", help="do not write DAG.resource")
    p.add_argument("--no-sleep-on-recv", action="store_true", help="poll for messages without sleeping (for MPIs that block cheaply)")
    p.add_argument("--maxfds", metavar="N", type=_int_at_least(1), help="open files kept by the master for I/O forwarding")
    p.add_argument("--keep-affinity", action="store_true", help="keep the inherited CPU affinity instead of resetting it")
    p.add_argument("--set-affinity", action="store_true",
                   help="bind each multi-CPU task to the CPUs it was given (PMC_AFFINITY lists them either way)")
    p.add_argument("--keep-task-processes", action="store_true",
                   help="leave processes that tasks started in the background running when the run ends")
    p.add_argument("--ignore-runtimes", action="store_true",
                   help="schedule as if no task had a '#pilot runtime=' line: equal priorities in DAG order, and "
                        "under --max-wall-time tasks start even when their runtime exceeds the time left")
    return p


def parse_run_args(argv: Sequence[str], env: Mapping[str, str] | None = None, prog: str = "pilot run") -> RunOptions:
    env = os.environ if env is None else env
    ns = build_parser(prog).parse_args(list(argv))
    host_cpus = _given(ns.host_cpus, env, "PMC_HOST_CPUS", _host_size)
    if ns.set_affinity and host_cpus is not None:
        # CPU numbers handed to tasks must be real CPUs of the host, as in PMC.
        raise UsageError(f"{prog}: --host-cpus is not compatible with --set-affinity; drop one of them")
    if ns.maxfds is not None:
        limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        if limit != resource.RLIM_INFINITY and ns.maxfds > limit:
            raise UsageError(f"{prog}: --maxfds {ns.maxfds} is more than RLIMIT_NOFILE ({limit}); use at most {limit}")
    return RunOptions(
        dag=ns.dag,
        verbosity=ns.verbose - ns.quiet,
        skip_rescue=ns.skip_rescue,
        stdout=None if ns.stdout == "stdout" else ns.stdout,  # PMC's names of its own streams
        stderr=None if ns.stderr == "stderr" else ns.stderr,
        max_failures=ns.max_failures,
        tries=ns.tries,
        nolock=ns.nolock,
        rescue=ns.rescue,
        host_script=ns.host_script if ns.host_script is not None else (env.get("PMC_HOST_SCRIPT") or None),
        host_memory=_given(ns.host_memory, env, "PMC_HOST_MEMORY", _host_size),
        host_cpus=host_cpus,
        host_gpus=ns.host_gpus if ns.host_gpus is not None else _env_value(env, "PMC_HOST_GPUS", _int_at_least(0)),
        strict_limits=ns.strict_limits,
        max_wall_time=_given(ns.max_wall_time, env, "PMC_MAX_WALL_TIME", _wall_minutes),
        per_task_stdio=ns.per_task_stdio or ns.monitord_hack,
        jobstate_log=ns.jobstate_log,
        monitord_hack=ns.monitord_hack,
        invocation_records=ns.invocation_records,
        resource_log=not ns.no_resource_log,
        sleep_on_recv=not ns.no_sleep_on_recv,
        maxfds=ns.maxfds,
        keep_affinity=ns.keep_affinity,
        set_affinity=ns.set_affinity,
        keep_task_processes=ns.keep_task_processes,
        ignore_runtimes=ns.ignore_runtimes,
        max_crashes=ns.max_crashes if ns.max_crashes is not None else (
            _env_value(env, "PMC_MAX_CRASHES", _int_at_least(1)) or DEFAULT_MAX_CRASHES),
    )


# A value given as 0 (or, for the wall time, less): "not given", as PMC reads it. argparse cannot return
# None for a given value, so the converters return this and _given maps it.
_UNSET = -1


def _given(value, env: Mapping[str, str], name: str, convert):
    """The command line's value, else the environment's; PMC's "0: detect / no limit" read as None."""
    if value is None:
        value = _env_value(env, name, convert)
    return None if value == _UNSET else value


def _env_value(env: Mapping[str, str], name: str, convert):
    raw = env.get(name)
    if raw is None or raw == "":
        return None
    try:
        return convert(raw)
    except argparse.ArgumentTypeError as exc:
        raise UsageError(f"invalid value for {name}: {exc}; unset it or fix the value") from None


def _int_at_least(low: int):
    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{text!r} must be at least {low}")
        return value

    convert.__name__ = "integer"
    return convert


def _leading_int_at_least(low: int):
    """PMC reads -m and -t with sscanf("%d"): the integer at the start of the value counts ("2.5" is 2)."""
    whole = _int_at_least(low)

    def convert(text: str) -> int:
        match = re.match(r"\s*[+-]?\d+", text)
        return whole(match.group(0).strip() if match else text)

    convert.__name__ = "integer"
    return convert


def _host_size(text: str) -> int:
    """--host-cpus/--host-memory as PMC reads them (sscanf "%u"): the integer at the start of the value ("2.5" is
    2, "100MB" is 100); 0 means detect the host's own."""
    match = re.match(r"\s*\+?\d+", text)
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number (0: detect the host's own)")
    value = int(match.group(0))
    return _UNSET if value == 0 else value


_C_DOUBLE = re.compile(r"\s*[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf(?:inity)?|nan)", re.I)


def _wall_minutes(text: str) -> float:
    """--max-wall-time as PMC reads it (sscanf "%lf"): the number at the start; 0, less, or not a finite number
    is no limit (Pegasus writes --max-wall-time 0 for a clustered job of a few seconds)."""
    match = _C_DOUBLE.match(text)
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of minutes (0: no limit)")
    value = float(match.group(0))
    return value if math.isfinite(value) and value > 0 else _UNSET
