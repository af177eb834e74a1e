"""Topological order and cycle naming for a DAG's tasks (PMC just says "Workflow failed" on a cycle)."""

from __future__ import annotations

from pilot.dag.model import Dag, Task
from pilot.util import graphs


def find_cycle(dag: Dag) -> list[str] | None:
    """The task names of one cycle, from the task that comes first in the file, or None."""
    cycle = graphs.find_cycle(list(dag.tasks.values()), _parents, _children)
    return None if cycle is None else [t.name for t in cycle]


def topological_order(dag: Dag) -> list[str]:
    """Task names so that parents come before children; ties in file order. A cycle raises graphlib.CycleError."""
    return [t.name for t in graphs.topological_order(list(dag.tasks.values()), _parents, _children)]


def _parents(task: Task) -> list[Task]:
    return task.parents


def _children(task: Task) -> list[Task]:
    return task.children

