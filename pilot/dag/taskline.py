"""A TASK line of a PMC .dag file: its id, options and command, into a Task.

``TASK <id> [options] <exe> [args]``: the options are pegasus-mpi-cluster's (``-m``, ``-c``, ``-g``, ``-t``,
``-p``, ``-f``, ``-F`` and their long names). Numbers in them are read the way pegasus-mpi-cluster reads them
(``sscanf``): ``-m`` and ``-c`` as decimals rounded up, ``-t`` and ``-p`` as the integer at the start of the
value (``-p 1.5`` is priority 1), ``-t 0`` and ``-c 0`` allowed; a value with no number at its start, or one
past the 32 bits PMC reads it into (``-c 1e300``), is an error. The command stays raw text until used (see
Task).

The parser (pilot.dag.parser) reads the file and its other records, and keeps what the TASKs before this one
set (the ``#pilot`` notes' working directory and environment, as the Spec of a task with no options): this
module reads the one line, and needs no more of the file than that Spec and the table of Specs its tasks share.
A million-task DAG is a million calls here, so the usual line, with no quotes or escapes, takes ``str.split``
and the general path (``split_args``) only the lines that need it.
"""

from __future__ import annotations

import math
import re
from typing import Any

from pilot.dag.lexer import SPECIAL, split_args
from pilot.dag.model import DEFAULT_SPEC, Spec, Task
from pilot.errors import DagError

# An environment variable's name, in ``-f VAR=FILE`` and in ``#pilot env NAME=VALUE``.
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# What sscanf's %d and %f take from the start of a value.
_C_INT = re.compile(r"\s*([+-]?\d+)")
_C_FLOAT = re.compile(r"\s*([+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf(?:inity)?|nan))", re.I)

# PMC reads -m, -c (unsigned) and -t, -p (int) into 32 bits; a larger value is a typo, not a request.
_MAX_REQUEST = 2**32 - 1
_MAX_INT = 2**31 - 1

# option -> (the Spec field it sets, its kind); _apply_option reads each kind.
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


def parse_task(
    line: str, path: str, lineno: int, base: Spec = DEFAULT_SPEC, specs: dict[tuple, Spec] | None = None
) -> Task:
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


def _parse_task_tokens(
    args: list[str], path: str, lineno: int, base: Spec = DEFAULT_SPEC, specs: dict[tuple, Spec] | None = None
) -> Task:
    """The general path, for ids and options that are quoted or escaped."""
    if len(args) < 2:
        raise DagError(path, lineno, "invalid TASK record: expected 'TASK <id> [options] <executable> [arguments]'")
    name = args[1]
    if not name or name != name.strip():  # the rescue log's "DONE <task>" line could not give it back
        raise DagError(
            path,
            lineno,
            f"task id {name!r} is empty or starts or ends with a blank: give the task "
            "an id without blanks at its ends",
        )
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


def _apply_option(
    fields: dict[str, Any], name: str, spec: tuple[str, str], opt: str, value: str, path: str, lineno: int
) -> None:
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
