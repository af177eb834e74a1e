"""Order questions about a DAG's tasks: topological order, cycle naming (PMC just says "Workflow failed" on a
cycle), the widest level."""

from __future__ import annotations

import collections
from array import array
from collections.abc import Sequence

from pilot.dag.model import Dag, Task
from pilot.util import graphs


def find_cycle(dag: Dag) -> list[str] | None:
    """The task names of one cycle, from the task that comes first in the file, or None.

    Whether there is one is found here, by Kahn's algorithm over the tasks' own
    ``order`` with a count of parents in an array: the parse's last step, so its
    memory adds to the DAG's at the master's peak (pilot.util.graphs keys nodes
    by id in a dict, some 150 bytes a task). Only a DAG that has a cycle goes
    there, to have it named the way every graph of pilot names one.
    """
    tasks = list(dag.tasks.values())
    waiting = array("i", (len(t.parents) for t in tasks))
    ready = [t for t in tasks if not t.parents]
    seen = 0
    while ready:
        seen += 1
        for child in ready.pop().children:
            i = child.order
            waiting[i] -= 1
            if not waiting[i]:
                ready.append(child)
    if seen == len(tasks):
        return None
    cycle = graphs.find_cycle(tasks, _parents, _children)
    return None if cycle is None else [t.name for t in cycle]


def topological_order(dag: Dag) -> list[str]:
    """Task names so that parents come before children; ties in file order. A cycle raises graphlib.CycleError."""
    return [t.name for t in graphs.topological_order(list(dag.tasks.values()), _parents, _children)]


def widest_level(dag: Dag) -> int:
    """Most tasks on one level (longest path from a root): how many ranks can be kept busy at once."""
    levels = graphs.levels(list(dag.tasks.values()), _parents, _children)
    return max(collections.Counter(levels.values()).values(), default=1)


def _parents(task: Task) -> Sequence[Task]:
    return task.parents


def _children(task: Task) -> Sequence[Task]:
    return task.children
