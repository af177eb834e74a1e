"""``<dag>.taskfiles``: the files each task of a cluster declares, which ``pilot plan`` writes for the
nonsharedfs and condorio data configurations and ``pilot run --task-files`` reads.

A task named here runs in a directory of its own on node-local storage: its inputs are linked in from
the workflow's directory on the shared scratch (its working directory, ``#pilot cwd=``), and its outputs
moved back there when it succeeds (pilot.runtime.taskdir). The lists live beside the DAG, not in it:
pegasus-mpi-cluster must still read the DAG, and a TASK option it does not know would stop it.

One JSON value per line, so that a file of a million tasks is read a line at a time: the first line
``{"format": 1}``, then per task ``["<task>", [inputs], [outputs], [optional outputs]]``, each file a path
relative to the task's working directory that stays inside it. An output must be written (the task fails
without it); an optional one (``optional``, a checkpoint file) is moved where the task wrote it. A reader meeting another format, or a
line that is not of that shape, stops with one line naming the file and the line.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from pilot.errors import ConfigError
from pilot.util.atomic import atomic_file
from pilot.util.boundedload import decode, parse_json, read_bytes

TASKFILES_FORMAT = 1
SUFFIX = ".taskfiles"
MAX_TASKFILES_BYTES = 1 << 31


# What one task reads and writes (inputs, outputs, optional outputs), relative to its working directory. Plain tuples: they
# travel in ``RunTask.files`` (pilot.runtime.protocol), which pickle writes fastest as plain tuples.
TaskFiles = tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]


def taskfiles_path(dag: str) -> str:
    return dag + SUFFIX


def problem_name(name: str) -> str | None:
    """Why ``name`` cannot be a task's file (None: it can): the worker links and moves it by that name."""
    if not name or "\0" in name:
        return "is empty or holds a NUL byte"
    if name.startswith("/"):
        return "is an absolute path: give it relative to the task's working directory"
    if any(part in ("", ".", "..") for part in name.split("/")):
        return "has an empty, '.' or '..' part: name a file inside the working directory"
    return None


def write_taskfiles(path: str, tasks: Iterable[tuple[str, Sequence[str], Sequence[str], Sequence[str]]]) -> None:
    """Write the lists of (task, inputs, outputs, optional outputs), atomically."""
    dumps = json.dumps
    with atomic_file(path) as fh:
        fh.write(dumps({"format": TASKFILES_FORMAT}) + "\n")
        for name, inputs, outputs, optional in tasks:
            fh.write(dumps([name, list(inputs), list(outputs), list(optional)], ensure_ascii=False) + "\n")


def read_taskfiles(path: str) -> dict[str, TaskFiles]:
    """Task name -> its files."""
    hint = "write it again with pilot plan, or drop --task-files"
    text = decode(read_bytes(path, MAX_TASKFILES_BYTES, hint), path, hint)
    lines = text.split("\n")
    out: dict[str, TaskFiles] = {}
    try:
        head = parse_json(lines[0], f"{path}:1")
    except ConfigError:
        head = None
    if head != {"format": TASKFILES_FORMAT}:
        raise ConfigError(
            f'{path}:1: expected {{"format": {TASKFILES_FORMAT}}}, a task files list of this ' f"pilot version; {hint}"
        )
    for lineno, line in enumerate(lines[1:], 2):
        if not line.strip():
            continue
        try:
            name, *lists = parse_json(line, f"{path}:{lineno}")
            if len(lists) != 3 or not all(isinstance(part, list) for part in lists):
                raise ValueError
            files = (tuple(lists[0]), tuple(lists[1]), tuple(lists[2]))
            if not isinstance(name, str) or not all(isinstance(f, str) for part in files for f in part):
                raise ValueError
        except (ValueError, TypeError, ConfigError):
            raise ConfigError(
                f'{path}:{lineno}: expected ["<task>", [inputs], [outputs], [optional outputs]]; {hint}'
            ) from None
        for f in (f for part in files for f in part):
            why = problem_name(f)
            if why:
                raise ConfigError(f"{path}:{lineno}: task {name}: the file {f[:120]!r} {why}")
        if name in out:
            raise ConfigError(f"{path}:{lineno}: task {name} is listed twice; {hint}")
        out[name] = files
    return out
