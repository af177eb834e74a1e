"""Write PMC DAGs: the one writer of their lines, for the planner and for ``format_dag``.

A DAG is written task by task, then its edges. Per task: ``#pilot cwd=`` and
``#pilot env`` where they change from the task before (``ContextNotes``), the
``#@`` annotation, the ``#pilot runtime=`` and stdio notes, the TASK record
(``task_text`` puts them in that order); then one EDGE record per edge.
The planner streams a cluster's jobs through these functions
(pilot.planner.dagfile) without building Task objects, a TASK's options
made from the job's profiles; ``format_dag`` writes a parsed Dag back. Both
are golden-file tested (tests/golden).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from pilot.dag.lexer import quote_arg
from pilot.dag.model import Dag, Task
from pilot.errors import DagError
from pilot.util import safetext

Env = tuple[tuple[str, str], ...]


def task_record(name: str, command: str) -> str:
    """A TASK record from its words as written (quote_arg): the task id, then its options, executable and
    arguments in ``command``."""
    return f"TASK {name} {command}" if command else f"TASK {name}"


def task_line(task: Task) -> str:
    """One TASK record; options are written only when they differ from defaults."""
    for arg in (task.name, *task.argv):
        why = safetext.problem_record(arg)
        if why:
            raise ValueError(f"task {task.name!r}: an argument {why}")
    parts = []
    if task.memory:
        parts += ["-m", str(task.memory)]
    if task.cpus != 1:
        parts += ["-c", str(task.cpus)]
    if task.gpus:
        parts += ["-g", str(task.gpus)]
    if task.tries is not None:
        parts += ["-t", str(task.tries)]
    if task.priority:
        parts += ["-p", str(task.priority)]
    for var, path in task.pipe_forwards:
        parts += ["-f", quote_arg(f"{var}={path}")]
    for src, dest in task.file_forwards:
        parts += ["-F", quote_arg(f"{src}={dest}")]
    parts += [quote_arg(a) for a in task.argv]
    return task_record(quote_arg(task.name), " ".join(parts))


def annotation(pegasus_id: int | str, transformation: str, dax_id: str) -> str:
    """The ``#@ <id> <transformation> <dax id>`` line naming the next TASK's Pegasus job."""
    return f"#@ {pegasus_id} {transformation} {dax_id}"


def edge_record(parent: str, child: str) -> str:
    """An EDGE record from its task ids as written (quote_arg): ``child`` runs after ``parent`` has succeeded."""
    return f"EDGE {parent} {child}"


def edge_lines(edges: Iterable[tuple[str, str]]) -> str:
    """The EDGE records of ``(parent, child)`` task ids as written, each line ending in a newline."""
    return "".join([f"EDGE {parent} {child}\n" for parent, child in edges])


def runtime_note(seconds: float) -> str:
    """The ``#pilot runtime=<s>`` line that gives the next TASK its expected run time."""
    text = f"{seconds:g}"
    if float(text) != seconds:
        text = repr(float(seconds))
    return f"#pilot runtime={text}"


def stdio_note(stdin: str, stdout: str, stderr: str) -> str:
    """The ``#pilot stdin=.. stdout=.. stderr=..`` line naming the next TASK's stdio files."""
    words = [f"{k}={v}" for k, v in (("stdin", stdin), ("stdout", stdout), ("stderr", stderr)) if v]
    for word in words:
        why = safetext.problem_record(word)
        if why:
            raise ValueError(f"stdio file {word!r} {why}")
    return "#pilot " + " ".join(quote_arg(w) for w in words)


def cwd_note(cwd: str | None) -> str:
    """The ``#pilot cwd=<dir>`` line that sets the working directory of the TASKs after it."""
    why = None if cwd is None else safetext.problem_line_value(cwd)
    if why:
        raise ValueError(f"working directory {cwd!r} {why}")
    return f"#pilot cwd={cwd or ''}"


def env_note(env: Env | None) -> str:
    """The ``#pilot env NAME=VALUE ...`` line that sets the environment of the TASKs after it."""
    words = [f"{k}={v}" for k, v in env or ()]
    for word in words:
        why = safetext.problem_record(word)
        if why:
            raise ValueError(f"environment variable {word!r} {why}")
    return " ".join(["#pilot env", *(quote_arg(w) for w in words)])


class ContextNotes:
    """The notes that carry a task's directory and environment: written where they change from the task before,
    as the parser reads each until the next (a DAG of a million tasks in one directory says it once)."""

    def __init__(self) -> None:
        self._cwd: str | None = None
        self._env: Env | None = None

    def context(self, cwd: str | None, env: Env | None) -> list[str]:
        """The ``#pilot cwd=`` and ``#pilot env`` lines the next task needs before its own (often none)."""
        notes = []
        if cwd != self._cwd:
            self._cwd = cwd
            notes.append(cwd_note(cwd))
        if env != self._env:
            self._env = env
            notes.append(env_note(env))
        return notes


def details(runtime: float | None, stdio: tuple[str, str, str] | None) -> list[str]:
    """The ``#pilot runtime=`` and stdio lines of one task (those it has)."""
    notes = []
    if runtime is not None:
        notes.append(runtime_note(runtime))
    if stdio is not None:
        notes.append(stdio_note(*stdio))
    return notes


def task_text(context: list[str], note: str | None, more: list[str], record: str) -> str:
    """One task's lines, each ending in a newline, in the order the parser reads them: its ``context`` notes
    (ContextNotes), its ``#@`` annotation ``note`` (None: none), its ``details`` ``more``, its TASK ``record``."""
    if note is None:
        return "\n".join([*context, *more, record]) + "\n"
    return "\n".join([*context, note, *more, record]) + "\n"


def plain_task_text(pegasus_id: int | str, transformation: str, dax_id: str, record: str) -> str:
    """task_text of a task without notes, its annotation given as ``annotation`` takes it."""
    return f"{annotation(pegasus_id, transformation, dax_id)}\n{record}\n"


def plain_task(pegasus_id: int | str, transformation: str, dax_id: str, name: str, head: str, arguments: str) -> str:
    """plain_task_text of ``task_record(name, head + " " + arguments)`` (no space without arguments): the format
    of most of the million tasks of a planned cluster. ``head``: the task's options and executable as written,
    never empty."""
    return plain_task_text(
        pegasus_id, transformation, dax_id, task_record(name, f"{head} {arguments}" if arguments else head)
    )


def iter_dag_text(tasks: Iterable[Task]) -> Iterator[str]:
    """The DAG of ``tasks`` as text, a task's lines at a time, then its EDGE lines."""
    tasks = list(tasks)
    notes = ContextNotes()
    for task in tasks:
        note = None
        if task.pegasus_id is not None:
            note = annotation(task.pegasus_id, task.transformation or "-", task.dax_id or task.name)
        yield task_text(notes.context(task.cwd, task.env), note, details(task.runtime, task.stdio), task_line(task))
    names = {t.name for t in tasks}
    for task in tasks:
        for child in task.children:
            if child.name in names:
                yield edge_record(quote_arg(task.name), quote_arg(child.name)) + "\n"


def format_dag(dag: Dag) -> str:
    """The DAG as ``pilot plan`` copies a PMC .dag into a cluster. Arguments may hold any bytes (read as surrogate
    escapes, written back as the same bytes), as PMC passes them to the task; a task id, or a ``#@`` annotation,
    must be UTF-8 text, since the monitoring files name the task as text: else a DagError naming its line."""
    for task in dag:
        for what, value in (
            ("task id", task.name),
            ("'#@' annotation", task.pegasus_id),
            ("'#@' annotation", task.transformation),
            ("'#@' annotation", task.dax_id),
        ):
            if value is not None and not value.isascii() and not _is_text(value):
                raise DagError(
                    dag.path,
                    task.line,
                    f"{what} {value!r} has bytes that are not UTF-8: pegasus-monitord "
                    "and the Pegasus tools name tasks as text; rename it (pilot run itself runs it as written)",
                )
    return "".join(iter_dag_text(dag))


def _is_text(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # a surrogate escape: a byte of the file that is not UTF-8
        return False
    return True
