"""Run ``pilot run`` under the real mpiexec."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import mpiexec


def pilot_cmd(args, n: int = 3, program: str = "run") -> list[str]:
    exe = mpiexec()
    if exe is None:
        pytest.skip("no mpiexec (pip install mpich)")
    if program == "run":
        return [exe, "-n", str(n), sys.executable, "-m", "pilot", "run", *args]
    return [exe, "-n", str(n), sys.executable, "-m", "pilot.cli.pmc", *args]


def run_pilot(args, n: int = 3, env: dict | None = None, timeout: float = 120, program: str = "run", cwd=None):
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        pilot_cmd(args, n, program), capture_output=True, text=True, env=full_env, timeout=timeout, cwd=cwd
    )


def events(path: Path) -> list[tuple[str, ...]]:
    """A jobstate.log without its times, sorted (tasks of one level may start in either order)."""
    return sorted(tuple(line.split()[1:]) for line in path.read_text().splitlines())
