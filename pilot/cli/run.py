"""``pilot run`` / ``pilot-mpi-cluster``: PMC's command line, read on every rank; the runtime does the rest.

Every option of the pegasus-mpi-cluster man page is accepted with its
meaning; PMC_HOST_SCRIPT, PMC_HOST_MEMORY, PMC_HOST_CPUS and PMC_MAX_WALL_TIME
supply defaults that the command line overrides, as do PMC_HOST_GPUS and
PMC_MAX_CRASHES for two options of ours (docs/pmc-differences.md lists what
pilot adds). Parsing errors are one line and exit status 2, said by rank 0
only.

Every MPI rank reads its options before MPI_Init, all ranks at once: this
module imports the parser and ``pilot.runtime.launch``, which imports the
rank's side only once the options are read.
"""

from __future__ import annotations

import argparse
import enum
import functools
import math
import os
import resource
import string
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from pilot import __version__
from pilot.errors import UsageError
from pilot.runtime import launch
from pilot.runtime.options import DEFAULT_MAX_CRASHES, RunOptions
from pilot.util.argtypes import leading_count, leading_float, leading_whole_number, whole_number
from pilot.util.cmdline import Parser

T = TypeVar("T")

# PMC reads -m and -t with sscanf("%d"), --host-cpus/--host-memory with "%u", --max-wall-time with "%lf".
_host_size = leading_count(" (0: detect the host's own)")
_wall_minutes = leading_float("a number of minutes (0: no limit)")
_HELP_OR_VERSION = ("-h", "--help", "-V", "--version")


class OptionSide(enum.Enum):
    """Whose an option of a cluster's ``pilot run`` line is where clusters are fed to a pilot job's one long-lived
    run (pilot submit --pilots, pilot.submit.feed): that run starts with its first cluster's worker options, and
    each cluster's request carries the rest. Declared with each option, so a new option cannot be left out."""

    WORKER = "worker"  # the workers act on it: the long-lived run's, from its first cluster's line
    CLUSTER = "cluster"  # the cluster's own run acts on it: it travels in the cluster's request
    RUN = "run"  # the run itself, never on a cluster's line (--inbox, --version)


class OptionSides:
    """What ``build_parser`` declares of each option: its side, whether it takes a value, and the worker option a
    cluster's option implies (--monitord-hack writes per-task stdio, which the workers do). A plain class: every
    rank imports this module before MPI_Init, where dataclasses would cost an import of inspect."""

    def __init__(self) -> None:
        self.side: dict[str, OptionSide] = {}  # option string, or the DAG's name -> its side
        self.takes_value: dict[str, bool] = {}
        self.implies: dict[str, str] = {}


def build_parser(prog: str, sides: OptionSides | None = None) -> argparse.ArgumentParser:
    p = Parser(
        prog=prog,
        description="Run a PMC-format DAG of tasks under MPI: rank 0 is the master, ranks 1..N-1 run tasks. "
        f"Start it as: mpiexec -n N {prog} [options] workflow.dag",
    )
    declared = sides if sides is not None else OptionSides()

    def add(side: OptionSide, *names: str, implies: str | None = None, **kw: Any) -> None:
        action = p.add_argument(*names, **kw)
        for name in action.option_strings or [action.dest]:
            declared.side[name] = side
            declared.takes_value[name] = action.nargs != 0
            if implies is not None:
                declared.implies[name] = implies

    add(OptionSide.CLUSTER, "dag", metavar="workflow.dag", nargs="?", help="the DAG file (PMC format)")
    add(OptionSide.RUN, "-V", "--version", action="version", version=f"%(prog)s {__version__}")
    add(
        OptionSide.CLUSTER,
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="more logging (repeatable); also shows tracebacks",
    )
    add(OptionSide.CLUSTER, "-q", "--quiet", action="count", default=0, help="less logging (repeatable)")
    add(
        OptionSide.CLUSTER,
        "-s",
        "--skip-rescue",
        action="store_true",
        help="ignore the rescue log (a new one is still written)",
    )
    add(
        OptionSide.CLUSTER, "-o", "--stdout", metavar="path", help="file for task stdout (default: the master's stdout)"
    )
    add(
        OptionSide.CLUSTER, "-e", "--stderr", metavar="path", help="file for task stderr (default: the master's stderr)"
    )
    add(
        OptionSide.CLUSTER,
        "-m",
        "--max-failures",
        metavar="M",
        type=leading_whole_number(0),
        default=0,
        help="stop starting tasks after M tasks failed permanently (0: no limit)",
    )
    add(
        OptionSide.WORKER,
        "--max-crashes",
        metavar="N",
        type=whole_number(1),
        help="fail a task that was running alone when its worker died N times, instead of starting it "
        f"again (PMC_MAX_CRASHES; default {DEFAULT_MAX_CRASHES})",
    )
    add(
        OptionSide.CLUSTER,
        "-t",
        "--tries",
        metavar="T",
        type=leading_whole_number(1),
        default=1,
        help="tries per task (default 1)",
    )
    add(OptionSide.CLUSTER, "-n", "--nolock", action="store_true", help="do not lock the DAG file")
    add(OptionSide.CLUSTER, "-r", "--rescue", metavar="path", help="rescue log path (default: DAG.rescue)")
    add(
        OptionSide.WORKER,
        "--host-script",
        metavar="path",
        help="script run once per host before any task (PMC_HOST_SCRIPT)",
    )
    add(
        OptionSide.WORKER,
        "--host-memory",
        metavar="MB",
        type=_host_size,
        help="memory per host in MB (PMC_HOST_MEMORY; " "0: detect, the default)",
    )
    add(
        OptionSide.WORKER,
        "--host-cpus",
        metavar="N",
        type=_host_size,
        help="CPUs per host (PMC_HOST_CPUS; 0: detect, the default)",
    )
    add(OptionSide.WORKER, "--host-gpus", metavar="N", type=whole_number(0), help="GPUs per host (PMC_HOST_GPUS)")
    add(OptionSide.WORKER, "--strict-limits", action="store_true", help="enforce each task's memory request")
    add(
        OptionSide.CLUSTER,
        "--max-wall-time",
        metavar="minutes",
        type=_wall_minutes,
        help="abort the run after this many minutes (PMC_MAX_WALL_TIME; fractions allowed; 0 or less: no "
        "limit, as Pegasus writes for short clustered jobs)",
    )
    add(OptionSide.WORKER, "--per-task-stdio", action="store_true", help="write TASK.out.NNN/TASK.err.NNN per attempt")
    add(OptionSide.CLUSTER, "--jobstate-log", action="store_true", help="append to jobstate.log next to the DAG")
    add(
        OptionSide.CLUSTER,
        "--monitord-hack",
        action="store_true",
        implies="--per-task-stdio",
        help="write DAG.dagman.out for pegasus-monitord (implies --per-task-stdio)",
    )
    add(
        OptionSide.WORKER,
        "--invocation-records",
        action="store_true",
        help="after each task's [cluster-task] record, an invocation record (arguments, exit, stderr) "
        "for pegasus-monitord, in the task's stdout stream: no file per task",
    )
    add(OptionSide.CLUSTER, "--no-resource-log", action="store_true", help="do not write DAG.resource")
    add(
        OptionSide.WORKER,
        "--no-sleep-on-recv",
        action="store_true",
        help="poll for messages without sleeping (for MPIs that block cheaply)",
    )
    add(
        OptionSide.CLUSTER,
        "--maxfds",
        metavar="N",
        type=whole_number(1),
        help="open files kept by the master for I/O forwarding",
    )
    add(
        OptionSide.WORKER,
        "--keep-affinity",
        action="store_true",
        help="keep the inherited CPU affinity instead of resetting it",
    )
    add(
        OptionSide.WORKER,
        "--set-affinity",
        action="store_true",
        help="bind each multi-CPU task to the CPUs it was given (PMC_AFFINITY lists them either way)",
    )
    add(
        OptionSide.WORKER,
        "--keep-task-processes",
        action="store_true",
        help="leave processes that tasks started in the background running when the run ends",
    )
    add(
        OptionSide.CLUSTER,
        "--ignore-runtimes",
        action="store_true",
        help="schedule as if no task had a '#pilot runtime=' line: equal priorities in DAG order, and "
        "under --max-wall-time tasks start even when their runtime exceeds the time left",
    )
    add(
        OptionSide.WORKER,
        "--containers",
        choices=("per-task", "once", "once-exec"),
        default="per-task",
        help="once: run the tasks whose command is a container runtime's (apptainer/singularity exec, "
        "docker/podman run) in one container per worker and image, started when its first task "
        "arrives and ended with the run, each docker/podman task entering it with nsenter; "
        "once-exec: the same, each task through the runtime's own exec; per-task (default): each "
        "command as written",
    )
    add(
        OptionSide.RUN,
        "--inbox",
        metavar="DIR",
        help="run the DAGs fed to this directory as they come, each with its own record, until told to stop "
        "(pilot submit --pilots runs one such run per pilot job)",
    )
    add(
        OptionSide.CLUSTER,
        "--task-files",
        metavar="path",
        help="run each task this file lists (pilot plan writes it for the nonsharedfs and condorio data "
        "configurations) in a directory of its own on node-local storage: its declared inputs "
        "linked in, its declared outputs moved to its working directory when it exits 0",
    )
    add(
        OptionSide.WORKER,
        "--local-scratch",
        metavar="dir",
        help="node-local directory for those task directories; $VARS are read from the job's "
        "environment on each node (default: $TMPDIR, else /tmp)",
    )
    add(
        OptionSide.WORKER,
        "--keep-task-dirs",
        action="store_true",
        help="leave each task's directory behind instead of removing it (to look at what a task left)",
    )
    return p


@functools.cache
def option_sides() -> OptionSides:
    """Each option's side, as ``build_parser`` declares it."""
    sides = OptionSides()
    build_parser("pilot run", sides)
    return sides


@functools.cache
def _parser(prog: str) -> argparse.ArgumentParser:
    """The parser of ``prog``, built once: a long-lived run reads each fed DAG's options with it, and building it
    (some 70 options) costs about a millisecond, which every cluster fed at once would wait in turn. Parsing
    changes nothing in it."""
    return build_parser(prog)


def parse_run_args(argv: Sequence[str], env: Mapping[str, str] | None = None, prog: str = "pilot run") -> RunOptions:
    """The options of the command line, with PMC's environment variables for those it leaves out."""
    env = os.environ if env is None else env
    parser = _parser(prog)
    ns = parser.parse_args(list(argv))
    if ns.dag is None:
        if ns.inbox is None:
            parser.error("the following arguments are required: workflow.dag")
        ns.dag = os.path.join(ns.inbox, "pilot")  # the base name of the run's own files (worker watchdogs)
    host_cpus = _detect_if_zero(_given(ns.host_cpus, env, "PMC_HOST_CPUS", _host_size))
    if ns.set_affinity and host_cpus is not None:
        # CPU numbers handed to tasks must be real CPUs of the host, as in PMC.
        raise UsageError(f"{prog}: --host-cpus is not compatible with --set-affinity; drop one of them")
    if ns.maxfds is not None:
        limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        if limit != resource.RLIM_INFINITY and ns.maxfds > limit:
            raise UsageError(f"{prog}: --maxfds {ns.maxfds} is more than RLIMIT_NOFILE ({limit}); use at most {limit}")
    wall = _given(ns.max_wall_time, env, "PMC_MAX_WALL_TIME", _wall_minutes)
    max_crashes = _given(ns.max_crashes, env, "PMC_MAX_CRASHES", whole_number(1))
    scratch = _local_scratch(ns.local_scratch, env, prog)
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
        host_memory=_detect_if_zero(_given(ns.host_memory, env, "PMC_HOST_MEMORY", _host_size)),
        host_cpus=host_cpus,
        host_gpus=_given(ns.host_gpus, env, "PMC_HOST_GPUS", whole_number(0)),
        strict_limits=ns.strict_limits,
        # 0, less, or not a finite number: no limit (Pegasus writes --max-wall-time 0 for a clustered job of a few seconds)
        max_wall_time=wall if wall is not None and math.isfinite(wall) and wall > 0 else None,
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
        max_crashes=DEFAULT_MAX_CRASHES if max_crashes is None else max_crashes,
        containers_once=ns.containers in ("once", "once-exec"),
        containers_exec=ns.containers == "once-exec",
        inbox=ns.inbox,
        task_files=ns.task_files,
        local_scratch=scratch,
        keep_task_dirs=ns.keep_task_dirs,
    )


def _local_scratch(value: str | None, env: Mapping[str, str], prog: str) -> str | None:
    """--local-scratch with its $VARS replaced from this node's environment (a job's node-local directory is
    often named by a variable the batch system sets on the node, e.g. $TMPDIR or /local/$SLURM_JOB_ID)."""
    if value is None:
        return None
    try:
        path = string.Template(value).substitute(env)
    except KeyError as exc:
        raise UsageError(
            f"{prog}: --local-scratch {value!r}: ${exc.args[0]} is not set in this job's environment on "
            "this node; set it, or give the directory itself"
        ) from None
    except ValueError:
        raise UsageError(
            f"{prog}: --local-scratch {value!r}: a '$' that starts no variable name; write $$ for a " "'$' itself"
        ) from None
    if not os.path.isabs(path):
        raise UsageError(
            f"{prog}: --local-scratch {value!r} is not an absolute path: give a node-local directory, " "e.g. /tmp"
        )
    return path


def _given(value: T | None, env: Mapping[str, str], name: str, convert: Callable[[str], T]) -> T | None:
    """The command line's value, else the environment's (an empty variable is not set), else None."""
    if value is not None:
        return value
    raw = env.get(name)
    if raw is None or raw == "":
        return None
    try:
        return convert(raw)
    except argparse.ArgumentTypeError as exc:
        raise UsageError(f"invalid value for {name}: {exc}; unset it or fix the value") from None


def _detect_if_zero(value: int | None) -> int | None:
    """PMC's 0 CPUs or MB of a host, given or not: detect the host's own (None)."""
    return value or None


def main(argv: Sequence[str], prog: str = "pilot run") -> int:
    """Read the options on every rank, then run this rank's side; its exit code."""
    rank = launch.env_rank()
    if rank > 0 and any(a in _HELP_OR_VERSION for a in argv):
        return 0  # only rank 0 prints help and version
    try:
        opts = parse_run_args(argv, prog=prog)
    except UsageError:
        if rank > 0:
            return 2  # rank 0 says it once
        raise
    return launch.run(opts, prog, parse=lambda args: parse_run_args(args, prog=prog))
