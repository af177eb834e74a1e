"""Architecture rules that are cheap to check: who may import whom, where mpi4py may be imported, module size.

The import rules are a table: every package of pilot (and providers) is a part,
and a part may import only the parts listed for it (and itself). The parts form
layers, bottom up: base (pilot, errors, yamlerrors) < util < dag < contracts <
monitor < runtime, with the site layer (site configs, job requests, the scheduler
plug-ins in providers) beside them, and planner, submit and report above; cli
sits on top. docs/architecture.md explains each part and what flows between them.
"""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "pilot"

# The part a module belongs to: its package under pilot/, or one of these top-level modules.
TOP_LEVEL = {"pilot": "base", "pilot.errors": "base", "pilot.yamlerrors": "base", "pilot.__main__": "cli",
             "pilot.sites": "site", "pilot.siteschema": "site", "pilot.jobrequest": "site"}

ALLOWED = {
    "base": set(),
    "util": {"base"},
    # What a workflow's data jobs run inside the batch job (output registration).
    "data": {"base"},
    "dag": {"base", "util"},
    # The files one part writes and another reads (cluster DAG, root and per-DAG monitoring files, driver state,
    # run result, rescue log, jobstate.log, [cluster-task] record): each module its file's name, writer and reader.
    "contracts": {"base", "util", "dag"},
    "monitor": {"base", "util", "dag", "contracts"},
    # The MPI pilot: never the planner, the driver, the site layer or the scheduler plug-ins.
    "runtime": {"base", "util", "dag", "contracts", "monitor"},
    # Site configs and job requests name their scheduler and launcher, whose registries live in providers.
    "site": {"base", "util", "providers"},
    "providers": {"base", "util", "site"},
    "planner": {"base", "util", "dag", "contracts", "site", "providers"},
    # The driver learns how a pilot run ended from contracts.result, never from the runtime.
    "submit": {"base", "util", "dag", "contracts", "monitor", "site", "providers"},
    "report": {"base", "util", "dag", "contracts", "monitor"},
    "cli": {"base", "util", "dag", "contracts", "monitor", "runtime", "site", "providers", "planner", "submit",
            "report"},
}
# The one crossing: the planner's makespan estimate runs the real master on simulated workers
# (pilot.runtime.simulate), so that the estimate and a run schedule alike.
EXCEPTIONS = {("pilot/planner/estimate.py", "runtime")}


def imports_of(path: Path) -> list[tuple[str, bool]]:
    """(module, at_top_level) for each import in a file."""
    tree = ast.parse(path.read_text())
    top = set(id(n) for n in tree.body)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, id(node) in top) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.append((node.module, id(node) in top))
    return out


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


def test_every_part_has_rules():
    for path, module in source_files():
        assert part_of(module) in ALLOWED, f"{path.relative_to(ROOT)}: add its package to ALLOWED in {Path(__file__).name}"


def test_parts_import_only_what_the_rules_allow():
    wrong = []
    for path, module in source_files():
        part = part_of(module)
        rel = str(path.relative_to(ROOT))
        for target, _ in imports_of(path):
            other = part_of(target)
            if other is None or other == part or other in ALLOWED[part] or (rel, other) in EXCEPTIONS:
                continue
            wrong.append(f"{rel} ({part}) imports {target} ({other})")
    assert not wrong, "imports across the layering rules:\n" + "\n".join(wrong)


def test_runtime_never_imports_planner_submit_or_providers():
    assert not ALLOWED["runtime"] & {"planner", "submit", "site", "providers"}


def test_mpi4py_only_imported_lazily():
    for path, _ in source_files():
        for module, top in imports_of(path):
            if module.startswith("mpi4py"):
                assert not top, f"{path} imports mpi4py at module level"


def test_importing_every_module_leaves_mpi_uninitialised():
    code = (
        "import pkgutil, importlib, sys, pilot\n"
        "for m in pkgutil.walk_packages(pilot.__path__, 'pilot.'):\n"
        "    if m.name != 'pilot.__main__': importlib.import_module(m.name)\n"
        "print('mpi4py' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_modules_stay_small():
    for path, _ in source_files():
        assert len(path.read_text().splitlines()) <= 450, f"{path} is over 450 lines: split it"


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
