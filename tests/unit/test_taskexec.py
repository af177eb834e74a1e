"""Task spawning, forwarding and killing with real processes (no MPI)."""

import os
import signal
import subprocess
import sys
import time

import pytest

from pilot.runtime import taskexec
from tests.waiting import alive, wait_for


@pytest.fixture
def waker():
    w = taskexec.ChildWaker()
    yield w
    w.close()


@pytest.fixture
def outs(tmp_path):
    out = os.open(tmp_path / "out", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    err = os.open(tmp_path / "err", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    yield out, err, tmp_path
    os.close(out)
    os.close(err)


def run(argv, waker, outs, forwards=(), must_end=lambda: False, env=None):
    r = taskexec.spawn(argv, env or dict(os.environ), outs[0], outs[1], list(forwards))
    taskexec.wait(r, waker, must_end)
    return r


def test_exit_status_and_stdio(waker, outs):
    r = run(["sh", "-c", "echo hello; echo oops >&2; exit 3"], waker, outs)
    assert r.status == 3
    assert (outs[2] / "out").read_text() == "hello\n" and (outs[2] / "err").read_text() == "oops\n"


def test_signal_status_is_negative(waker, outs):
    assert run(["sh", "-c", "kill -9 $$"], waker, outs).status == -9


def test_missing_executable_raises(waker, outs):
    with pytest.raises(OSError):
        taskexec.spawn(["/no/such/program"], dict(os.environ), outs[0], outs[1])


def test_task_gets_own_process_group_and_default_sigpipe(waker, outs):
    r = run(["sh", "-c", "ps -o pid=,pgid= -p $$; grep SigIgn /proc/self/status"], waker, outs)
    pid, pgid, _, ignored = (outs[2] / "out").read_text().split()
    assert r.status == 0 and pid == pgid
    assert not int(ignored, 16) & (1 << (signal.SIGPIPE - 1))  # the worker ignores SIGPIPE; tasks must not


def test_pipe_forward_collects_data_in_order(waker, outs):
    code = "import os\nfor v in ('A','B'):\n    fd=int(os.environ[v])\n    for i in range(3): os.write(fd, (v+str(i)).encode()*10000)\n"
    r = run([sys.executable, "-c", code], waker, outs, [("A", "/dest/a"), ("B", "/dest/b")])
    assert r.status == 0
    data = dict(taskexec.pipe_data(r))
    assert data["/dest/a"] == b"A0" * 10000 + b"A1" * 10000 + b"A2" * 10000
    assert data["/dest/b"].startswith(b"B0") and len(data["/dest/b"]) == 60000


@pytest.mark.timing
def test_background_child_holding_pipe_does_not_block(waker, outs):
    start = time.monotonic()
    code = "import os,subprocess; fd=int(os.environ['F']); os.write(fd, b'hi\\n'); subprocess.Popen(['sleep', '5'], pass_fds=[fd])"
    r = run([sys.executable, "-c", code], waker, outs, [("F", "/d")])
    assert time.monotonic() - start < 2 and r.status == 0
    assert dict(taskexec.pipe_data(r))["/d"] == b"hi\n"


def test_kill_ends_the_whole_group(waker, outs, tmp_path):
    marker = tmp_path / "child.pid"
    calls = {"n": 0}

    def must_end():
        calls["n"] += 1
        return marker.exists() and marker.read_text().strip() != ""

    r = run(["sh", "-c", f"sleep 30 & echo $! > {marker}; wait"], waker, outs, must_end=must_end)
    assert r.status == -signal.SIGTERM
    child = int(marker.read_text())
    wait_for(lambda: not alive(child), 5, "the background child to end", every=0.05)


def test_sigterm_ignored_task_gets_sigkill(waker, outs, monkeypatch):
    monkeypatch.setattr(taskexec, "KILL_GRACE", 0.3)
    r = run(["sh", "-c", "trap '' TERM; sleep 30"], waker, outs, must_end=lambda: True)
    assert r.status == -signal.SIGKILL


def test_file_forward_reads_deletes_and_limits(tmp_path):
    src = tmp_path / "src"
    src.write_bytes(b"payload")
    assert taskexec.read_file_forward(str(src)) == b"payload" and not src.exists()
    src.write_bytes(b"x" * (taskexec.FILE_FORWARD_LIMIT + 1))
    with pytest.raises(ValueError, match="too large"):
        taskexec.read_file_forward(str(src))
    assert not src.exists()
    # as in PMC: a source the task never wrote is nothing to forward; a directory is an error
    assert taskexec.read_file_forward(str(tmp_path / "missing")) is None
    with pytest.raises(ValueError, match=f"^{tmp_path} is not a file$"):
        taskexec.read_file_forward(str(tmp_path))


def test_strict_limits_wrapper_enforces_memory(waker, outs):
    code = "b = bytearray(400 * 1024 * 1024)"
    r = run(taskexec.limited_argv([sys.executable, "-c", code], 200), waker, outs)
    assert r.status != 0 and "MemoryError" in (outs[2] / "err").read_text()
    r = run(taskexec.limited_argv([sys.executable, "-c", "b = bytearray(10 * 1024 * 1024)"], 200), waker, outs)
    assert r.status == 0


def test_task_stdin_is_usable_when_the_worker_started_without_stdin():
    """With fd 0 closed at start, /dev/null must not land on 0 (DUP2 onto itself would leave it close-on-exec)."""
    code = (
        "import os; os.close(0)\n"
        "from pilot.runtime import taskexec\n"
        "assert taskexec._devnull() >= 3\n"
        "r, w = os.pipe()\n"
        "run = taskexec.spawn(['/bin/sh', '-c', 'read x; echo status=$?'], dict(os.environ), w, 2)\n"
        "os.close(w); os.waitpid(run.pid, 0)\n"
        "print(os.read(r, 100).decode().strip())\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "status=1"  # read hit EOF on /dev/null, not "bad file descriptor" (2)


def test_spawn_in_runs_in_the_task_directory_with_its_stdio_files(waker, outs, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "in.txt").write_text("from stdin\n")
    (work / "job.out").write_text("an earlier attempt's output, replaced\n")
    here = os.getcwd()
    r = taskexec.spawn_in(
        str(work),
        ("in.txt", "job.out", ""),
        ["sh", "-c", "pwd; cat; echo oops >&2"],
        dict(os.environ),
        outs[0],
        outs[1],
    )
    taskexec.wait(r, waker, lambda: False)
    assert r.status == 0 and os.getcwd() == here  # the worker is back in its own directory
    assert (work / "job.out").read_text() == f"{work}\nfrom stdin\n"
    assert (outs[2] / "out").read_text() == "" and (outs[2] / "err").read_text() == "oops\n"


def test_spawn_in_a_missing_directory_or_stdin_names_it(outs, tmp_path):
    here = os.getcwd()
    with pytest.raises(OSError) as info:
        taskexec.spawn_in(str(tmp_path / "nope"), None, ["true"], dict(os.environ), outs[0], outs[1])
    assert info.value.filename == str(tmp_path / "nope") and os.getcwd() == here
    with pytest.raises(OSError) as info:
        taskexec.spawn_in(str(tmp_path), ("missing.in", "", ""), ["true"], dict(os.environ), outs[0], outs[1])
    assert info.value.filename == "missing.in" and os.getcwd() == here


def test_a_program_named_without_a_slash_is_found_in_the_working_directory_first(waker, outs, tmp_path):
    """As pegasus-mpi-cluster's pathfind: ./name when the working directory has it, else PATH."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "mytool").write_text('#!/bin/sh\necho mine "$0"\n')
    (work / "mytool").chmod(0o755)
    (work / "echo").write_text("#!/bin/sh\necho not the system echo\n")
    (work / "echo").chmod(0o755)
    r = taskexec.spawn_in(str(work), None, ["mytool"], dict(os.environ), outs[0], outs[1])
    taskexec.wait(r, waker, lambda: False)
    r = taskexec.spawn_in(str(work), None, ["true"], dict(os.environ), outs[0], outs[1])  # not here: PATH's
    taskexec.wait(r, waker, lambda: False)
    assert r.status == 0 and (outs[2] / "out").read_text() == "mine ./mytool\n"  # a script sees the path run
    r = taskexec.spawn_in(str(work), None, ["echo", "x"], dict(os.environ), outs[0], outs[1])
    taskexec.wait(r, waker, lambda: False)
    assert (outs[2] / "out").read_text().endswith("not the system echo\n")  # the working directory comes first
