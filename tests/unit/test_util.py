"""The shared plumbing in pilot.util: graphs, atomic writes, file locks, tables, the parser, the GC pause."""

from __future__ import annotations

import gc
import graphlib
import os
import subprocess
import sys

import pytest

from pilot.errors import UsageError
from pilot.util import graphs
from pilot.util.atomic import atomic_file, write_atomic
from pilot.util.cmdline import Parser
from pilot.util.flock import FileLock, held_elsewhere
from pilot.util.gcpause import gc_paused
from pilot.util.tables import table


class Node:
    def __init__(self, name: str) -> None:
        self.name, self.parents, self.children = name, [], []

    __hash__ = None  # unhashable, like the planner's dataclasses: the helpers go by identity


def graph(names: str, edges: str) -> list[Node]:
    nodes = {n: Node(n) for n in names}
    for edge in edges.split():
        p, c = nodes[edge[0]], nodes[edge[1]]
        p.children.append(c)
        c.parents.append(p)
    return list(nodes.values())


def order(nodes):
    return "".join(n.name for n in graphs.topological_order(nodes, lambda n: n.parents, lambda n: n.children))


def test_topological_order_keeps_ties_in_list_order():
    assert order(graph("abcd", "ad bd")) == "abcd"
    assert order(graph("dcba", "ad bd")) == "cbad"


def test_a_cycle_is_named_from_its_earliest_node():
    nodes = graph("xabc", "xa ab bc ca")
    with pytest.raises(graphlib.CycleError) as info:
        order(nodes)
    assert "".join(n.name for n in info.value.args[1]) == "abca"
    found = graphs.find_cycle(nodes, lambda n: n.parents, lambda n: n.children)
    assert "".join(n.name for n in found) == "abc"
    assert graphs.find_cycle(graph("ab", "ab"), lambda n: n.parents, lambda n: n.children) is None


def test_levels_are_longest_paths_from_a_root():
    nodes = graph("abcd", "ab bc ac cd")
    level = graphs.levels(nodes, lambda n: n.parents, lambda n: n.children)
    assert [level[id(n)] for n in nodes] == [1, 2, 3, 4]


def test_longest_paths_weigh_each_chain_and_name_its_nodes():
    # 0 -> 1 -> 3, 0 -> 2 -> 3, 4 alone; node 2 is heavier than node 1
    parents = [[], [0], [0], [1, 2], []]
    paths = graphs.longest_paths([1.0, 2.0, 5.0, 1.0, 7.5], parents.__getitem__)
    assert paths.finish == [1.0, 3.0, 6.0, 7.0, 7.5]
    assert paths.via == [-1, 0, 0, 2, -1]
    assert paths.path(3) == [0, 2, 3] and paths.path(4) == [4]


def test_longest_paths_break_ties_by_the_first_parent_listed():
    paths = graphs.longest_paths([1.0, 1.0, 0.0], [[], [], [1, 0]].__getitem__)
    assert paths.via[2] == 1 and paths.finish[2] == 1.0
    weightless = graphs.longest_paths([0.0, 0.0], [[], [0]].__getitem__)
    assert weightless.path(1) == [0, 1]  # a weightless parent is still the way the chain comes


def test_longest_paths_count_a_parent_numbered_later_as_not_started():
    paths = graphs.longest_paths([2.0, 3.0], [[1], []].__getitem__)
    assert paths.finish == [2.0, 3.0]


def test_atomic_file_replaces_whole_or_not_at_all(tmp_path):
    target = tmp_path / "state.json"
    write_atomic(str(target), "old\n")
    with pytest.raises(RuntimeError):
        with atomic_file(str(target)) as fh:
            fh.write("half")
            raise RuntimeError("crash while writing")
    assert target.read_text() == "old\n" and os.listdir(tmp_path) == ["state.json"]
    write_atomic(str(target), "new\n")
    assert target.read_text() == "new\n" and os.listdir(tmp_path) == ["state.json"]


def test_file_lock_is_seen_from_another_process(tmp_path):
    path = str(tmp_path / "lock")
    lock = FileLock(path, create=True)
    lock.open()
    assert lock.try_lock()
    with held_elsewhere(path) as fd:
        assert fd is not None  # flock belongs to the open file: another open sees it held, even in this process
    probe = (
        "import sys; from pilot.util.flock import FileLock; l = FileLock(sys.argv[1]); l.open(); " "print(l.try_lock())"
    )
    other = subprocess.run([sys.executable, "-c", probe, path], capture_output=True, text=True, check=True)
    assert other.stdout.strip() == "False"
    lock.release()
    with held_elsewhere(path) as fd:
        assert fd is None
    other = subprocess.run([sys.executable, "-c", probe, path], capture_output=True, text=True, check=True)
    assert other.stdout.strip() == "True"


def test_table_aligns_columns():
    assert table([("name", "n"), ("a", "10")], right={1}) == ["name   n", "a     10"]
    assert table([("k:", "v"), ("key:", "value ")], sep=" ", indent="  ") == ["  k:   v", "  key: value"]


def test_parser_errors_are_one_line_usage_errors():
    p = Parser(prog="pilot thing")
    p.add_argument("--n", type=int)
    with pytest.raises(
        UsageError, match=r"^pilot thing: argument --n: invalid int value: 'x' \(see pilot thing --help\)$"
    ):
        p.parse_args(["--n", "x"])


def test_gc_paused_restores_the_collector():
    assert gc.isenabled()
    with pytest.raises(ValueError):
        with gc_paused():
            assert not gc.isenabled()
            raise ValueError
    assert gc.isenabled()
