"""Write a Dag back in PMC grammar (the planner's output, golden-file tested)."""

from __future__ import annotations

from typing import Iterable, Iterator

from pilot.dag.lexer import quote_arg
from pilot.dag.model import Dag, Task


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


def iter_dag_lines(tasks: Iterable[Task]) -> Iterator[str]:
    """TASK lines (with ``#@`` annotations) for all tasks, then their EDGE lines."""
    tasks = list(tasks)
    for task in tasks:
        if task.pegasus_id is not None:
            yield f"#@ {task.pegasus_id} {task.transformation or '-'} {task.dax_id or task.name}\n"
        if task.runtime is not None:
            yield runtime_note(task.runtime) + "\n"
        yield task_line(task) + "\n"
    names = {t.name for t in tasks}
    for task in tasks:
        for child in task.children:
            if child.name in names:
                yield f"EDGE {quote_arg(task.name)} {quote_arg(child.name)}\n"


def format_dag(dag: Dag) -> str:
    return "".join(iter_dag_lines(dag))
