"""Architecture rules from DESIGN.md §2 that are cheap to check."""

import ast
import subprocess
import sys
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "pilot"


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


def test_runtime_never_imports_planner_submit_or_providers():
    for path in (PKG / "runtime").rglob("*.py"):
        for module, _ in imports_of(path):
            assert not module.startswith(("pilot.planner", "pilot.submit", "providers")), f"{path.name} imports {module}"


def test_mpi4py_only_imported_lazily():
    for path in PKG.rglob("*.py"):
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
    for path in PKG.rglob("*.py"):
        assert len(path.read_text().splitlines()) <= 450, f"{path} is over 450 lines: split it"
