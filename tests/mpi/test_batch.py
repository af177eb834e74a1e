"""pilot run inside a batch job: wall time, signals, host scripts, forwarding, limits, logs."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import mpiexec
from tests.mpi.helpers import pilot_cmd, run_pilot
from tests.waiting import wait_for

pytestmark = pytest.mark.mpi

LOG_FLAGS = ["--jobstate-log", "--monitord-hack"]


def assert_result(dag: str, reason: str) -> None:
    from pilot.contracts.result import read_result

    result = read_result(dag)
    assert result is not None and result.outcome.value == reason and result.ok == (reason == "done")


def assert_logs_complete(dag: str, ok: bool) -> None:
    """Rescue log, jobstate.log and dagman.out are whole and closed."""
    d = Path(dag).parent
    rescue = Path(dag + ".rescue").read_text()
    assert rescue == "" or rescue.endswith("\n")
    assert all(re.fullmatch(r"DONE \S+", line) for line in rescue.splitlines())
    jobstate = (d / "jobstate.log").read_text().splitlines()
    assert jobstate[0].endswith("INTERNAL *** PMC_STARTED ***")
    assert jobstate[-1].endswith(f"INTERNAL *** PMC_FINISHED {0 if ok else 1} ***")
    assert all(
        re.fullmatch(
            r"\d+\.\d{6} (INTERNAL \*\*\* .* \*\*\*|\S+ (SUBMIT|EXECUTE|JOB_TERMINATED) \d+\.0 - - \d+|\S+ JOB_(SUCCESS|FAILURE) -?\d+ - - \d+)",
            x,
        )
        for x in jobstate
    )
    out = Path(dag + ".dagman.out").read_text()
    assert out.endswith(f"EXITING WITH STATUS {0 if ok else 1}\n")
    submitted = {m for m in re.findall(r"ULOG_EXECUTE for HTCondor Node (\S+) \((\d+)\.0\.0\)", out)}
    ended = {m for m in re.findall(r"ULOG_JOB_TERMINATED for HTCondor Node (\S+) \((\d+)\.0\.0\)", out)}
    assert submitted == ended  # every started attempt has its end recorded


@pytest.mark.timing
def test_wall_time_aborts_and_rerun_resumes(dagfile, tmp_path):
    dag = dagfile(
        "TASK quick /bin/true\nTASK slow /bin/sleep 60\nTASK stubborn /bin/sh -c 'trap : TERM; while :; do sleep 0.1; done'\n"
        "TASK after /bin/true\nEDGE quick after\nEDGE slow after\n"
    )
    start = time.monotonic()
    res = run_pilot([*LOG_FLAGS, "--max-wall-time", "0.05", dag], n=4)
    elapsed = time.monotonic() - start
    assert res.returncode == 1
    assert elapsed < 3 + 5 + 2  # limit + 5 s (+ start-up)
    assert "max wall time of 0.05 minutes reached" in res.stderr
    assert '[cluster-summary stat="failed"' in res.stdout
    assert Path(dag + ".rescue").read_text() == "DONE quick\n"
    assert_logs_complete(dag, ok=False)
    assert_result(dag, "walltime")
    fixed = dagfile(
        "TASK quick /bin/true\nTASK slow /bin/true\nTASK stubborn /bin/true\nTASK after /bin/true\n"
        "EDGE quick after\nEDGE slow after\n"
    )
    res = run_pilot([*LOG_FLAGS, fixed], n=4)
    assert res.returncode == 0, res.stderr
    assert "submitted=3, succeeded=3" in res.stdout  # quick was not run again


@pytest.mark.timing
def test_wall_time_from_environment(dagfile):
    dag = dagfile("TASK slow /bin/sleep 60\n")
    start = time.monotonic()
    res = run_pilot([dag], env={"PMC_MAX_WALL_TIME": "0.02"})
    assert res.returncode == 1 and time.monotonic() - start < 10


def _wait_for(path: Path, text: str, timeout: float = 20) -> None:
    wait_for(lambda: path.exists() and text in path.read_text(), timeout, f"{text!r} in {path}", every=0.05)


@pytest.mark.parametrize("target", ["master", "mpiexec"])
def test_sigterm_takes_the_wall_time_path(dagfile, tmp_path, target):
    dag = dagfile("TASK quick /bin/true\nTASK slow /bin/sleep 60\nTASK slow2 /bin/sleep 60\n")
    proc = subprocess.Popen(
        pilot_cmd([*LOG_FLAGS, dag], n=3), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    _wait_for(Path(dag + ".dagman.out"), "Node quick job proc")
    # Signalled while both slow tasks run, with quick's DONE on record.
    _wait_for(Path(dag + ".rescue"), "DONE quick\n")
    for task in ("slow", "slow2"):
        _wait_for(Path(dag + ".dagman.out"), f"ULOG_EXECUTE for HTCondor Node {task} (")
    if target == "master":
        from tests.mpi.test_run import _master_pid

        os.kill(_master_pid(dag), signal.SIGTERM)
    else:
        proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode != 0
    assert Path(dag + ".rescue").read_text() == "DONE quick\n"
    assert_logs_complete(dag, ok=False)
    assert_result(dag, "signal")
    if target == "master":
        assert "SIGTERM received" in err and '[cluster-summary stat="failed"' in out


def test_log_files_complete_on_success_failure_and_max_failures(dagfile):
    dag = dagfile("TASK a /bin/true\nTASK b /bin/true\nEDGE a b\n")
    assert run_pilot([*LOG_FLAGS, dag]).returncode == 0
    assert_logs_complete(dag, ok=True)
    assert_result(dag, "done")
    for name, text, extra in [
        ("f.dag", "TASK a /bin/false\nTASK b /bin/true\nEDGE a b\n", []),
        (
            "m.dag",
            "TASK a /bin/false\nTASK b /bin/false\nTASK c /bin/sleep 0.5\nTASK d /bin/true\nEDGE c d\n",
            ["-m", "1"],
        ),
    ]:
        sub = Path(dag).parent / name.split(".")[0]
        sub.mkdir()
        path = str(sub / name)
        Path(path).write_text(text)
        assert run_pilot([*LOG_FLAGS, *extra, path]).returncode == 1
        assert_logs_complete(path, ok=False)
        assert_result(path, "failed")


SERVICE = r"""#!/bin/sh
# start a service the tasks use: a server on a unix socket that logs what it hears
echo "host script on $PILOT_HOSTNAME" >> {log}
nohup {python} -c '
import os, socket, sys
path = sys.argv[1] + "/" + os.environ["PILOT_HOSTNAME"] + ".sock"
s = socket.socket(socket.AF_UNIX); s.bind(path); s.listen(8)
open(path + ".pid", "w").write(str(os.getpid()))
while True:
    c, _ = s.accept(); data = c.recv(100)
    with open(sys.argv[1] + "/heard", "a") as fh: fh.write(data.decode() + "\n")
    c.close()
' {dir} > /dev/null 2>&1 &
while [ ! -e {dir}/$PILOT_HOSTNAME.sock.pid ]; do sleep 0.05; done
exit 0
"""

CLIENT = """import os, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1] + "/" + os.environ["PILOT_HOSTNAME"] + ".sock")
s.send(os.environ["PMC_TASK"].encode())
"""


def script(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    path.chmod(0o755)
    return str(path)


def _two_hosts(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """1 master + 2 workers on fake host h1 + 2 workers on fake host h2."""
    exe = mpiexec()
    base = [sys.executable, "-m", "pilot", "run", *args]
    cmd = [
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
    ]
    full = dict(os.environ)
    full.update(env or {})
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=full)


def test_host_script_runs_once_per_host_and_is_stopped(dagfile, tmp_path):
    log = tmp_path / "hostscript.log"
    service = script(tmp_path, "service.sh", SERVICE.format(log=log, python=sys.executable, dir=tmp_path))
    client = script(tmp_path, "client.py", CLIENT)
    dag = dagfile("".join(f"TASK t{i} {sys.executable} {client} {tmp_path}\n" for i in range(8)))
    res = _two_hosts(["--host-script", service, dag])
    assert res.returncode == 0, res.stderr
    assert sorted(log.read_text().split()) == sorted("host script on h1 host script on h2".split())
    assert sorted((tmp_path / "heard").read_text().split()) == sorted(f"t{i}" for i in range(8))
    for host in ("h1", "h2"):
        pid = int((tmp_path / f"{host}.sock.pid").read_text())
        wait_for(
            lambda: not Path(f"/proc/{pid}").exists(),  # noqa: B023 - called only within this iteration
            10,
            "the service started by the host script to end with the run",
            every=0.05,
        )


def test_host_script_failure_aborts(dagfile, tmp_path):
    marker = tmp_path / "ran"
    dag = dagfile(f"TASK t /usr/bin/touch {marker}\n")
    script = tmp_path / "bad.sh"
    script.write_text("#!/bin/sh\necho setting up\nexit 3\n")
    script.chmod(0o755)
    res = run_pilot([*LOG_FLAGS, dag], env={"PMC_HOST_SCRIPT": str(script)})
    assert res.returncode == 1 and not marker.exists()
    assert "Host script failed with status 3" in res.stderr
    assert res.stderr.strip().splitlines()[-1].count("Host script failed with status 3") == 1
    assert_logs_complete(dag, ok=False)
    assert_result(dag, "error")


@pytest.mark.timing
def test_host_script_timeout_aborts(dagfile, tmp_path):
    dag = dagfile("TASK t /bin/true\n")
    script = tmp_path / "slow.sh"
    script.write_text("#!/bin/sh\nsleep 30\n")
    script.chmod(0o755)
    start = time.monotonic()
    res = run_pilot(["--host-script", str(script), dag], env={"PILOT_HOST_SCRIPT_TIMEOUT": "1"})
    assert res.returncode == 1 and "Host script timed out after 1 seconds" in res.stderr
    assert time.monotonic() - start < 15


PIPE_WRITER = """import os, sys
fd = int(os.environ["A"])
for i in range(500):
    os.write(fd, ("%s %d;" % (sys.argv[1], i)).encode())
os.write(fd, b"\\n")
"""


def test_pipe_and_file_forwarding(dagfile, tmp_path):
    out_a, out_b = tmp_path / "a.txt", tmp_path / "b.txt"
    out_a.write_text("existing\n")  # forwarded files are appended to, never truncated
    writer = script(tmp_path, "pipe_writer.py", PIPE_WRITER)
    lines = []
    for i in range(6):
        lines.append(f"TASK p{i} -f A={out_a} {sys.executable} {writer} p{i}")
        src = tmp_path / f"f{i}.tmp"
        lines.append(f"TASK f{i} -F {src}={out_b} /bin/sh -c 'echo file{i} > {src}'")
    bad = script(
        tmp_path, "bad.sh", f"#!/bin/sh\necho NOPE > /proc/self/fd/$A\necho NOPE > {tmp_path / 'x.tmp'}\nexit 1\n"
    )
    lines.append(f"TASK failing -f A={out_a} -F {tmp_path / 'x.tmp'}={out_b} {bad}")
    dag = dagfile("\n".join(lines) + "\n")
    res = run_pilot(["--maxfds", "1", dag], n=4)
    assert res.returncode == 1, res.stderr  # only "failing" failed
    assert "Task failing failed" in res.stderr and res.stderr.count("failed with exitcode") == 1
    text = out_a.read_text().splitlines()
    assert text[0] == "existing"
    for line in text[1:]:  # one task's data is never split or interleaved with another's
        tag = line.split()[0]
        assert line == "".join(f"{tag} {i};" for i in range(500))
    assert sorted(line.split()[0] for line in text[1:]) == [f"p{i}" for i in range(6)]
    assert sorted(out_b.read_text().split()) == [f"file{i}" for i in range(6)]
    assert "NOPE" not in out_a.read_text() + out_b.read_text()  # nothing written for a failed task
    assert not list(tmp_path.glob("*.tmp"))  # sources deleted after reading, failed or not


def test_forwarding_write_failure_and_size_limit_fail_the_task(dagfile, tmp_path):
    big = tmp_path / "big.tmp"
    maker = script(tmp_path, "big.py", f"open({str(big)!r}, 'wb').write(b'x' * (1024 * 1024 + 1))\n")
    dag = dagfile(
        f"TASK nodir -f A={tmp_path}/missing/dir/out.txt /bin/sh -c 'echo hi > /proc/self/fd/$A'\n"
        f"TASK toobig -F {big}={tmp_path}/big.out {sys.executable} {maker}\n"
        f"TASK nosrc -F {tmp_path}/never.tmp={tmp_path}/n.out /bin/true\n"
        f"TASK notafile -F {tmp_path}={tmp_path}/d.out /bin/true\n"
    )
    res = run_pilot([dag])
    assert res.returncode == 1
    assert "Task nodir failed due to collective I/O errors" in res.stderr
    assert "Task toobig failed" in res.stderr and "too large" in res.stderr
    assert f"Task notafile: {tmp_path} is not a file" in res.stderr
    # as in PMC, a source the task never wrote is nothing to forward
    assert "Task nosrc failed" not in res.stderr and not (tmp_path / "n.out").exists()
    assert "3 of 4 tasks not done" in res.stderr
    assert not big.exists() and not (tmp_path / "big.out").exists()


def test_strict_limits(dagfile):
    dag = dagfile(f"TASK hog -m 100 {sys.executable} -c 'b = bytearray(300 * 1024 * 1024)'\n")
    assert run_pilot(["--strict-limits", dag]).returncode == 1
    assert run_pilot(["-s", dag]).returncode == 0  # without the flag the request is only a scheduling hint


def test_affinity_reset_unless_kept(dagfile, tmp_path):
    if (os.cpu_count() or 1) < 2:
        pytest.skip("needs 2 CPUs")
    show = script(tmp_path, "aff.py", "import os\nprint('CPUS', len(os.sched_getaffinity(0)))\n")
    dag = dagfile(f"TASK aff {sys.executable} {show}\n")
    reset = subprocess.run(["taskset", "-c", "0", *pilot_cmd(["-s", dag])], capture_output=True, text=True, timeout=60)
    kept = subprocess.run(
        ["taskset", "-c", "0", *pilot_cmd(["-s", "--keep-affinity", dag])], capture_output=True, text=True, timeout=60
    )
    assert f"CPUS {os.cpu_count()}" in reset.stdout
    assert "CPUS 1" in kept.stdout


def test_big_messages_both_ways_do_not_deadlock(dagfile, tmp_path):
    """Prefetched tasks above MPICH's eager limit cross results above it: sends must not block each other."""
    writer = script(tmp_path, "fw.sh", "#!/bin/sh\nhead -c 20000 /dev/zero | tr '\\\\0' y > /proc/self/fd/$OUT\n")
    out = tmp_path / "fwd.out"
    big = "x" * 20000
    dag = dagfile("".join(f"TASK t{i} -f OUT={out} {writer} {big}\n" for i in range(120)))
    res = run_pilot([dag], n=6, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert out.stat().st_size == 120 * 20000
