"""The task that kills its worker, under pilot submit: named, failed, resubmissions ended, the rest done."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import mpiexec
from tests.planner.wf import api

pytestmark = pytest.mark.mpi
PILOT = [sys.executable, "-m", "pilot"]


def test_pilot_submit_stops_the_task_that_kills_its_worker_and_runs_the_rest(tmp_path):
    if mpiexec() is None:
        pytest.skip("no mpiexec (pip install mpich)")
    tc = api.TransformationCatalog().add_transformations(
        *(
            api.Transformation(n, site="local", pfn=p, is_stageable=False)
            for n, p in (("true", "/bin/true"), ("sh", "/bin/sh"), ("sleep", "/bin/sleep"))
        )
    )
    wf = api.Workflow("crash", infer_dependencies=False)
    a = api.Job("true", _id="a")
    bad = api.Job("sh", _id="bad").add_args("-c", "'sleep 0.5; kill -9 $PPID'")
    c = api.Job("sleep", _id="c").add_args("1")
    d = api.Job("true", _id="d")
    wf.add_jobs(a, bad, c, d).add_dependency(c, children=[d]).add_transformation_catalog(tc)
    wf.write(str(tmp_path / "crash.yml"))
    sub = tmp_path / "sub"
    res = subprocess.run(
        [
            *PILOT,
            "submit",
            "--site",
            "local",
            "--cluster",
            "whole",
            "--poll",
            "0.2",
            "--no-monitord",
            "--retry",
            "1",
            str(tmp_path / "crash.yml"),
            "--dir",
            str(sub),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 1, res.stderr
    # The pilot's own line in its batch job's stderr, and the invocation record monitord reads in the job output
    assert any(
        "task sh_bad was running when its worker died 2 times: not started again" in p.read_text()
        for p in (sub / "merge_crash").glob("pilot-*.sh.err")
    )
    assert "its worker died 2 times" in (sub / "merge_crash" / "merge_crash.out.003").read_text()
    status = subprocess.run([*PILOT, "status", str(sub)], capture_output=True, text=True, timeout=60).stdout
    # Named for what it did, as pilot submit named it; the retry was not spent on it: it would crash again
    assert "merge_crash: task sh_bad crashed its worker 2 times: not started again (--max-crashes)" in status, status
    assert "merge_crash: task sh_bad crashed its worker 2 times: not started again (--max-crashes)" in res.stderr
    assert (
        "merge_crash: failed: task sh_bad crashed its worker 2 times (--max-crashes); not retried: a task that "
        "crashes its worker does so again (4/6 done)"
    ) in res.stderr, res.stderr
    assert not (sub / "merge_crash" / "merge_crash.out.004").exists()  # no fourth run of the cluster
    lines = status.splitlines()
    totals = lines[next(i for i, line in enumerate(lines) if line.startswith("UNREADY")) + 1].split()
    assert totals[3:5] == ["4", "1"]  # a, c, d and create-dir done; bad FAILED; cleanup never became ready
    crashes = (sub / "merge_crash" / "merge_crash.dag.crashes").read_text()
    assert crashes.count("CRASH sh_bad") == 2 and "CRASH sleep_c" not in crashes
