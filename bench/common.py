"""Helpers shared by the benchmark scripts: the MPI launcher and timing a command."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time


def mpiexec() -> str:
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return here if os.path.exists(here) else (shutil.which("mpiexec") or "mpiexec")


def pilot(ranks: int, *args: str) -> list[str]:
    return [mpiexec(), "-n", str(ranks), sys.executable, "-m", "pilot", "run", *args]


def timed(
    cmd: list[str],
    stdin: bytes | None = None,
    cwd: str | None = None,
    check: bool = True,
    env: dict[str, str] | None = None,
) -> float:
    start = time.perf_counter()
    subprocess.run(
        cmd, input=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=check, cwd=cwd, env=env
    )
    return time.perf_counter() - start


def write_dag(path: str, lines) -> str:
    with open(path, "w") as fh:
        fh.writelines(lines)
    return path
