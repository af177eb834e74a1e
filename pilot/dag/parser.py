"""Read PMC .dag files into a Dag, with ``file:line`` errors.

Grammar: lines are trimmed and blank lines skipped; ``#``
starts a comment only as the first non-blank character, except ``#@ <n> <tx>
<daxid>`` which annotates the next TASK, ``#pilot runtime=<seconds>``
which gives the next TASK its expected run time, and ``#pilot cwd=<dir>``
which sets the working directory of every TASK after it, up to the next
``#pilot cwd=`` (an empty value: the pilot's own directory again), and
``#pilot env NAME=VALUE ...`` (words quoted as task arguments) which sets
variables in the environment of every TASK after it, up to the next ``#pilot
env`` (none: no variables again), as Pegasus' env profiles do. PMC reads
every ``#`` line but ``#@`` as a comment, so a DAG with them still runs under
PMC, its tasks in PMC's directory. A planned workflow runs its jobs in the
workflow's directory on the site's shared scratch, as Pegasus' kickstart
``-w`` makes them; one line per change keeps a million-task DAG small. ``TASK <id>
[options] <exe> [args]`` and ``EDGE <parent> <child>``. EDGE lines may come
before the TASK lines they name (PMC requires them after). A duplicated EDGE
is ignored and a cycle is an error naming the tasks on it.

A TASK line's id, options and numbers are read by pilot.dag.taskline, as
pegasus-mpi-cluster reads them. Unlike PMC, a NUL byte or an unterminated
quote is an error: PMC would pass a truncated argument to the task, or
silently run the rest of the line as one. Only a regular file is read, a
bounded line at a time (``read_dag``).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import TextIO

from pilot.dag.cycles import find_cycle
from pilot.dag.lexer import SPECIAL, split_args, unterminated_quote
from pilot.dag.model import DEFAULT_SPEC, Dag, Spec
from pilot.dag.taskline import ENV_NAME, parse_task
from pilot.errors import DagError
from pilot.util.gcpause import gc_paused
from pilot.util.safeopen import open_regular_fd

MAX_RUNTIME = 1e9  # seconds (31 years): a longer expected runtime is a typo, and would swamp every estimate


def read_dag(path: str) -> Dag:
    """Parse the DAG file at ``path``.

    Only a regular file is read (opened without blocking: a FIFO would wait for
    a writer forever, ``/dev/zero`` fill memory), a line at a time of at most
    ``MAX_LINE`` characters. Bytes that are not UTF-8 pass through to the
    tasks, as PMC passes them (surrogate escapes; written back as the same bytes).

    The cyclic garbage collector is paused meanwhile: a DAG is millions of
    live objects that the collector would scan again and again for nothing
    (a third of the parse time at 10^6 tasks).
    """
    try:
        fd = open_regular_fd(path)
    except OSError as exc:
        raise DagError(path, None, f"cannot read DAG: {exc.strerror}") from None
    try:
        with gc_paused(), open(fd, encoding="utf-8", errors="surrogateescape") as fh:
            return parse_dag(_bounded_lines(fh, path), path)
    except OSError as exc:
        raise DagError(path, None, f"cannot read DAG: {exc.strerror}") from None


MAX_LINE = 4 << 20  # characters: a task's command line is at most ARG_MAX (2 MiB on Linux) anyway


def _bounded_lines(fh: TextIO, path: str) -> Iterator[str]:
    """The lines of ``fh``, each at most MAX_LINE long: a file with no line ends is refused, not read whole."""
    readline = fh.readline
    lineno = 0
    while True:
        line = readline(MAX_LINE + 1)
        if not line:
            return
        lineno += 1
        if len(line) > MAX_LINE and line[-1] != "\n":
            raise DagError(path, lineno, f"line longer than {MAX_LINE:,} characters: is this a DAG file?")
        yield line


def parse_dag(lines, path: str = "<dag>") -> Dag:
    """Parse an iterable of lines (a file object or a list of strings)."""
    dag = Dag(path)
    tasks = dag.tasks
    waiting: list[tuple[str, str, int]] = []  # EDGE records added at the end (see _edge)
    note: tuple[str, str, str] | None = None
    runtime: float | None = None
    cwd: str | None = None
    stdio: tuple[str, str, str] | None = None
    env: tuple[tuple[str, str], ...] | None = None
    # One Spec for every task that asks for the same (see pilot.dag.model.Spec); ``base``: that of
    # a task with no options under the current cwd and env notes.
    specs: dict[tuple, Spec] = {}
    base = DEFAULT_SPEC.shared(specs)
    last_cmd = None  # the previous task's command: a task repeating it shares its string
    # Annotation values that repeat from task to task: the first of each, which later tasks share (see _first).
    transformations: dict[str, str] = {}
    runtimes: dict[float, float] = {}
    special = SPECIAL.search
    for lineno, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line:
            continue
        first = line[0]
        if "\0" in line:
            raise DagError(path, lineno, "NUL byte in the line; a DAG is text: remove it")
        if first == "#":
            if line.startswith("#@"):
                parts = line[2:].split()
                if len(parts) != 3:
                    raise DagError(path, lineno, "invalid '#@' annotation: expected '#@ <id> <transformation> <daxid>'")
                note = (parts[0], parts[1], parts[2])
            elif line.startswith(PILOT_NOTE) and (len(line) == len(PILOT_NOTE) or line[len(PILOT_NOTE)].isspace()):
                body = line[len(PILOT_NOTE) :].lstrip()
                if body.startswith(CWD_NOTE):
                    cwd = _cwd_note(body, path, lineno)
                    base = DEFAULT_SPEC.but(cwd=cwd, env=env).shared(specs)
                elif body == ENV_NOTE or body.startswith(ENV_NOTE) and body[len(ENV_NOTE)].isspace():
                    env = _env_note(line, path, lineno)
                    base = DEFAULT_SPEC.but(cwd=cwd, env=env).shared(specs)
                elif body.lstrip("'\"\\").startswith(STDIO_NOTES):
                    stdio = _stdio_note(line, path, lineno)
                else:
                    runtime = _pilot_note(line, path, lineno)
            continue
        if first == "E" and special(line) is None:
            args = line.split()
            if args[0] == "EDGE":
                if len(args) != 3:
                    raise DagError(path, lineno, "invalid EDGE record: expected 'EDGE <parent> <child>'")
                parent, child = args[1], args[2]
                if (
                    not waiting and parent != child and parent in tasks and child in tasks
                ):  # _edge, inlined: the usual EDGE
                    dag.add_edge(parent, child)
                else:
                    waiting.append((parent, child, lineno))
                continue
        else:
            args = line.split(None, 1)
        kind = args[0]
        if special(line) is not None and unterminated_quote(line):
            raise DagError(path, lineno, "unterminated quote; close it with a matching ' or \" (or escape it with \\)")
        if kind == "TASK":
            task = parse_task(line, path, lineno, base, specs)
            cmd = task.raw_args
            if cmd is not None:
                if cmd == last_cmd:
                    task.raw_args = last_cmd
                else:
                    last_cmd = cmd
            if note is not None:
                task.pegasus_id, transformation, dax_id = note
                task.transformation = transformations.get(transformation) or _first(transformations, transformation)
                # pilot plan names the task of an auxiliary job after its DAX id: one string for both.
                task.dax_id = task.name if dax_id == task.name else dax_id
                note = None
            if runtime is not None:
                # Zero is not shared (nor found, being false): -0.0 equals 0.0 but is written back as "-0".
                task.runtime = (runtimes.get(runtime) or _first(runtimes, runtime)) if runtime else runtime
                runtime = None
            if stdio is not None:
                task.stdio = stdio
                stdio = None
            if task.name in tasks:
                first_line = tasks[task.name].line
                raise DagError(
                    path,
                    lineno,
                    f"duplicate task {task.name!r} (first defined on line {first_line}); task ids must be unique",
                )
            dag.add(task)
        elif kind == "EDGE":
            args = split_args(line)
            if len(args) != 3:
                raise DagError(path, lineno, "invalid EDGE record: expected 'EDGE <parent> <child>'")
            _edge(dag, waiting, args[1], args[2], lineno)
        else:
            raise DagError(
                path,
                lineno,
                f"invalid record {split_args(line)[0]!r}: expected TASK or EDGE (comments must start the line with '#')",
            )
    for parent, child, lineno in waiting:
        for name in (parent, child):
            if name not in tasks:
                raise DagError(path, lineno, f"EDGE names unknown task {name!r}; define it with a TASK record")
        if parent == child:
            raise DagError(path, lineno, f"cycle: {parent} -> {child}; a task cannot depend on itself")
        dag.add_edge(parent, child)
    cycle = find_cycle(dag)
    if cycle:
        first_line = dag.tasks[cycle[0]].line
        raise DagError(
            path, first_line, "cycle: " + " -> ".join(cycle + [cycle[0]]) + "; remove one of these EDGE records"
        )
    return dag


def _edge(dag: Dag, waiting: list[tuple[str, str, int]], parent: str, child: str, lineno: int) -> None:
    """An EDGE record: added now where both tasks are known (in the usual DAG every EDGE follows the TASKs),
    else put in ``waiting``, which the end of the file adds or reports on. Once one edge waits, those after
    it wait too: every task's parents and children stay in the order of the EDGE records. An edge added
    at once leaves nothing behind; one that waits holds a tuple, two names and a line number until the
    last line, about a third of the master's peak while it reads a DAG with as many edges as tasks."""
    tasks = dag.tasks
    if not waiting and parent != child and parent in tasks and child in tasks:
        dag.add_edge(parent, child)
    else:
        waiting.append((parent, child, lineno))


# The most distinct values _first keeps per kind and DAG.
SHARED_MAX = 1024


def _first(kept: dict, value):  # a str or a float, returned as given
    """``value``, not in ``kept`` yet, put there for the tasks that repeat it to share (``kept.get(value)``).

    The master keeps every task of a run: a transformation's name or an expected runtime, repeated by
    thousands of tasks, is then one object rather than one a task. At most SHARED_MAX values are kept, so a
    DAG whose values never repeat pays a small table rather than an entry a task.
    """
    if len(kept) < SHARED_MAX:
        kept[value] = value
    return value


PILOT_NOTE = "#pilot"
CWD_NOTE = "cwd="


STDIO_NOTES = ("stdin=", "stdout=", "stderr=")
ENV_NOTE = "env"


def _env_note(line: str, path: str, lineno: int) -> tuple[tuple[str, str], ...] | None:
    """``#pilot env NAME=VALUE ...``: the variables of the TASKs after it (none: None)."""
    out: dict[str, str] = {}
    for word in split_args(line)[2:]:
        name, sep, value = word.partition("=")
        if not sep or not ENV_NAME.match(name):
            raise DagError(
                path,
                lineno,
                f"invalid '#pilot env' word {word!r}: expected NAME=VALUE, NAME made of "
                "letters, digits and '_', not starting with a digit",
            )
        out[name] = value
    return tuple(out.items()) or None


def _stdio_note(line: str, path: str, lineno: int) -> tuple[str, str, str]:
    """``#pilot stdin=F stdout=F stderr=F`` (any of them, quoted as task arguments): the next TASK's stdio
    files, relative to its working directory, as a Pegasus job's stdin/stdout/stderr ("" = none)."""
    files = {"stdin": "", "stdout": "", "stderr": ""}
    for word in split_args(line)[1:]:
        key, sep, value = word.partition("=")
        if not sep or key not in files or not value:
            raise DagError(
                path,
                lineno,
                f"invalid '#pilot' stdio annotation {word!r}: expected stdin=FILE, stdout=FILE " "or stderr=FILE",
            )
        files[key] = value
    return files["stdin"], files["stdout"], files["stderr"]


def _cwd_note(body: str, path: str, lineno: int) -> str | None:
    """``#pilot cwd=<dir>`` (``body``: what follows ``#pilot``): the rest of the line, an absolute directory
    (spaces allowed), or empty."""
    value = body[len(CWD_NOTE) :].strip()
    if not value:
        return None
    if not value.startswith("/"):
        raise DagError(path, lineno, f"'#pilot cwd={value}': the directory must be an absolute path")
    return value


def _pilot_note(line: str, path: str, lineno: int) -> float:
    """``#pilot runtime=<seconds>``: the next TASK's expected run time (finite, not negative)."""
    fields = line.split()[1:]
    usage = (
        "expected '#pilot runtime=<seconds>', '#pilot cwd=<dir>', '#pilot env NAME=VALUE ...' or '#pilot stdout=FILE' "
        "(other comments must not begin with the word '#pilot')"
    )
    if len(fields) != 1 or not fields[0].startswith("runtime="):
        raise DagError(path, lineno, f"invalid '#pilot' annotation: {usage}")
    raw = fields[0][len("runtime=") :]
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise DagError(path, lineno, f"runtime {raw!r} is not a non-negative number of seconds: {usage}")
    if value > MAX_RUNTIME:
        raise DagError(path, lineno, f"runtime {raw!r} is more than {MAX_RUNTIME:.0e} seconds (31 years): a typo?")
    return value
