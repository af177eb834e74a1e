"""``pilot run --inbox``: one long-lived run takes DAGs while it runs, each with the record its own run writes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pilot.contracts import inbox
from tests.mpi.helpers import events, pilot_cmd, run_pilot
from tests.waiting import wait_for

pytestmark = pytest.mark.mpi

CHAIN = "TASK a /bin/echo A\nTASK b /bin/echo B\nTASK c /bin/sh -c 'echo C >&2'\nEDGE a b\nEDGE b c\n"
FAN = "".join(f"TASK t{i} /bin/echo {i}\n" for i in range(6))
FAILING = "TASK ok /bin/true\nTASK bad /bin/false\nTASK after /bin/true\nEDGE bad after\n"
SLOW = "TASK slow /bin/sleep 60\n"
ARGS = ["--jobstate-log", "--invocation-records", "-o", "c.out", "-e", "c.err"]


def cluster(root: Path, name: str, text: str) -> Path:
    d = root / name
    d.mkdir()
    (d / "c.dag").write_text(text)
    return d


def start_agent(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen, Path]:
    box = tmp_path / "inbox"
    proc = subprocess.Popen(
        pilot_cmd(["--inbox", str(box), "--invocation-records", *extra], n=3),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return proc, box


def feed(box: Path, job_id: str, d: Path, args: list[str]) -> None:
    box.mkdir(exist_ok=True)
    inbox.write_request(
        str(box), inbox.Request(job_id, str(d / "c.dag"), args, str(d / "c.block.out"), str(d / "c.block.err"))
    )


def done(box: Path, *ids: str) -> list[int]:
    wait_for(lambda: all(inbox.read_done(str(box), i) is not None for i in ids), 60, f"{ids} done")
    return [inbox.read_done(str(box), i) for i in ids]  # type: ignore[misc]  # every done file is there: waited for above


def stop(proc: subprocess.Popen, box: Path) -> str:
    inbox.write_stop(str(box))
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return err


def tasks_of(out: Path) -> list[str]:
    return sorted(line.split(",")[0] for line in out.read_text().splitlines() if line.startswith("[cluster-task"))


def test_two_dags_in_one_run_write_what_their_own_runs_write(tmp_path):
    alone = tmp_path / "alone"
    alone.mkdir()
    for name, text in (("chain", CHAIN), ("fan", FAN)):
        d = cluster(alone, name, text)
        res = run_pilot([*ARGS, "c.dag"], cwd=d)
        assert res.returncode == 0, res.stderr
    fed = tmp_path / "fed"
    fed.mkdir()
    proc, box = start_agent(tmp_path)
    for name, text in (("chain", CHAIN), ("fan", FAN)):
        feed(box, name, cluster(fed, name, text), ARGS)
    assert done(box, "chain", "fan") == [0, 0]
    err = stop(proc, box)
    assert "chain: " in err and "fan: " in err
    for name in ("chain", "fan"):
        a, f = alone / name, fed / name
        assert events(f / "jobstate.log") == events(a / "jobstate.log")
        assert (f / "c.dag.rescue").read_text() == (a / "c.dag.rescue").read_text() or sorted(
            (f / "c.dag.rescue").read_text().split()
        ) == sorted((a / "c.dag.rescue").read_text().split())
        assert tasks_of(f / "c.out") == tasks_of(a / "c.out")
        assert '"reason": "done"' in (f / "c.dag.result").read_text()
        assert '[cluster-summary stat="ok"' in (f / "c.block.out").read_text()
        assert (f / "c.dag.resource").exists()
        assert not list(f.glob("c.dag.out.*")), "per-worker files merged and removed"
        # each task ran in its DAG's directory, as under its own run
        assert f"<cwd><![CDATA[{f}]]></cwd>" in (f / "c.out").read_text()
    assert (fed / "chain" / "c.err").read_text() == "C\n"


def test_failing_dag_keeps_its_tries_and_rescue_and_others_go_on(tmp_path):
    proc, box = start_agent(tmp_path)
    bad = cluster(tmp_path, "bad", FAILING)
    good = cluster(tmp_path, "good", CHAIN)
    feed(box, "bad", bad, [*ARGS, "-t", "2"])
    feed(box, "good", good, ARGS)
    assert done(box, "bad", "good") == [1, 0]
    stop(proc, box)
    log = (bad / "jobstate.log").read_text()
    assert log.count("bad EXECUTE") == 2 and "after" not in log  # two tries, its child never ready
    assert (bad / "c.dag.rescue").read_text().split().count("ok") == 1
    assert '"reason": "failed"' in (bad / "c.dag.result").read_text()
    # its log lines are in its own job stderr, as its own run would have written them; the other's are not
    err = (bad / "c.block.err").read_text()
    assert "task bad failed with exitcode 1" in err and "Workflow failed" in err and "good" not in err
    assert (
        "bad" not in (good / "c.block.err").read_text() and "Workflow succeeded" in (good / "c.block.err").read_text()
    )
    alone = tmp_path / "alone"
    alone.mkdir()
    d = cluster(alone, "bad", FAILING)
    assert run_pilot([*ARGS, "-t", "2", "c.dag"], cwd=d).returncode == 1
    assert events(bad / "jobstate.log") == events(d / "jobstate.log")


def test_monitord_hack_writes_the_dagman_out_of_each_dag(tmp_path):
    alone = cluster(tmp_path, "alone", CHAIN)
    assert run_pilot(["--jobstate-log", "--monitord-hack", "c.dag"], cwd=alone).returncode == 0
    proc, box = start_agent(tmp_path, "--per-task-stdio")
    fed = cluster(tmp_path, "fed", CHAIN)
    feed(box, "fed", fed, ["--jobstate-log", "--monitord-hack"])
    assert done(box, "fed") == [0]
    stop(proc, box)

    def node_lines(d: Path) -> list[str]:
        return [
            re.sub(r"\{[^}]*\}", "{time}", line.split(" ", 2)[2])
            for line in (d / "c.dag.dagman.out").read_text().splitlines()
            if "Node" in line
        ]

    assert node_lines(fed) == node_lines(alone)
    assert sorted(p.name for p in fed.glob("a.*")) == sorted(p.name for p in alone.glob("a.*"))


def test_cancel_ends_one_dag_and_stop_ends_the_run(tmp_path):
    proc, box = start_agent(tmp_path)
    slow = cluster(tmp_path, "slow", SLOW)
    feed(box, "slow", slow, ARGS)
    wait_for(
        lambda: (slow / "jobstate.log").exists() and "EXECUTE" in (slow / "jobstate.log").read_text(),
        30,
        "the slow task started",
    )
    inbox.write_cancel(str(box), "slow")
    assert done(box, "slow") == [1]
    assert '"reason": "signal"' in (slow / "c.dag.result").read_text()
    again = cluster(tmp_path, "again", CHAIN)  # the run goes on after a cancel
    feed(box, "again", again, ARGS)
    assert done(box, "again") == [0]
    still = cluster(tmp_path, "still", SLOW)
    feed(box, "still", still, ARGS)
    wait_for(
        lambda: (still / "jobstate.log").exists() and "EXECUTE" in (still / "jobstate.log").read_text(),
        30,
        "the second slow task started",
    )
    stop(proc, box)  # within the kill grace, not the task's 60 s
    assert inbox.read_done(str(box), "still") == 1
    assert '"reason": "signal"' in (still / "c.dag.result").read_text()


def test_a_request_that_cannot_start_is_answered(tmp_path):
    proc, box = start_agent(tmp_path)
    d = cluster(tmp_path, "bad", "TASK a\n")  # no command
    feed(box, "bad", d, ARGS)
    feed(box, "opts", cluster(tmp_path, "opts", CHAIN), ["--tries", "zero"])
    (box / "junk.request").write_text("{not json")
    assert done(box, "bad", "opts", "junk") == [2, 2, 2]
    assert '"reason": "error"' in (d / "c.dag.result").read_text()
    good = cluster(tmp_path, "good", CHAIN)
    feed(box, "good", good, ARGS)
    assert done(box, "good") == [0]
    err = stop(proc, box)
    assert "Traceback" not in err


def test_dag_required_without_inbox():
    res = subprocess.run([sys.executable, "-m", "pilot", "run"], capture_output=True, text=True, env=dict(os.environ))
    assert res.returncode == 2 and "workflow.dag" in res.stderr


def test_each_dag_keeps_its_own_wall_time_and_runtimes(tmp_path):
    """A fed DAG's --max-wall-time counts from when it was taken: a task its runtime says cannot finish is left for
    the next run (result walltime), while another DAG with time goes on in the same pilot run."""
    proc, box = start_agent(tmp_path)
    # 12 s: first fits; after its 3 s, long's 10 s no longer does (while 10 s fit the whole limit: it is held)
    short = cluster(
        tmp_path,
        "short",
        "#pilot runtime=3\nTASK first /bin/sleep 3\n#pilot runtime=10\nTASK long /bin/true\n" "EDGE first long\n",
    )
    roomy = cluster(tmp_path, "roomy", "#pilot runtime=10\nTASK long /bin/true\n")
    feed(box, "short", short, [*ARGS, "--max-wall-time", "0.2"])
    feed(box, "roomy", roomy, [*ARGS, "--max-wall-time", "5"])
    assert done(box, "short", "roomy") == [1, 0]
    stop(proc, box)
    assert '"reason": "walltime"' in (short / "c.dag.result").read_text()
    assert (short / "c.dag.rescue").read_text().split() == ["DONE", "first"]
    assert "left for the next run" in (short / "c.block.err").read_text()
    assert '"reason": "done"' in (roomy / "c.dag.result").read_text()


def test_an_inbox_that_cannot_be_made_is_one_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    res = run_pilot(["--inbox", str(blocker / "inbox")], n=2, timeout=60)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert f"--inbox {blocker / 'inbox'}: cannot create it" in res.stderr


def test_a_fed_dags_task_files_put_its_tasks_in_directories_of_their_own(tmp_path):
    # nonsharedfs in a pilot job: the cluster's task files travel with its request, the node-local storage is the
    # long-lived run's (its --local-scratch)
    local = tmp_path / "local"
    local.mkdir()
    proc, box = start_agent(tmp_path, "--local-scratch", str(local))
    d = cluster(tmp_path, "nonshared", "TASK A /bin/sh -c 'pwd > where.txt; echo tmp > scratch.tmp; echo A > a.txt'\n")
    (d / "c.dag.taskfiles").write_text('{"format": 1}\n["A", [], ["a.txt", "where.txt"], []]\n')
    feed(box, "nonshared", d, [*ARGS, "--task-files", "c.dag.taskfiles"])
    assert done(box, "nonshared") == [0]
    stop(proc, box)
    assert (d / "a.txt").read_text() == "A\n"
    assert (d / "where.txt").read_text().startswith(str(local) + "/pilot-")  # it ran on the node-local storage
    assert not (d / "scratch.tmp").exists() and not list(local.iterdir())  # its temporary file never reached d


def test_a_dag_holding_hosts_runs_there_alone_beside_one_that_shares_the_rest(tmp_path):
    """A cluster of several nodes fed with the hosts it holds whole runs only there, and another fed beside it
    runs only on the hosts left: as each had nodes of its own in the pilot job."""
    exe = pilot_cmd([])[0]
    base = [sys.executable, "-m", "pilot", "run", "--inbox", str(tmp_path / "inbox")]
    proc = subprocess.Popen(
        [
            exe,
            "-n",
            "1",
            "-env",
            "PILOT_HOSTNAME",
            "h0",
            *base,
            ":",
            "-n",
            "2",
            "-env",
            "PILOT_HOSTNAME",
            "h1",
            *base,
            ":",
            "-n",
            "2",
            "-env",
            "PILOT_HOSTNAME",
            "h2",
            *base,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    box = tmp_path / "inbox"
    text = "".join(f"TASK t{i} /bin/sleep 0.3\n" for i in range(6))
    wide, narrow = cluster(tmp_path, "wide", text), cluster(tmp_path, "narrow", text)
    box.mkdir(exist_ok=True)
    inbox.write_request(str(box), inbox.Request("wide", str(wide / "c.dag"), ARGS, None, None, ["h1.example.org"]))
    feed(box, "narrow", narrow, ARGS)
    assert done(box, "wide", "narrow") == [0, 0]
    stop(proc, box)
    hosts = {d.name: set(re.findall(r'hostname="([^"]+)"', (d / "c.out").read_text())) for d in (wide, narrow)}
    assert hosts == {"wide": {"h1"}, "narrow": {"h2"}}


def rank_zero(box: Path) -> int:
    """The pid of the pilot run's master (rank 0) reading ``box``."""
    for entry in os.listdir("/proc"):
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            env = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
        except (OSError, ValueError):
            continue
        if str(box).encode() in argv and b"python" in argv[0] and b"PMI_RANK=0" in env:
            return int(entry)
    raise AssertionError(f"no rank 0 reads {box}")


def test_a_dag_whose_task_is_killed_just_before_the_run_is_signalled_ends_as_signalled(tmp_path):
    """Ending a pilot job signals its nodes one by one: a task may be killed, and reported, before the master's
    own SIGTERM. Its DAG then ends as signalled (it resumes elsewhere), not as failed (a retry spent)."""
    proc, box = start_agent(tmp_path)
    wait_for(lambda: (box / inbox.UP_FILE).exists(), 60, "the run's workers to be up")
    d = cluster(tmp_path, "c", f"TASK t /bin/sh -c 'touch {tmp_path}/killed; kill -9 $$'\nTASK u /bin/true\nEDGE t u\n")
    feed(box, "c", d, ARGS)
    wait_for(lambda: (tmp_path / "killed").exists(), 60, "the task to be killed")
    os.kill(rank_zero(box), 15)
    assert done(box, "c") == [1]
    proc.communicate(timeout=60)
    assert '"reason": "signal"' in (d / "c.dag.result").read_text()
