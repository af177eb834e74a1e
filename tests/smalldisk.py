"""A small tmpfs for tests of a disk that fills up, and a file that fills it; skipped where mount(2) is refused."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def small_disk(where: Path, size_kib: int) -> Iterator[Path]:
    """``where``, a tmpfs of ``size_kib`` KiB until the end of the block (the test is skipped, saying why, where
    it cannot be mounted: mounting needs root)."""
    where.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_kib}k", "tmpfs", str(where)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(
            f"cannot mount a tmpfs here ({mounted.stderr.strip() or 'mount failed'}): run as root to test a "
            "disk that fills"
        )
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(disk: Path, leave_kib: int) -> Path:
    """A file that leaves ``leave_kib`` KiB free on ``disk``; removing it is "free space"."""
    stat = os.statvfs(disk)
    free_kib = stat.f_bavail * stat.f_frsize // 1024
    filler = disk / "filler"
    filler.write_bytes(b"\0" * max(0, free_kib - leave_kib) * 1024)
    return filler
