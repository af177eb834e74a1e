"""pilot plan and pilot submit on a disk that fills: exit 1 with the one line saying what to run, and that works.

The disk is a small tmpfs (tests.smalldisk), filled but for a few KiB by a
file whose removal is "free space"; the tests are skipped, saying so, where no
tmpfs can be mounted.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pilot.cli.demo import bundled_workflow
from pilot.contracts.clusters import is_submit_dir
from tests.smalldisk import fill, small_disk

TIMEOUT = 300


def pilot(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pilot", *args], capture_output=True, text=True, cwd=cwd, timeout=TIMEOUT
    )


def test_a_plan_cut_short_by_a_full_disk_says_how_to_plan_again_and_that_works(tmp_path):
    with small_disk(tmp_path / "disk", 2048) as disk:
        filler = fill(disk, 64)  # the plan of the diamond takes some 270 KiB
        sub = disk / "sub"
        plan = ["plan", "--site", "local", "--cluster", "label", bundled_workflow(), "--dir", str(sub)]
        first = pilot(*plan, cwd=disk)
        assert first.returncode == 1, first.stderr
        assert first.stderr == (
            f"pilot plan: cannot write the plan in {sub}: No space left on device; free space and "
            f"plan again with --dir {sub} --force (over the partial plan)\n"
        )
        filler.unlink()
        again = pilot(*plan, "--force", cwd=disk)
        assert again.returncode == 0, again.stderr
        assert is_submit_dir(str(sub))
        status = pilot("status", str(sub), cwd=disk)
        assert status.returncode == 3 and "waiting" in status.stdout  # planned, nothing run yet


@pytest.mark.mpi
def test_a_submission_cut_short_by_a_full_disk_resumes_once_there_is_room(tmp_path):
    with small_disk(tmp_path / "disk", 2048) as disk:
        sub = disk / "sub"
        planned = pilot(
            "plan", "--site", "local", "--cluster", "label", bundled_workflow(), "--dir", str(sub), cwd=disk
        )
        assert planned.returncode == 0, planned.stderr
        filler = fill(disk, 40)
        first = pilot("submit", "--no-monitord", "--poll", "0.5", str(sub), cwd=disk)
        assert first.returncode == 1, first.stderr
        last = first.stderr.splitlines()[-1]
        assert last.startswith("pilot submit: cannot write ") and last.endswith(
            f": No space left on device; free space and resume with: pilot submit {sub}"
        ), first.stderr
        assert "Traceback" not in first.stderr and "internal error" not in first.stderr
        filler.unlink()
        again = pilot("submit", "--no-monitord", "--poll", "0.5", str(sub), cwd=disk)
        assert again.returncode == 0, again.stderr
        assert "13/13 tasks done" in again.stderr and again.stdout.rstrip().endswith("Success")
