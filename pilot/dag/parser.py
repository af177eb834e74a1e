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

Numbers in task options are read the way pegasus-mpi-cluster reads them
(``sscanf``): ``-m`` and ``-c`` as decimals rounded up, ``-t`` and ``-p`` as
the integer at the start of the value (``-p 1.5`` is priority 1), ``-t 0`` and
``-c 0`` allowed; a value with no number at its start, or one past the 32
bits PMC reads it into (``-c 1e300``), is an error. Unlike
PMC, a NUL byte or an unterminated quote is an error too: PMC would pass a
truncated argument to the task, or silently run the rest of the line as one.
Only a regular file is read, a bounded line at a time (``read_dag``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from typing import Any, TextIO

from pilot.dag.cycles import find_cycle
from pilot.dag.lexer import SPECIAL, split_args, unterminated_quote
from pilot.dag.model import DEFAULT_SPEC, Dag, Spec, Task
from pilot.errors import DagError
from pilot.util.gcpause import gc_paused
from pilot.util.safeopen import open_regular_fd

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# What sscanf's %d and %f take from the start of a value.
_C_INT = re.compile(r"\s*([+-]?\d+)")
_C_FLOAT = re.compile(r"\s*([+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf(?:inity)?|nan))", re.I)

# PMC reads -m, -c (unsigned) and -t, -p (int) into 32 bits; a larger value is a typo, not a request.
_MAX_REQUEST = 2**32 - 1
_MAX_INT = 2**31 - 1
MAX_RUNTIME = 1e9  # seconds (31 years): a longer expected runtime is a typo, and would swamp every estimate

# option -> (attribute, kind); kinds are parsed by _option_value.
_TASK_OPTIONS: dict[str, tuple[str, str]] = {
    "-m": ("memory", "memory"),
    "--request-memory": ("memory", "memory"),
    "-c": ("cpus", "count"),
    "--request-cpus": ("cpus", "count"),
    "-g": ("gpus", "count0"),
    "--request-gpus": ("gpus", "count0"),
    "-t": ("tries", "tries"),
    "--tries": ("tries", "tries"),
    "-p": ("priority", "int"),
    "--priority": ("priority", "int"),
    "-f": ("pipe_forwards", "pipe"),
    "--pipe-forward": ("pipe_forwards", "pipe"),
    "-F": ("file_forwards", "file"),
    "--file-forward": ("file_forwards", "file"),
}


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
                body = line[len(PILOT_NOTE):].lstrip()
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
                if not waiting and parent != child and parent in tasks and child in tasks:  # _edge, inlined: the usual EDGE
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
            task = _parse_task(line, path, lineno, base, specs)
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
                raise DagError(path, lineno, f"duplicate task {task.name!r} (first defined on line {first_line}); task ids must be unique")
            dag.add(task)
        elif kind == "EDGE":
            args = split_args(line)
            if len(args) != 3:
                raise DagError(path, lineno, "invalid EDGE record: expected 'EDGE <parent> <child>'")
            _edge(dag, waiting, args[1], args[2], lineno)
        else:
            raise DagError(path, lineno, f"invalid record {split_args(line)[0]!r}: expected TASK or EDGE (comments must start the line with '#')")
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
        raise DagError(path, first_line, "cycle: " + " -> ".join(cycle + [cycle[0]]) + "; remove one of these EDGE records")
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
            raise DagError(path, lineno, f"invalid '#pilot env' word {word!r}: expected NAME=VALUE, NAME made of "
                           "letters, digits and '_', not starting with a digit")
        out[name] = value
    return tuple(out.items()) or None


def _stdio_note(line: str, path: str, lineno: int) -> tuple[str, str, str]:
    """``#pilot stdin=F stdout=F stderr=F`` (any of them, quoted as task arguments): the next TASK's stdio
    files, relative to its working directory, as a Pegasus job's stdin/stdout/stderr ("" = none)."""
    files = {"stdin": "", "stdout": "", "stderr": ""}
    for word in split_args(line)[1:]:
        key, sep, value = word.partition("=")
        if not sep or key not in files or not value:
            raise DagError(path, lineno, f"invalid '#pilot' stdio annotation {word!r}: expected stdin=FILE, stdout=FILE "
                           "or stderr=FILE")
        files[key] = value
    return files["stdin"], files["stdout"], files["stderr"]


def _cwd_note(body: str, path: str, lineno: int) -> str | None:
    """``#pilot cwd=<dir>`` (``body``: what follows ``#pilot``): the rest of the line, an absolute directory
    (spaces allowed), or empty."""
    value = body[len(CWD_NOTE):].strip()
    if not value:
        return None
    if not value.startswith("/"):
        raise DagError(path, lineno, f"'#pilot cwd={value}': the directory must be an absolute path")
    return value


def _pilot_note(line: str, path: str, lineno: int) -> float:
    """``#pilot runtime=<seconds>``: the next TASK's expected run time (finite, not negative)."""
    fields = line.split()[1:]
    usage = ("expected '#pilot runtime=<seconds>', '#pilot cwd=<dir>', '#pilot env NAME=VALUE ...' or '#pilot stdout=FILE' "
             "(other comments must not begin with the word '#pilot')")
    if len(fields) != 1 or not fields[0].startswith("runtime="):
        raise DagError(path, lineno, f"invalid '#pilot' annotation: {usage}")
    raw = fields[0][len("runtime="):]
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise DagError(path, lineno, f"runtime {raw!r} is not a non-negative number of seconds: {usage}")
    if value > MAX_RUNTIME:
        raise DagError(path, lineno, f"runtime {raw!r} is more than {MAX_RUNTIME:.0e} seconds (31 years): a typo?")
    return value


def _parse_task(line: str, path: str, lineno: int, base: Spec = DEFAULT_SPEC, specs: dict[tuple, Spec] | None = None) -> Task:
    """TASK id and options now; the command stays raw until used (see Task). ``base``: the Spec of a task without
    options here; one with options gets the equal Spec in ``specs``, or a new one put there."""
    rest = line[4:]
    if not rest:
        raise DagError(path, lineno, "invalid TASK record: expected 'TASK <id> [options] <executable> [arguments]'")
    if not rest[0].isspace():
        raise DagError(path, lineno, f"invalid record {split_args(line)[0]!r}: expected TASK or EDGE")
    head = rest.split(None, 1)
    if not head or SPECIAL.search(head[0]):
        return _parse_task_tokens(split_args(line), path, lineno, base, specs)
    name = head[0]
    fields: dict[str, Any] = {}
    rest = head[1] if len(head) > 1 else ""
    while rest[:1] == "-":
        parts = rest.split(None, 2)
        opt = parts[0]
        if len(opt) == 1:
            break  # a lone "-" is an executable name, not an option
        if SPECIAL.search(opt) or (len(parts) > 1 and SPECIAL.search(parts[1])):
            return _parse_task_tokens(split_args(line), path, lineno, base, specs)
        value: str | None = None
        if opt.startswith("--") and "=" in opt:
            opt, value = opt.split("=", 1)
            rest = rest.split(None, 1)[1] if len(parts) > 1 else ""
        spec = _TASK_OPTIONS.get(opt)
        if spec is None:
            raise DagError(path, lineno, f"task {name!r}: unknown task option {opt!r} (valid: -m -c -g -t -p -f -F)")
        if value is None:
            if len(parts) < 2:
                raise DagError(path, lineno, f"task {name!r}: option {opt} needs a value")
            value = parts[1]
            rest = parts[2] if len(parts) > 2 else ""
        _apply_option(fields, name, spec, opt, value, path, lineno)
    if not rest or (rest[0] in "'\"" and split_args(rest)[:1] == [""]):  # an empty quoted executable: none
        raise DagError(path, lineno, f"task {name!r} has no executable; put the program after the task options")
    return Task(name, raw_args=rest, line=lineno, spec=_spec(fields, base, specs))


def _spec(fields: dict[str, Any], base: Spec, specs: dict[tuple, Spec] | None) -> Spec:
    """``base`` with the options a TASK record gave (``fields``), shared through ``specs``."""
    if not fields:
        return base
    for attr in ("pipe_forwards", "file_forwards"):
        if attr in fields:
            fields[attr] = tuple(fields[attr])
    if specs is None:
        return base.but(**fields)
    # Tasks that repeat the same options find their Spec by them, without making one first; such a key
    # starts with a Spec, a Spec's own key (its values) with a number: the two never meet in ``specs``.
    given = (base, *fields.items())
    spec = specs.get(given)
    if spec is None:
        spec = specs[given] = base.but(**fields).shared(specs)
    return spec


def _parse_task_tokens(args: list[str], path: str, lineno: int, base: Spec = DEFAULT_SPEC,
                       specs: dict[tuple, Spec] | None = None) -> Task:
    """The general path, for ids and options that are quoted or escaped."""
    if len(args) < 2:
        raise DagError(path, lineno, "invalid TASK record: expected 'TASK <id> [options] <executable> [arguments]'")
    name = args[1]
    if not name or name != name.strip():  # the rescue log's "DONE <task>" line could not give it back
        raise DagError(path, lineno, f"task id {name!r} is empty or starts or ends with a blank: give the task "
                       "an id without blanks at its ends")
    fields: dict[str, Any] = {}
    i = 2
    n = len(args)
    while i < n and args[i].startswith("-") and len(args[i]) > 1:
        opt = args[i]
        value: str | None = None
        if opt.startswith("--") and "=" in opt:
            opt, value = opt.split("=", 1)
        spec = _TASK_OPTIONS.get(opt)
        if spec is None:
            raise DagError(path, lineno, f"task {name!r}: unknown task option {opt!r} (valid: -m -c -g -t -p -f -F)")
        if value is None:
            i += 1
            if i >= n:
                raise DagError(path, lineno, f"task {name!r}: option {opt} needs a value")
            value = args[i]
        _apply_option(fields, name, spec, opt, value, path, lineno)
        i += 1
    if i >= n or not args[i]:
        raise DagError(path, lineno, f"task {name!r} has no executable; put the program after the task options")
    return Task(name, args[i:], line=lineno, spec=_spec(fields, base, specs))


def _apply_option(fields: dict[str, Any], name: str, spec: tuple[str, str], opt: str, value: str, path: str,
                  lineno: int) -> None:
    """Check one option of task ``name`` and put its value in ``fields`` (a Spec's field -> value)."""
    attr, kind = spec

    def bad(why: str) -> DagError:
        shown = repr(value) if len(value) <= 40 else repr(value[:37]) + "..."
        return DagError(path, lineno, f"task {name!r}: {opt} {shown}: {why}")

    if kind in ("memory", "count", "count0"):
        match = _C_FLOAT.match(value)
        if match is None:
            raise bad("not a number")
        number = float(match.group(1))
        if not math.isfinite(number):
            raise bad("not a finite number")
        if number < 0:
            raise bad("must not be negative")
        if number > _MAX_REQUEST:
            raise bad(f"more than {_MAX_REQUEST} (PMC reads it as a 32-bit number; no host has that many)")
        fields[attr] = math.ceil(number)
    elif kind in ("tries", "int"):
        match = _C_INT.match(value)
        if match is None:
            raise bad("not an integer")
        digits = match.group(1)
        number = int(digits) if len(digits) <= 12 else _MAX_INT + 1  # int() reads at most 4,300 digits
        if not -_MAX_INT - 1 <= number <= _MAX_INT:
            raise bad(f"out of range (PMC reads it as a 32-bit number: at most {_MAX_INT})")
        if kind == "int":
            fields["priority"] = number
        elif number < 0:
            raise bad("must not be negative")
        else:
            fields["tries"] = number  # 0 tries, as in PMC, still runs the task once
    else:
        left, sep, right = value.partition("=")
        if not sep or not left or not right:
            raise bad("expected VAR=FILE" if kind == "pipe" else "expected SRC=DEST")
        if kind == "pipe":
            if not ENV_NAME.match(left):
                raise bad(f"{left!r} is not a valid environment variable name")
        fields.setdefault(attr, []).append((left, right))
