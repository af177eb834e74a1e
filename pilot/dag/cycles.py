"""Cycle detection that names the tasks on the cycle (PMC just says "Workflow failed")."""

from __future__ import annotations

from pilot.dag.model import Dag


def find_cycle(dag: Dag) -> list[str] | None:
    """Return the task names of one cycle in file order of discovery, or None.

    Kahn's algorithm first (linear, no recursion); only if nodes remain do we
    walk the remainder to extract one concrete cycle.
    """
    indeg = {t.name: len(t.parents) for t in dag.tasks.values()}
    stack = [name for name, d in indeg.items() if d == 0]
    seen = 0
    tasks = dag.tasks
    while stack:
        name = stack.pop()
        seen += 1
        for child in tasks[name].children:
            indeg[child.name] -= 1
            if indeg[child.name] == 0:
                stack.append(child.name)
    if seen == len(tasks):
        return None
    # Every remaining node with indeg > 0 lies on or downstream of a cycle;
    # following remaining parents backwards must revisit a node.
    start = min((t for t in tasks.values() if indeg[t.name] > 0), key=lambda t: t.order)
    path: list[str] = []
    index: dict[str, int] = {}
    node = start
    while node.name not in index:
        index[node.name] = len(path)
        path.append(node.name)
        node = next(p for p in node.parents if indeg[p.name] > 0)
    cycle = path[index[node.name]:]
    cycle.reverse()
    first = min(range(len(cycle)), key=lambda i: tasks[cycle[i]].order)
    return cycle[first:] + cycle[:first]


def topological_order(dag: Dag) -> list[str]:
    """Task names so that parents come before children; ties in file order."""
    import heapq

    indeg = {t.name: len(t.parents) for t in dag.tasks.values()}
    heap = [(t.order, t.name) for t in dag.tasks.values() if not t.parents]
    heapq.heapify(heap)
    out: list[str] = []
    while heap:
        _, name = heapq.heappop(heap)
        out.append(name)
        for child in dag.tasks[name].children:
            indeg[child.name] -= 1
            if indeg[child.name] == 0:
                heapq.heappush(heap, (child.order, child.name))
    return out
