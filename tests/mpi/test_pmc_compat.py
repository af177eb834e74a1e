"""What a pegasus-mpi-cluster user's DAG, rescue log or script expects, under the real mpiexec."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.mpi.helpers import run_pilot
from tests.unit.test_master_sim import PMC_PRIORITY_DAG

pytestmark = pytest.mark.mpi


def test_pmc_priority_test_dag(dagfile):
    """PMC's own test: one worker, --host-cpus 2, the 2-CPU task D (priority 8) right after I."""
    res = run_pilot(
        ["-v", "-v", "-s", "-o", os.devnull, "-e", os.devnull, "--host-cpus", "2", dagfile(PMC_PRIORITY_DAG)], n=2
    )
    assert res.returncode == 0, res.stderr
    assert re.findall(r"\[trace\] Scheduling task (\w)", res.stderr) == list("GIDEON")


def test_rescue_log_written_by_pmc(dagfile, tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    dag = dagfile("".join(f"TASK {t} /usr/bin/touch {runs}/{t}\n" for t in "ABCD") + "EDGE A B\nEDGE B C\nEDGE C D\n")
    Path(dag + ".rescue").write_bytes(b"\nDONE A\nDONE B")  # as PMC writes it: no newline at the end
    res = run_pilot([dag])
    assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in runs.iterdir()) == ["C", "D"]
    assert Path(dag + ".rescue").read_text() == "DONE A\nDONE B\nDONE C\nDONE D\n"


def test_max_failures_with_tries(dagfile, tmp_path):
    """-m 1 -t 2: A's last failure stops the run; nothing queued behind it starts; failed= counts A once."""
    runs = tmp_path / "runs"
    runs.mkdir()
    dag = dagfile("TASK A /bin/false\n" + "".join(f"TASK {t} /usr/bin/touch {runs}/{t}\n" for t in "BCD"))
    res = run_pilot(["-m", "1", "-t", "2", dag], n=2)
    assert res.returncode == 1
    assert list(runs.iterdir()) == []
    assert "submitted=2, succeeded=0, failed=1" in res.stdout
    assert res.stderr.count("Task A failed") == 2 and "Max failures reached" in res.stderr


def test_affinity_of_multi_cpu_tasks(dagfile):
    cpus = os.cpu_count() or 1
    if cpus < 2:
        pytest.skip("needs 2 CPUs")
    show = "/bin/sh -c 'echo $PMC_TASK=${PMC_AFFINITY-none}; grep Cpus_allowed_list /proc/self/status'"
    dag = dagfile(f"TASK wide -c 2 {show}\nTASK narrow {show}\n")
    res = run_pilot(["--set-affinity", dag])
    assert res.returncode == 0, res.stderr
    assert "wide=0,1\n" in res.stdout and "narrow=none\n" in res.stdout
    wide = res.stdout.split("wide=0,1\n", 1)[1].splitlines()[0]
    assert wide.split()[-1] == "0-1"
    plain = run_pilot(["-s", dag])  # without --set-affinity the numbers are only announced
    assert "wide=0,1\n" in plain.stdout
    assert plain.stdout.split("wide=0,1\n", 1)[1].splitlines()[0].split()[-1] != "0-1" or cpus == 2
    bad = run_pilot(["--set-affinity", "--host-cpus", "2", dag])
    assert bad.returncode == 2 and "--host-cpus is not compatible with --set-affinity" in bad.stderr


def test_integers_read_like_pmc(dagfile):
    res = run_pilot(["-t", "2.5", "-m", "1x", dagfile("TASK a -p 1.5 -t 2.5 -c 0 /bin/true\n")])
    assert res.returncode == 0, res.stderr


def test_host_script_words(dagfile, tmp_path):
    script = tmp_path / "hs.sh"
    script.write_text("#!/bin/sh\necho HOSTSCRIPT stdout\n")
    script.chmod(0o755)
    res = run_pilot(["-v", "--host-script", str(script), dagfile("TASK a /bin/true\n")])
    assert res.returncode == 0, res.stderr
    assert "Worker 1: Launching host script" in res.stderr and "Host script exited with status 0" in res.stderr
    assert "HOSTSCRIPT stdout" in res.stderr
    bad = run_pilot(["--host-script", "/bin/false", dagfile("TASK a /bin/true\n", "b.dag")])
    assert bad.returncode == 1 and "Host script failed" in bad.stderr


@pytest.mark.timing
def test_jobstate_submit_when_ready_so_queue_time_is_the_wait_for_a_slot(dagfile):
    """PMC logs SUBMIT when a task becomes ready and EXECUTE when it starts (monitord's queue time is the gap):
    on one worker the third of three ready 0.3 s tasks waits about 0.6 s; a child's SUBMIT follows its parent's end."""
    dag = dagfile("TASK a /bin/sleep 0.3\nTASK b /bin/sleep 0.3\nTASK c /bin/sleep 0.3\nTASK d /bin/true\nEDGE c d\n")
    res = run_pilot(["-s", "--jobstate-log", dag], n=2)
    assert res.returncode == 0, res.stderr
    at: dict[tuple[str, str], float] = {}
    for line in (Path(dag).parent / "jobstate.log").read_text().splitlines():
        stamp, job, event = line.split()[:3]
        if job != "INTERNAL":
            at[job, event] = float(stamp)
    waits = sorted(at[t, "EXECUTE"] - at[t, "SUBMIT"] for t in "abc")
    assert waits[0] < 0.2 and 0.25 < waits[1] < 2 and 0.5 < waits[2] < 3
    assert at["d", "SUBMIT"] >= at["c", "JOB_TERMINATED"] > at["c", "EXECUTE"]
