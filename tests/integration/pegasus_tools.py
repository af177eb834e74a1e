"""The real pegasus-statistics on a submit directory, read as the tests compare it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from pilot.submit.monitord import pegasus_cli


def statistics(sub: Path) -> dict[str, list[str]]:
    """summary.txt's Tasks, Jobs and Sub-Workflows rows (skips the test where pegasus-wms is not installed)."""
    cmd = pegasus_cli("pegasus-statistics")
    if cmd is None:
        pytest.skip("pegasus-wms is not installed")
    res = subprocess.run([*cmd, "-s", "all", "."], cwd=sub, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    rows = {}
    for line in (sub / "statistics" / "summary.txt").read_text().splitlines():
        words = line.split()
        if words and words[0] in ("Tasks", "Jobs", "Sub-Workflows"):
            rows[words[0]] = words[1:]
    return rows
