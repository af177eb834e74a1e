"""Under srun --kill-on-bad-exit=0 on the real Slurm, a task that kills its worker costs only that worker."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from tests.integration.slurm import require_slurm, sbatch, wait_gone
from tests.mpi.test_crashes import EXAMPLE

pytestmark = pytest.mark.slurm


def test_one_run_ends_with_the_killer_failed_and_the_rest_done(tmp_path):
    """Three workers: bad kills two of them (its two crashes), c and d run on, all in one pilot run."""
    require_slurm()
    dag = tmp_path / "k.dag"
    dag.write_text(EXAMPLE)
    script = tmp_path / "job.sh"
    script.write_text(
        "#!/bin/bash\n#SBATCH --ntasks=4\n"
        f"#SBATCH --output={tmp_path}/job.out\n#SBATCH --error={tmp_path}/job.err\n"
        f"cd {shlex.quote(str(tmp_path))}\n"
        f"srun --mpi=pmi2 --kill-on-bad-exit=0 {shlex.quote(sys.executable)} -m pilot run --jobstate-log k.dag\n"
    )
    wait_gone([sbatch(str(script), cwd=str(tmp_path))], timeout=120)
    err = (tmp_path / "job.err").read_text()
    result = json.loads(Path(f"{dag}.result").read_text())
    assert (result["reason"], result["done"], result["unfinished"]) == ("failed", 3, ["bad"]), err
    # its only failure is the task its crashes stopped: pilot submit spends no retry on the cluster
    assert (result["failed"], result["aborted"], result["crashed"]) == (1, False, {"bad": 2}), result
    assert err.count("died while running task bad; the run goes on without it") == 2
    assert "task bad was running when its worker died 2 times: not started again" in err
    assert Path(f"{dag}.crashes").read_text() == "CRASH bad\nCRASH bad\n"
    assert sorted(Path(f"{dag}.rescue").read_text().split()) == ["DONE", "DONE", "DONE", "a", "c", "d"]
    assert "[cluster-task name=d" in (tmp_path / "job.out").read_text()
