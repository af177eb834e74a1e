"""Topological order, cycle naming and longest paths for every graph in pilot: DAG tasks, workflow jobs, clusters.

The order is Kahn's algorithm with a heap, so that among nodes ready at the
same time the one listed first comes first (file order for a DAG, workflow
order for jobs): plans and DAGs come out the same on every run (graphlib's
own order hands nodes out in batches as they become ready, which would reorder
tasks inside a cluster's DAG). When nodes are
left over there is a cycle; the standard library's ``graphlib`` names one,
which is then turned to start at its earliest node so that the message is
stable. Nodes are compared by identity, so unhashable ones (dataclasses) work.

Longest paths (``longest_paths``) are over nodes numbered in a topological
order, the form every caller already has its nodes in (a cluster's jobs,
clusters.yml's clusters, a DAG's tasks once ordered): the levels and
critical path of a planned cluster, the makespan of a chain of clusters, the
time left of a run, the critical path of a finished one.
"""

from __future__ import annotations

import graphlib
import heapq
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import TypeVar

N = TypeVar("N")


def topological_order(
    nodes: Sequence[N], parents: Callable[[N], Collection[N]], children: Callable[[N], Iterable[N]]
) -> list[N]:
    """``nodes`` with every parent before its children, ties in the order of ``nodes``.

    ``parents`` and ``children`` must describe the same edges (an edge listed
    twice counts twice on both sides). A cycle raises ``graphlib.CycleError``
    whose ``args[1]`` lists it from its earliest node, parent to child, that
    node repeated at the end (``a, b, a``).
    """
    return _kahn(nodes, parents, children, ties=True)


def find_cycle(
    nodes: Sequence[N], parents: Callable[[N], Collection[N]], children: Callable[[N], Iterable[N]]
) -> list[N] | None:
    """One cycle as ``topological_order`` names it (without the repeated node), or None.

    Cheaper than an order: no heap, as any order shows whether one exists.
    """
    try:
        _kahn(nodes, parents, children, ties=False)
    except graphlib.CycleError as exc:
        return exc.args[1][:-1]
    return None


def _kahn(
    nodes: Sequence[N], parents: Callable[[N], Collection[N]], children: Callable[[N], Iterable[N]], ties: bool
) -> list[N]:
    index = {id(n): i for i, n in enumerate(nodes)}
    indeg = [len(parents(n)) for n in nodes]
    ready = [i for i, d in enumerate(indeg) if d == 0]
    pop, push = (heapq.heappop, heapq.heappush) if ties else (list.pop, list.append)
    out: list[N] = []
    while ready:
        node = nodes[pop(ready)]
        out.append(node)
        for c in children(node):
            k = index[id(c)]
            indeg[k] -= 1
            if indeg[k] == 0:
                push(ready, k)
    if len(out) < len(nodes):
        left = [i for i, d in enumerate(indeg) if d > 0]
        raise graphlib.CycleError("nodes are in a cycle", _cycle(nodes, left, parents, index))
    return out


def _cycle(
    nodes: Sequence[N], left: list[int], parents: Callable[[N], Collection[N]], index: dict[int, int]
) -> list[N]:
    """One cycle among the ``left`` nodes (those Kahn's algorithm could not order), from its earliest node."""
    remaining = set(left)
    graph = {i: [index[id(p)] for p in parents(nodes[i]) if index[id(p)] in remaining] for i in left}
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        ring = list(exc.args[1][:-1])
    else:  # pragma: no cover - Kahn's leftovers always contain a cycle
        raise AssertionError("no cycle among the nodes left over")
    first = ring.index(min(ring))
    ring = ring[first:] + ring[:first]
    return [nodes[i] for i in ring + ring[:1]]


def levels(
    nodes: Sequence[N], parents: Callable[[N], Collection[N]], children: Callable[[N], Iterable[N]]
) -> dict[int, int]:
    """Level of each node (keyed by ``id``): the longest path from a root, roots at level 1. A cycle raises
    ``graphlib.CycleError`` as ``topological_order`` does.

    Levels do not depend on the order nodes are taken in, so this is Kahn's algorithm without the heap, each
    node's level settled by its parents as they are taken (a plan asks for the levels of a million jobs)."""
    index = {id(n): i for i, n in enumerate(nodes)}
    indeg = [len(parents(n)) for n in nodes]
    level = [1] * len(nodes)
    ready = [i for i, d in enumerate(indeg) if d == 0]
    taken = 0
    while ready:
        i = ready.pop()
        taken += 1
        below = level[i] + 1
        for c in children(nodes[i]):
            k = index[id(c)]
            if level[k] < below:
                level[k] = below
            indeg[k] -= 1
            if not indeg[k]:
                ready.append(k)
    if taken < len(nodes):
        topological_order(nodes, parents, children)  # raises, naming the cycle
    return {id(n): level[i] for i, n in enumerate(nodes)}


class LongestPaths:
    """The heaviest chain ending at each node: its weight (``finish``, the node's own included) and the parent it
    comes through (``via``; -1 where it starts at the node). A plain class: a worker rank imports this module
    (through the DAG parser) and keeps its start-up free of dataclasses."""

    __slots__ = ("finish", "via")

    def __init__(self, finish: list[float], via: list[int]) -> None:
        self.finish = finish
        self.via = via

    def path(self, last: int) -> list[int]:
        """The nodes of the heaviest chain ending at ``last``, first to last."""
        out = []
        while last >= 0:
            out.append(last)
            last = self.via[last]
        out.reverse()
        return out


def longest_paths(weights: Sequence[float], parents: Callable[[int], Iterable[int]]) -> LongestPaths:
    """Heaviest chains in a DAG of nodes ``0 .. len(weights) - 1`` numbered so that each comes after its
    ``parents(k)``: node k finishes at ``weights[k]`` plus the latest finish among its parents (0 without any), by
    way of the first parent listed of those that finish latest. A parent numbered after its child counts as
    finishing at 0 (the caller's order was not topological: its answer is only as good as that order)."""
    finish = [0.0] * len(weights)
    via = [-1] * len(weights)
    for k, weight in enumerate(weights):
        start, by = 0.0, -1
        for p in parents(k):
            if by < 0 or finish[p] > start:
                start, by = finish[p], p
        finish[k], via[k] = start + weight, by
    return LongestPaths(finish, via)
