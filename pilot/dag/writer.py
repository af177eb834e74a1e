"""Write a Dag back in PMC grammar (the planner's output, golden-file tested)."""

from __future__ import annotations

from typing import Iterable, Iterator

from pilot.dag.lexer import quote_arg
from pilot.dag.model import Dag, Task
from pilot.errors import DagError


def task_line(task: Task) -> str:
    """One TASK record; options are written only when they differ from defaults."""
    for arg in (task.name, *task.argv):
        if "\n" in arg or "\r" in arg:
            raise ValueError(f"task {task.name!r}: arguments cannot contain a newline in a PMC DAG")
    parts = ["TASK", quote_arg(task.name)]
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
    return " ".join(parts)


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
        if "\n" in word or "\r" in word:
            raise ValueError(f"stdio file {word!r}: a newline cannot be written in a PMC DAG")
    return "#pilot " + " ".join(quote_arg(w) for w in words)


def cwd_note(cwd: str | None) -> str:
    """The ``#pilot cwd=<dir>`` line that sets the working directory of the TASKs after it."""
    if cwd is not None and ("\n" in cwd or "\r" in cwd):
        raise ValueError(f"working directory {cwd!r}: a newline cannot be written in a PMC DAG")
    return f"#pilot cwd={cwd or ''}"


def env_note(env: tuple[tuple[str, str], ...] | None) -> str:
    """The ``#pilot env NAME=VALUE ...`` line that sets the environment of the TASKs after it."""
    words = [f"{k}={v}" for k, v in env or ()]
    for word in words:
        if "\n" in word or "\r" in word or "\0" in word:
            raise ValueError(f"environment variable {word!r}: a newline or NUL cannot be written in a PMC DAG")
    return " ".join(["#pilot env", *(quote_arg(w) for w in words)])


def iter_dag_lines(tasks: Iterable[Task]) -> Iterator[str]:
    """TASK lines (with ``#@`` annotations) for all tasks, then their EDGE lines."""
    tasks = list(tasks)
    cwd = None
    env = None
    for task in tasks:
        if task.cwd != cwd:
            cwd = task.cwd
            yield cwd_note(cwd) + "\n"
        if task.env != env:
            env = task.env
            yield env_note(env) + "\n"
        if task.pegasus_id is not None:
            yield f"#@ {task.pegasus_id} {task.transformation or '-'} {task.dax_id or task.name}\n"
        if task.runtime is not None:
            yield runtime_note(task.runtime) + "\n"
        if task.stdio is not None:
            yield stdio_note(*task.stdio) + "\n"
        yield task_line(task) + "\n"
    names = {t.name for t in tasks}
    for task in tasks:
        for child in task.children:
            if child.name in names:
                yield f"EDGE {quote_arg(task.name)} {quote_arg(child.name)}\n"


def format_dag(dag: Dag) -> str:
    """The DAG as ``pilot plan`` copies a PMC .dag into a cluster. Arguments may hold any bytes (read as surrogate
    escapes, written back as the same bytes), as PMC passes them to the task; a task id, or a ``#@`` annotation,
    must be UTF-8 text, since the monitoring files name the task as text: else a DagError naming its line."""
    for task in dag:
        for what, value in (("task id", task.name), ("'#@' annotation", task.pegasus_id), ("'#@' annotation", task.transformation),
                            ("'#@' annotation", task.dax_id)):
            if value is not None and not value.isascii() and not _is_text(value):
                raise DagError(dag.path, task.line, f"{what} {value!r} has bytes that are not UTF-8: pegasus-monitord "
                               "and the Pegasus tools name tasks as text; rename it (pilot run itself runs it as written)")
    return "".join(iter_dag_lines(dag))


def _is_text(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # a surrogate escape: a byte of the file that is not UTF-8
        return False
    return True
