"""Architecture rules that are cheap to check: who may import whom, where mpi4py may be imported, module size.

The import rules are a table: every package of pilot (and providers) is a part,
and a part may import only the parts listed for it (and itself). The parts form
layers, bottom up: base (pilot, errors, yamlerrors) < util < dag < contracts <
monitor < runtime, with the scheduler plug-ins (providers) < the site layer (site
configs, job requests) beside them, and planner, submit and report above; cli
sits on top. No part imports one that imports it. docs/architecture.md explains
each part and what flows between them.
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
    # The files one part writes and another reads (cluster DAG, braindump/static.bp, run result).
    "contracts": {"base", "util", "dag"},
    "monitor": {"base", "util", "dag", "contracts"},
    # The MPI pilot: never the planner, the driver, the site layer or the scheduler plug-ins.
    "runtime": {"base", "util", "dag", "contracts", "monitor"},
    # The scheduler plug-ins name what they read of a site and a request (providers.inputs) instead of importing
    # the site layer, which checks a site's scheduler and launcher against their registries: one way, no cycle.
    "providers": {"base", "util"},
    "site": {"base", "util", "providers"},
    "planner": {"base", "util", "dag", "contracts", "site", "providers"},
    # The driver learns how a pilot run ended from contracts.result, never from the runtime.
    "submit": {"base", "util", "dag", "contracts", "monitor", "site", "providers"},
    # The plug-ins say which files of a cluster's directory are batch scripts.
    "report": {"base", "util", "dag", "contracts", "monitor", "providers"},
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
