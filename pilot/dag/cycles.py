"""Order questions about a DAG's tasks: topological order, cycle naming (PMC just says "Workflow failed" on a
cycle), the widest level."""

from __future__ import annotations

import collections

from pilot.dag.model import Dag, Task
from pilot.util import graphs


def find_cycle(dag: Dag) -> list[str] | None:
    """The task names of one cycle, from the task that comes first in the file, or None."""
    cycle = graphs.find_cycle(list(dag.tasks.values()), _parents, _children)
    return None if cycle is None else [t.name for t in cycle]


def topological_order(dag: Dag) -> list[str]:
    """Task names so that parents come before children; ties in file order. A cycle raises graphlib.CycleError."""
    return [t.name for t in graphs.topological_order(list(dag.tasks.values()), _parents, _children)]


def widest_level(dag: Dag) -> int:
    """Most tasks on one level (longest path from a root): how many ranks can be kept busy at once."""
    levels = graphs.levels(list(dag.tasks.values()), _parents, _children)
    return max(collections.Counter(levels.values()).values(), default=1)


def _parents(task: Task) -> list[Task]:
    return task.parents


def _children(task: Task) -> list[Task]:
    return task.children

