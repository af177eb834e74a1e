"""Architecture rules that are cheap to check: who may import whom, no import cycles, where mpi4py may be
imported, module size.

The import rules are a table: every package of pilot (and providers) is a part,
and a part may import only the parts listed for it (and itself). The parts form
layers, bottom up: base (pilot, errors, yamlerrors) < util < dag < contracts <
monitor < runtime, with the scheduler plug-ins (providers) < the site layer (site
configs, job requests) beside monitor and runtime, also on contracts, and planner,
submit and report above; cli sits on top. No part imports one that imports it. docs/architecture.md explains
each part and what flows between them.
"""

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "pilot"

# The part a module belongs to: its package under pilot/, or one of these top-level modules.
TOP_LEVEL = {
    "pilot": "base",
    "pilot.errors": "base",
    "pilot.yamlerrors": "base",
    "pilot.__main__": "cli",
    "pilot.sites": "site",
    "pilot.siteschema": "site",
    "pilot.jobrequest": "site",
}

ALLOWED = {
    "base": set(),
    "util": {"base"},
    # What a workflow's data jobs run inside the batch job (output registration).
    "data": {"base"},
    "dag": {"base", "util"},
    # The files one part writes and another reads (cluster DAG, root and per-DAG monitoring files, driver state,
    # run result, rescue log, jobstate.log, [cluster-task] record): each module its file's name, writer and reader;
    # and the queue states a scheduler plug-in answers in, which the driver's state records.
    "contracts": {"base", "util", "dag"},
    "monitor": {"base", "util", "dag", "contracts"},
    # The MPI pilot: never the planner, the driver, the site layer or the scheduler plug-ins.
    "runtime": {"base", "util", "dag", "contracts", "monitor"},
    # The scheduler plug-ins name what they read of a site and a request (providers.inputs) instead of importing
    # the site layer, which checks a site's scheduler and launcher against their registries: one way, no cycle.
    # They answer in contracts.queue's states, which submit.state.json (contracts.submitstate) records.
    "providers": {"base", "util", "contracts"},
    "site": {"base", "util", "providers"},
    "planner": {"base", "util", "dag", "contracts", "site", "providers"},
    # The driver learns how a pilot run ended from contracts.result, never from the runtime.
    "submit": {"base", "util", "dag", "contracts", "monitor", "site", "providers"},
    # The plug-ins say which files of a cluster's directory are batch scripts.
    "report": {"base", "util", "dag", "contracts", "monitor", "providers"},
    "cli": {
        "base",
        "util",
        "dag",
        "contracts",
        "monitor",
        "runtime",
        "site",
        "providers",
        "planner",
        "submit",
        "report",
    },
}
# The crossings: the planner's makespan estimate runs the real master on simulated workers
# (pilot.runtime.simulate), so that the estimate and a run schedule alike; pilot cancel ends the task processes
# a killed run left behind by the marks the runtime gives them (pilot.runtime.reaper, startup.dag_key), read as
# the runtime reads them, never by a second copy that could drift from the one it writes; and a pilot job's
# long-lived run takes the options of a cluster's pilot run line that the parser of that line (pilot.cli.run)
# declares the workers', never by a second list that a new option could be left out of.
EXCEPTIONS = {
    ("pilot/planner/estimate.py", "runtime"),
    ("pilot/submit/endruns.py", "runtime"),
    ("pilot/submit/feed.py", "cli"),
}


class Imported(NamedTuple):
    module: str
    names: tuple[str, ...]  # what ``from module import ...`` takes; () for ``import module``
    top: bool  # a statement of the module's body, run when it is imported (not in a function, if or try)
    type_checking: bool  # under ``if TYPE_CHECKING:``: seen by type checkers only, never run


def imports_in(source: str) -> Iterator[Imported]:
    """Every import statement of a module's source, wherever it is."""
    todo = [(node, True, False) for node in ast.parse(source).body]
    while todo:
        node, top, type_checking = todo.pop()
        if isinstance(node, ast.Import):
            yield from (Imported(alias.name, (), top, type_checking) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.module:
                yield Imported(node.module, tuple(alias.name for alias in node.names), top, type_checking)
        elif isinstance(node, ast.If) and _type_checking(node):
            todo += [(n, False, True) for n in node.body] + [(n, False, type_checking) for n in node.orelse]
        else:
            todo += [(n, False, type_checking) for n in ast.iter_child_nodes(node)]


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def part_of(module: str) -> str | None:
    """The part of a pilot or providers module; None for anything else (stdlib, third party)."""
    names = module.split(".")
    if names[0] == "providers":
        return "providers"
    if names[0] != "pilot":
        return None
    if module in TOP_LEVEL:
        return TOP_LEVEL[module]
    if len(names) >= 2 and (PKG / names[1]).is_dir():
        return names[1]
    return TOP_LEVEL.get(".".join(names[:2]), "base" if names[1].startswith("__") else None)


def source_files():
    for top in (PKG, ROOT / "providers"):
        for path in sorted(top.rglob("*.py")):
            yield path, ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def import_graph(type_checking: bool = False) -> dict[str, set[str]]:
    """Module -> the modules of pilot and providers it imports, in a function or not (``from pkg import mod``
    imports mod, and pkg for any name that is not a module); with ``type_checking``, also those imported
    under ``if TYPE_CHECKING:``."""
    modules = {module: path for path, module in source_files()}
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        targets = set()
        for imp in imports_in(path.read_text()):
            if imp.type_checking and not type_checking:
                continue
            submodules = {f"{imp.module}.{name}" for name in imp.names} & modules.keys()
            targets |= submodules if imp.names and len(submodules) == len(imp.names) else submodules | {imp.module}
        graph[module] = (targets & modules.keys()) - {module}
    return graph


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    """The modules ``start`` imports, directly or through others."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for child in graph[todo.pop()] - seen:
            seen.add(child)
            todo.append(child)
    return seen


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The groups of modules that import each other, directly or through others."""
    reach = {module: reachable(graph, module) for module in graph}
    groups = {frozenset({m} | {other for other in reach[m] if m in reach[other]}) for m in graph if m in reach[m]}
    return sorted((set(group) for group in groups), key=min)


def a_cycle(graph: dict[str, set[str]], group: set[str]) -> list[str]:
    """One cycle through the group's first module, as the chain of imports: [a, b, ..., a]."""
    start = min(group)
    paths = {start: [start]}
    todo = [start]
    while todo:
        node = todo.pop(0)
        for child in sorted(graph[node] & group):
            if child == start:
                return paths[node] + [start]
            if child not in paths:
                paths[child] = paths[node] + [child]
                todo.append(child)
    raise AssertionError(f"{sorted(group)} is not a cycle")


def test_no_import_cycles():
    graph = import_graph()
    found = [
        " -> ".join(a_cycle(graph, group)) + f"  ({len(group)} modules: {', '.join(sorted(group))})"
        for group in cycles(graph)
    ]
    assert not found, "modules that import each other (split the shared part out, or pass it in):\n" + "\n".join(found)


def test_the_cycle_finder_finds_cycles():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": {"e"}, "e": set()}
    assert cycles(graph) == [{"a", "b", "c"}] and a_cycle(graph, {"a", "b", "c"}) == ["a", "b", "c", "a"]
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import x\nelse:\n    import y\ndef f():\n    from z import w\n"
    found = sorted((i.module, i.top, i.type_checking) for i in imports_in(source))
    assert found == [("typing", True, False), ("x", False, True), ("y", False, False), ("z", False, False)]


def test_every_part_has_rules():
    for path, module in source_files():
        assert (
            part_of(module) in ALLOWED
        ), f"{path.relative_to(ROOT)}: add its package to ALLOWED in {Path(__file__).name}"


def test_parts_import_only_what_the_rules_allow():
    wrong = []
    for path, module in source_files():
        part = part_of(module)
        rel = str(path.relative_to(ROOT))
        for target in sorted({imp.module for imp in imports_in(path.read_text())}):
            other = part_of(target)
            if other is None or other == part or other in ALLOWED[part] or (rel, other) in EXCEPTIONS:
                continue
            wrong.append(f"{rel} ({part}) imports {target} ({other})")
    assert not wrong, "imports across the layering rules:\n" + "\n".join(wrong)


def test_parts_form_layers():
    """No part imports, through others, a part that imports it."""

    def below(path: tuple[str, ...]) -> None:
        for other in ALLOWED[path[-1]]:
            assert other not in path, f"import cycle in ALLOWED: {' -> '.join([*path, other])}"
            below((*path, other))

    for part in ALLOWED:
        below((part,))


def test_runtime_never_imports_planner_submit_or_providers():
    assert not ALLOWED["runtime"] & {"planner", "submit", "site", "providers"}


def test_mpi4py_only_imported_lazily():
    for path, _ in source_files():
        for imp in imports_in(path.read_text()):
            if imp.module.startswith("mpi4py"):
                assert not imp.top, f"{path} imports mpi4py at module level"


def test_importing_every_module_leaves_mpi_uninitialised():
    code = (
        "import pkgutil, importlib, sys, pilot\n"
        "for m in pkgutil.walk_packages(pilot.__path__, 'pilot.'):\n"
        "    if m.name != 'pilot.__main__': importlib.import_module(m.name)\n"
        "print('mpi4py' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


# See test_modules_stay_small.
SOFT_LIMIT = 450
HARD_LIMIT = 800
LONG_MODULES = {
    "pilot/runtime/master.py": "the master's run: its dispatch, result handling and end share the per-task state "
    "of the hot path (engine, matcher, slots, attempt numbers); the parts with state of their own are its helpers "
    "(ahead, crashes, report, startup, timeleft)",
    "pilot/submit/driver.py": "DAGMan's job for the cluster DAG: one state machine over submit.state.json that "
    "releases, submits, watches, settles and cancels clusters, each step a transition of the same records and the "
    "same DAGMan log events; the parts with state of their own are modules apart (backend, outages, endruns)",
}


def test_modules_stay_small():
    """Past SOFT_LIMIT lines a module is split at a seam, or named in LONG_MODULES with the one job it has.

    A line count cannot tell one job from two. A hard cap made the modules
    that reached it squeeze lines and grow one-line wrappers to stay under,
    which is harder to read than the extra lines were. So the limit says
    where to look, not what number to meet: a module past it is split where
    it has a seam (a part with state of its own behind a small interface),
    or, where a split would only scatter one job (or add indirection to the
    master's per-task path), it is named in LONG_MODULES with that job, for a
    reviewer to judge. HARD_LIMIT holds for every module: by then it has
    more than one job, whatever its entry says.
    """
    over = []
    for path, _ in source_files():
        rel, lines = str(path.relative_to(ROOT)), len(path.read_text().splitlines())
        if lines > HARD_LIMIT or (lines > SOFT_LIMIT and rel not in LONG_MODULES):
            over.append(f"{rel}: {lines} lines")
    assert not over, (
        f"over {SOFT_LIMIT} lines: split at a seam, or name the module and its one job in LONG_MODULES "
        f"(none may pass {HARD_LIMIT}):\n" + "\n".join(over)
    )


def test_long_modules_are_long():
    short = [
        rel
        for rel in LONG_MODULES
        if not (ROOT / rel).exists() or len((ROOT / rel).read_text().splitlines()) <= SOFT_LIMIT
    ]
    assert not short, f"within {SOFT_LIMIT} lines (or gone): delete from LONG_MODULES: {short}"


def test_the_masters_helpers_do_not_import_it():
    """The master owns its helpers and hands them what they work on: none imports it, not even for a type."""
    graph = import_graph(type_checking=True)
    group = next((g for g in cycles(graph) if "pilot.runtime.master" in g), None)
    assert group is None, "imported back by what it imports: " + " -> ".join(a_cycle(graph, group))


# Each file that one part writes and another reads has one module in pilot/contracts holding its name, its
# writer and its reader. A literal of its name anywhere else (a string constant, an f-string's text; not a
# docstring) is a module opening the file by hand: it goes through the contract instead. The names come from
# the contracts themselves, so a renamed file keeps the rule true.
def _owned_names() -> dict[str, str]:
    from pilot.contracts import clusters, jobstate, rescue, result, submitstate

    return {
        clusters.CLUSTERS_FILE: "pilot/contracts/clusters.py",
        submitstate.STATE_FILE: "pilot/contracts/submitstate.py",
        jobstate.JOBSTATE_FILE: "pilot/contracts/jobstate.py",
        result.RESULT_SUFFIX: "pilot/contracts/result.py",  # <dag>.result
        rescue.RESCUE_SUFFIX: "pilot/contracts/rescue.py",  # <dag>.rescue
    }


# The record's writer and reader: a constant that starts like a record (or a regular expression of one) makes
# or parses records; help and messages that mention them do not start so.
RECORD_TAG = ("[cluster-task", "pilot/contracts/taskrecord.py")


def _names_a_file(text: str, name: str) -> bool:
    """Whether a string constant is, or ends with, the file name (a path to it); a suffix (``.result``) names
    the file wherever it ends a constant. Prose that mentions a file in the middle of a sentence does not."""
    if name.startswith("."):
        return text.endswith(name)
    return text == name or text.endswith("/" + name)


def _string_constants(tree: ast.AST):
    """(line, text) of each string constant but docstrings and other bare string statements."""
    bare = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in bare:
            yield node.lineno, node.value


def test_files_that_cross_parts_are_named_only_by_their_contract():
    owned = _owned_names()
    wrong = []
    for path, _ in source_files():
        rel = str(path.relative_to(ROOT))
        for line, text in _string_constants(ast.parse(path.read_text())):
            for name, owner in owned.items():
                if rel != owner and _names_a_file(text, name):
                    wrong.append(f"{rel}:{line}: names {name!r}: read or write it through {owner}")
            if rel != RECORD_TAG[1] and text.lstrip("\\").startswith(RECORD_TAG[0]):
                wrong.append(f"{rel}:{line}: makes or parses a {RECORD_TAG[0]}] record: use {RECORD_TAG[1]}")
    assert not wrong, "files of another part opened by name:\n" + "\n".join(wrong)
