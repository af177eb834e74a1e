"""pilot run under mpiexec: the PMC contract end to end."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import DIAMOND_DAG
from tests.mpi.helpers import pilot_cmd, run_pilot
from tests.waiting import wait_for

pytestmark = pytest.mark.mpi

DIAMOND = DIAMOND_DAG


def test_diamond_merges_stdio_and_succeeds(dagfile):
    dag = dagfile(DIAMOND)
    res = run_pilot([dag])
    assert res.returncode == 0, res.stderr
    for t in "ABCD":
        assert f"I am {t}\n[cluster-task name={t}, start=" in res.stdout
    assert (
        res.stdout.rstrip()
        .splitlines()[-1]
        .startswith('[cluster-summary stat="ok", tasks=4, submitted=4, succeeded=4, failed=0')
    )
    assert "Workflow succeeded" in res.stderr and "Resource utilization (with master)" in res.stderr
    assert not list(Path(dag).parent.glob("wf.dag.out.*"))  # merged and removed
    assert Path(dag + ".rescue").read_text().count("DONE") == 4
    resource = Path(dag + ".resource").read_text().splitlines()
    assert all(re.fullmatch(r"\d+\.\d{6},\d+,\d+,\d+,\S+", line) for line in resource) and len(resource) >= 9


def test_pilot_mpi_cluster_is_the_same_program(dagfile):
    res = run_pilot(["--no-resource-log", dagfile(DIAMOND)], program="pmc")
    assert res.returncode == 0 and res.stdout.count("[cluster-task") == 4
    version = run_pilot(["-V"], program="pmc")
    assert (
        version.returncode == 0 and version.stdout.startswith("pilot-mpi-cluster ") and version.stdout.count("\n") == 1
    )


def test_one_rank_is_a_clear_error(dagfile):
    res = run_pilot([dagfile(DIAMOND)], n=1)
    assert res.returncode == 2
    assert res.stderr.strip().count("\n") == 0 and "At least one worker process is required" in res.stderr


@pytest.mark.parametrize(
    "text,fragment",
    [
        ("TASK A /bin/true\nTASK A /bin/true\n", "wf.dag:2: duplicate task 'A'"),
        ("TASK A -m 10\n", "wf.dag:1: task 'A' has no executable"),
        ("TASK A -q 1 /bin/true\n", "wf.dag:1: task 'A': unknown task option '-q'"),
        ("TASK A /bin/true\nEDGE A B\n", "wf.dag:2: EDGE names unknown task 'B'"),
        ("TASK A /bin/true\nTASK B /bin/true\nEDGE A B\nEDGE B A\n", "cycle: A -> B -> A"),
        ("TASK A -m -1 /bin/true\n", "must not be negative"),
    ],
)
def test_bad_dag_is_one_line_under_mpi(dagfile, text, fragment):
    res = run_pilot([dagfile(text)])
    assert res.returncode == 2
    assert fragment in res.stderr and res.stderr.strip().count("\n") == 0 and "Traceback" not in res.stderr
    verbose = run_pilot(["-v", dagfile(text)])
    assert "Traceback" in verbose.stderr


def test_bad_option_is_one_line_under_mpi(dagfile):
    res = run_pilot(["--no-such-option", dagfile(DIAMOND)])
    assert res.returncode == 2 and res.stderr.strip().count("\n") == 0 and "unrecognized arguments" in res.stderr


def test_infeasible_task_aborts_before_anything_runs(dagfile, tmp_path):
    marker = tmp_path / "ran"
    dag = dagfile(f"TASK small /usr/bin/touch {marker}\nTASK big -c 4 -m 100 /bin/true\n")
    res = run_pilot(["--host-cpus", "2", dag])
    assert res.returncode == 1 and not marker.exists()
    assert (
        "wf.dag:2: FATAL ERROR: No host is capable of running task big: it requests 4 CPU(s), 100 MB memory"
        in res.stderr
    )


def test_failure_exit_status_and_kept_worker_files(dagfile, tmp_path):
    dag = dagfile("TASK A /bin/echo hello\nTASK B /bin/sh -c 'echo bad >&2; exit 3'\nTASK C /bin/true\nEDGE B C\n")
    res = run_pilot([dag])
    assert res.returncode == 1
    assert "hello" in res.stdout and "bad" in res.stderr  # merged even on failure
    assert 'stat="failed", tasks=3, submitted=2, succeeded=1, failed=1' in res.stdout
    assert "Task B failed with exitcode 3" in res.stderr and "2 of 3 tasks not done (B, C)" in res.stderr
    kept = sorted(p.name for p in tmp_path.glob("wf.dag.*.[12]"))
    assert kept  # per-worker files stay after a failed run
    assert "status=3" in "".join((tmp_path / k).read_text() for k in kept if ".out." in k)


@pytest.mark.parametrize("pairs, ranks", [(2, 2), (3, 3), (6, 2)])
def test_failed_tasks_with_children_end_the_run_as_failed(dagfile, tmp_path, pairs, ranks):
    """Once tasks are short the master sends a child ahead with its parent; a parent that fails before the child
    reaches its worker must not take the master down, and the child must not run."""
    marker = tmp_path / "child-ran"
    text = "".join(f"TASK P{i} /bin/false\nTASK C{i} /bin/touch {marker}{i}\nEDGE P{i} C{i}\n" for i in range(pairs))
    dag = dagfile(text)
    for _ in range(3):  # the race is between messages: try it more than once
        for leftover in tmp_path.glob("wf.dag.*"):
            leftover.unlink()
        res = run_pilot([dag], n=ranks)
        assert res.returncode == 1, res.stderr
        assert "internal error" not in res.stderr and "not running" not in res.stderr
        assert f'stat="failed", tasks={2 * pairs}, submitted={pairs}, succeeded=0, failed={pairs}' in res.stdout
        assert not list(tmp_path.glob("child-ran*")), "a child ran although its parent failed"
        assert Path(dag + ".rescue").read_text() == ""


def test_tries_and_per_task_stdio_numbering(dagfile, tmp_path):
    counter = tmp_path / "count"
    script = f"n=$(cat {counter} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {counter}; echo try $n; [ $n -ge 3 ]"
    dag = dagfile(f"TASK flaky -t 3 /bin/sh -c '{script}'\nTASK once /bin/echo single\n")
    res = run_pilot(["--per-task-stdio", dag])
    assert res.returncode == 0, res.stderr
    assert [(tmp_path / f"flaky.out.{i:03d}").read_text().splitlines()[0] for i in range(3)] == [
        "try 1",
        "try 2",
        "try 3",
    ]
    assert not (tmp_path / "flaky.out.003").exists()
    assert (tmp_path / "once.out.000").read_text().startswith("single\n[cluster-task name=once,")
    assert "submitted=4, succeeded=2, failed=0" in res.stdout  # retried attempts are not failures
    rerun = run_pilot(["--per-task-stdio", "-s", dag])  # numbers continue after existing files
    assert rerun.returncode == 0 and (tmp_path / "once.out.001").exists()


def test_global_tries_and_max_failures(dagfile):
    tasks = "".join(f"TASK f{i} /bin/false\n" for i in range(6))
    res = run_pilot(["-t", "2", "-m", "1", dagfile(tasks)])
    assert res.returncode == 1
    assert "Max failures reached" in res.stderr
    submitted = int(re.search(r"submitted=(\d+)", res.stdout).group(1))
    assert submitted < 12  # stopped releasing work


def test_stdout_stderr_files(dagfile, tmp_path):
    dag = dagfile("TASK A /bin/sh -c 'echo out-A; echo err-A >&2'\nTASK B /bin/sh -c 'echo out-B; echo err-B >&2'\n")
    res = run_pilot(["-o", str(tmp_path / "o.txt"), "-e", str(tmp_path / "e.txt"), dag])
    assert res.returncode == 0
    out = (tmp_path / "o.txt").read_text()
    assert "out-A\n[cluster-task name=A" in out and "out-B\n[cluster-task name=B" in out
    assert set((tmp_path / "e.txt").read_text().split()) == {"err-A", "err-B"}
    assert "out-A" not in res.stdout and "[cluster-summary" in res.stdout


def test_no_interleaving_within_a_task(dagfile, tmp_path):
    writer = "import sys\nfor i in range(2000): sys.stdout.write(f'{sys.argv[1]} line {i}\\n'); sys.stdout.flush()"
    (tmp_path / "w.py").write_text(writer)
    tasks = "".join(f"TASK t{i} {sys.executable} {tmp_path / 'w.py'} t{i}\n" for i in range(6))
    res = run_pilot([dagfile(tasks)], n=4)
    assert res.returncode == 0
    lines = [x for x in res.stdout.splitlines() if " line " in x]
    blocks = [x.split()[0] for x in lines]
    # each task's 2000 lines are contiguous
    runs = [b for i, b in enumerate(blocks) if i == 0 or blocks[i - 1] != b]
    assert sorted(runs) == [f"t{i}" for i in range(6)]


def test_task_environment_and_annotation(dagfile):
    dag = dagfile(
        "#@ 12 tx::name ID12\nTASK envtask -m 5 -c 2 /bin/sh -c 'echo $PMC_TASK $PMC_MEMORY $PMC_CPUS $PMC_RANK $PMC_HOST_RANK'\n"
    )
    res = run_pilot(["--host-cpus", "4", dag])
    assert res.returncode == 0
    fields = res.stdout.splitlines()[0].split()
    assert fields[:3] == ["envtask", "5", "2"] and fields[3] in ("1", "2") and fields[4] in ("0", "1")
    assert "[cluster-task id=12, name=envtask," in res.stdout and "cpus=2, memory=5]" in res.stdout


def test_mpi_start_settings_stay_out_of_tasks(dagfile):
    """UCX_MEM_EVENTS=no, heavy yield and (all ranks on one host) UCX_TLS speed up MPI's start only:
    tasks see the job's environment as it was."""
    dag = dagfile(
        "TASK e /bin/sh -c 'echo ucx=${UCX_MEM_EVENTS-unset} yield=${MPIR_CVAR_ENABLE_HEAVY_YIELD-unset} "
        "tls=${UCX_TLS-unset}'\n"
    )
    env = {
        k: v for k, v in os.environ.items() if k not in ("UCX_MEM_EVENTS", "MPIR_CVAR_ENABLE_HEAVY_YIELD", "UCX_TLS")
    }
    res = subprocess.run(pilot_cmd(["-s", dag], 3, "run"), capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0 and "ucx=unset yield=unset tls=unset\n" in res.stdout
    # Set before the MPI library loads: UCX reads it then, and warns of a variable set later as unused.
    assert "unused environment variable" not in res.stdout + res.stderr
    res = run_pilot(["-s", dag], env={"UCX_MEM_EVENTS": "yes", "UCX_TLS": "all"})
    assert res.returncode == 0 and "ucx=yes yield=unset tls=all\n" in res.stdout


def test_ranks_leave_without_the_interpreters_teardown_and_lose_nothing(dagfile, tmp_path):
    # Each rank ends MPI and exits through the C library after its run: no Python-level
    # exit handler runs (the teardown is skipped), yet every record is out, the exit status
    # is the run's, and the launcher saw every rank end MPI (a rank that left without it
    # would have had the others killed: "YOUR APPLICATION TERMINATED ... signal 9").
    dag = dagfile("".join(f"TASK t{i} /bin/echo line {i}\n" for i in range(300)) + "TASK bad /bin/false\n")
    marks = tmp_path / "atexit"
    marks.mkdir()
    code = (
        "import atexit, os, sys\n"
        "atexit.register(lambda: open(os.path.join(sys.argv[1], os.environ.get('PMI_RANK', 'x')), 'w').close())\n"
        "from pilot.cli.main import main\n"
        "sys.exit(main(['run', '-s', sys.argv[2]]))\n"
    )
    exe = pilot_cmd([], 3, "run")[0]
    for _ in range(4):
        res = subprocess.run(
            [exe, "-n", "3", sys.executable, "-c", code, str(marks), dag], capture_output=True, text=True, timeout=120
        )
        assert res.returncode == 1, res.stderr
        assert "TERMINATED" not in res.stderr and "Workflow failed: 1 of 301 tasks not done (bad)" in res.stderr
        lines = res.stdout.splitlines()
        assert sum(line.startswith("[cluster-task ") for line in lines) == 301
        assert {f"line {i}" for i in range(300)} <= set(lines)
        assert lines[-1].startswith('[cluster-summary stat="failed", tasks=301, submitted=301, succeeded=300, failed=1')
    assert not list(marks.iterdir())
    # A rank that never started MPI (a usage error, found before) exits as any program does.
    res = subprocess.run(
        [exe, "-n", "2", sys.executable, "-c", code.replace("'-s'", "'--no-such-option'"), str(marks), dag],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2 and sorted(p.name for p in marks.iterdir()) == ["0", "1"]


def test_host_memory_limits_concurrency(dagfile, tmp_path):
    log = tmp_path / "spans"
    step = f"/bin/sh -c 'echo start $(date +%s.%N) >> {log}; sleep 0.3; echo end $(date +%s.%N) >> {log}'"
    dag = dagfile("".join(f"TASK m{i} -m 60 {step}\n" for i in range(4)))
    res = run_pilot(["--host-memory", "100", dag], n=4)
    assert res.returncode == 0, res.stderr
    depth = peak = 0
    events = sorted((float(t), k) for k, t in (x.split() for x in log.read_text().splitlines()))
    for _, kind in events:
        depth += 1 if kind == "start" else -1
        peak = max(peak, depth)
    assert peak == 1


def test_env_alias_host_cpus(dagfile):
    dag = dagfile("TASK a -c 3 /bin/true\n")
    assert run_pilot([dag], env={"PMC_HOST_CPUS": "2"}).returncode == 1
    assert run_pilot(["-s", dag], env={"PMC_HOST_CPUS": "4"}).returncode == 0


def test_no_resource_log(dagfile):
    dag = dagfile(DIAMOND)
    assert run_pilot(["--no-resource-log", dag]).returncode == 0
    assert not Path(dag + ".resource").exists()


def test_lock_held_for_whole_run(dagfile, tmp_path):
    started = tmp_path / "started"
    dag = dagfile(f"TASK slow /bin/sh -c 'touch {started}; exec sleep 3'\n")
    first = subprocess.Popen(pilot_cmd([dag]), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(started.exists, 60, "the first run's task")  # well past parsing
        second = run_pilot(["-r", dag + ".other", dag])
        assert second.returncode == 1 and "locked by another pilot run" in second.stderr
        assert second.stderr.strip().count("\n") == 0
        unlocked = run_pilot(["-n", "-r", dag + ".third", "-s", dagfile("TASK quick /bin/true\n", "q.dag")])
        assert unlocked.returncode == 0
        nolock_same = run_pilot(["-n", "-s", "-r", dag + ".fourth", dag])
        assert nolock_same.returncode == 0
    finally:
        out, err = first.communicate(timeout=60)
    assert first.returncode == 0, err


def _master_pid(dag: str) -> int | None:
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            if dag.encode() not in cmd or b"pilot" not in cmd:
                continue
            env = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"PMI_RANK=0" in env:
            return int(entry)
    return None


def test_rescue_after_master_sigkill(dagfile, tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    task = f"/bin/sh -c 'touch {runs}/$PMC_TASK.$$; sleep 0.05'"
    names = [f"t{i:02d}" for i in range(60)]
    text = "".join(f"TASK {n} {task}\n" for n in names)
    text += "".join(f"EDGE t{i:02d} t{i + 30:02d}\n" for i in range(30))
    dag = dagfile(text)
    proc = subprocess.Popen(pilot_cmd([dag]), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rescue = Path(dag + ".rescue")
    wait_for(lambda: rescue.exists() and rescue.read_text().count("DONE") >= 15, 30, "15 tasks done", every=0.02)
    pid = _master_pid(dag)
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode != 0
    first_text = rescue.read_text()
    assert first_text.endswith("\n")
    done_first = {line.split()[1] for line in first_text.splitlines()}
    assert all(re.fullmatch(r"DONE t\d\d", line) for line in first_text.splitlines())
    assert 15 <= len(done_first) < 60
    before = {p.name for p in runs.iterdir()}
    res = run_pilot([dag])
    assert res.returncode == 0, res.stderr
    after = {p.name for p in runs.iterdir()} - before
    rerun_tasks = {name.split(".")[0] for name in after}
    assert not rerun_tasks & done_first  # nothing already DONE ran again
    lines = rescue.read_text().splitlines()
    assert sorted(lines) == sorted(f"DONE {n}" for n in names)  # each task DONE exactly once


def test_append_stdio_as_pegasus_mpi_cluster(dagfile, tmp_path):
    """PMC's own test_append_stdio: what the per-worker files already hold is merged too."""
    dag = dagfile(DIAMOND_DAG, "diamond.dag")
    Path(dag + ".out.1").write_text("onefish my stdout\n")
    Path(dag + ".err.1").write_text("twofish my stderr\n")
    res = run_pilot(["-v", dag], n=2)
    assert res.returncode == 0, res.stderr
    assert "onefish my stdout" in res.stdout and "twofish my stderr" in res.stderr
    assert not list(tmp_path.glob("diamond.dag.out.*")) and not Path(dag + ".merged").exists()


def test_a_failed_run_and_its_rerun_merge_each_output_once(dagfile, tmp_path):
    flag = tmp_path / "fixed"
    dag = dagfile(
        f"TASK A /bin/echo out-A\nTASK B /bin/sh -c 'echo out-B; test -e {flag}'\nTASK C /bin/echo out-C\n" "EDGE B C\n"
    )
    first = run_pilot([dag])
    assert first.returncode == 1 and first.stdout.count("out-A") == 1 and first.stdout.count("out-B") == 1
    assert Path(dag + ".merged").exists()  # how much of each kept file this run merged
    flag.write_text("")
    again = run_pilot([dag])
    assert again.returncode == 0, again.stderr
    # the first run's part was merged by the first run: only B's new try and C are new here
    assert "out-A" not in again.stdout and again.stdout.count("out-B") == 1 and again.stdout.count("out-C") == 1
    assert not Path(dag + ".merged").exists() and not list(tmp_path.glob("wf.dag.out.*"))


def _pilot_ranks(dag: str) -> list[int]:
    """Pids of every rank of the pilot running ``dag`` (by their command lines)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if dag.encode() in cmd and b"pilot" in cmd and b"run" in cmd and int(entry) != os.getpid():
                pids.append(int(entry))
    return pids


def test_output_of_tasks_done_before_a_sigkill_of_the_whole_job_appears_once_after_the_rerun(dagfile, tmp_path):
    """The whole job SIGKILLed (every rank, as a batch system's kill does): no merge ran. The rerun merges what
    the killed run's workers wrote, each finished task's output and record once, and runs none of them again."""
    names = [f"t{i:02d}" for i in range(40)]
    dag = dagfile("".join(f"TASK {n} /bin/sh -c 'echo out-$PMC_TASK; sleep 0.05'\n" for n in names))
    proc = subprocess.Popen(
        pilot_cmd([dag]), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    rescue = Path(dag + ".rescue")
    wait_for(lambda: rescue.exists() and rescue.read_text().count("DONE") >= 10, 30, "10 tasks done", every=0.02)
    for pid in _pilot_ranks(dag):
        os.kill(pid, signal.SIGKILL)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    done_first = {line.split()[1] for line in rescue.read_text().splitlines()}
    assert 10 <= len(done_first) < 40
    res = run_pilot([dag])
    assert res.returncode == 0, res.stderr
    for n in names:
        if n in done_first:  # finished before the kill: its output and record, once
            assert res.stdout.count(f"out-{n}\n") == 1 and res.stdout.count(f"name={n},") == 1, n
        else:  # run in the rerun (a killed attempt's output may precede it)
            assert res.stdout.count(f"out-{n}\n") >= 1 and res.stdout.count(f"name={n},") >= 1, n
    assert "tasks=40, submitted=" in res.stdout and f"succeeded={40 - len(done_first)}," in res.stdout
