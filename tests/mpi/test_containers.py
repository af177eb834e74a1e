"""``pilot run --containers once`` on real runtimes: podman (runc, containers/containers.conf), a dockerd of the
test session's own, and apptainer through its stand-in (tests/bin/apptainer, which runs Charliecloud's ch-run).

Tasks are written as the planner writes a container job (pilot.planner.containers): the runtime's per-task
command line. Each runtime is called through a wrapper that logs its arguments, so the tests count the
containers started from what the runtime was asked, not from what pilot says it did.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from pilot.dag.lexer import quote_arg
from tests.containers import (  # noqa: F401 - fixtures the tests take by name
    IMAGE_ENV,
    IMAGE_TEXT,
    ONLY_IN_IMAGE,
    apptainer_standin,
    docker_archive,
    dockerd,
    podman,
    rootfs,
    squashfs,
)
from tests.mpi.helpers import pilot_cmd
from tests.waiting import wait_for

pytestmark = pytest.mark.containers
RUNTIMES = ["podman", "dockerd", "apptainer_standin"]


@pytest.fixture(params=RUNTIMES)
def runtime(request, tmp_path):
    """The runtime's fixture, its calls logged by a wrapper in the test's directory (called by absolute path)."""
    return _wrapped(request.getfixturevalue(request.param), tmp_path)


@pytest.fixture(params=["podman", "dockerd"])
def entered(request, tmp_path):
    """A runtime whose started containers' tasks enter them with nsenter."""
    if shutil.which("nsenter") is None:
        pytest.skip("nsenter not installed (apt-get install util-linux)")
    return _wrapped(request.getfixturevalue(request.param), tmp_path)


def _wrapped(rt, tmp_path: Path):
    real = subprocess.run(
        ["sh", "-c", f"command -v {rt.name}"], env={**os.environ, **rt.env}, capture_output=True, text=True, check=True
    ).stdout.strip()
    wrapper = tmp_path / "bin" / rt.name
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> "{tmp_path}/calls.log"\nexec "{real}" "$@"\n')
    wrapper.chmod(0o755)
    return rt, str(wrapper)


def line(rt, wrapper: str, workdir: Path, image: str, command: str, env: str = "") -> str:
    """A task's command line as the planner writes it for this runtime's kind."""
    if rt.name == "apptainer":
        opts = f"exec --no-home --bind {workdir}:/srv --pwd /srv" + (f" --env {env}" if env else "")
    else:
        opts = f"run --rm --network none -v {workdir}:/srv -w /srv" + (f" -e {env}" if env else "")
    return f"{wrapper} {opts} {image} {command}"


def _calls(tmp_path: Path) -> list[str]:
    log = tmp_path / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


def start_calls(tmp_path: Path) -> list[tuple[str, str]]:
    """(name, the start's other words) of each container the runtime was asked to start."""
    started = []
    for call in _calls(tmp_path):
        words = call.split()
        if words[:2] == ["run", "-d"]:
            at = words.index("--name") + 1
            started.append((words[at], " ".join(words[: at - 1] + words[at + 1 :])))
        elif words[:2] == ["instance", "start"]:
            started.append((words[-1], " ".join(words[:-1])))
    return started


def starts(tmp_path: Path) -> list[str]:
    """The container names the runtime was asked to start."""
    return [name for name, _ in start_calls(tmp_path)]


def left_running(rt) -> list[str]:
    """The containers (instances) of pilot's the runtime still has."""
    if rt.name == "apptainer":
        state = Path(rt.env["PILOT_APPTAINER_STANDIN_STATE"])
        return [p.name for p in state.glob("pilot-*.json")] if state.exists() else []
    out = subprocess.run(
        [rt.name, "ps", "-a", "--format", "{{.Names}}"],
        env={**os.environ, **rt.env},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    return [name for name in out.split() if name.startswith("pilot-")]


def run(
    tmp_path: Path, rt, dag_text: str, *extra: str, n: int = 3, timeout: float = 300
) -> subprocess.CompletedProcess:
    dag = tmp_path / "wf.dag"
    dag.write_text(dag_text)
    return subprocess.run(
        pilot_cmd(["--containers", "once", "-o", "out.txt", "-e", "err.txt", *extra, str(dag)], n=n),
        cwd=tmp_path,
        env={**os.environ, **rt.env},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_a_workers_tasks_of_one_container_run_in_one_it_starts_once_and_ends(tmp_path, runtime):
    rt, wrapper = runtime
    command, env = '/bin/sh -c "cat %s $X > %s.out"', "X=/srv/in"
    tasks = []
    for where, count in (("work", 6), ("other", 4)):  # two job directories bound at /srv: two containers
        (tmp_path / where).mkdir()
        (tmp_path / where / "in").write_text("from the host\n")
        tasks += [
            f"TASK {where}{k} {line(rt, wrapper, tmp_path / where, rt.image, command % (ONLY_IN_IMAGE, k), env)}\n"
            for k in range(count)
        ]
    res = run(tmp_path, rt, "".join(tasks) + "TASK host /bin/true\nEDGE work0 work1\nEDGE work1 other2\n")
    assert res.returncode == 0, res.stderr
    for where, count in (("work", 6), ("other", 4)):  # the image's file, the job's directory at /srv, the task's env
        for k in range(count):
            assert (tmp_path / where / f"{k}.out").read_text() == IMAGE_TEXT + "from the host\n"
    started = start_calls(tmp_path)
    per_worker_and_container = Counter((name.rsplit("-", 1)[0], options) for name, options in started)
    assert set(per_worker_and_container.values()) == {1}, started  # pilot-<worker token>-<n>
    binds = [("/work:/srv" in options, "/other:/srv" in options) for _, options in started]
    assert set(binds) == {(True, False), (False, True)} and len(started) <= 4, started  # each worker: one per directory
    assert left_running(rt) == []


def test_per_task_the_lines_run_as_written(tmp_path, runtime):
    rt, wrapper = runtime
    tasks = "".join(
        f"TASK t{k} {line(rt, wrapper, tmp_path, rt.image, f'/bin/cat {ONLY_IN_IMAGE}')}\n" for k in range(3)
    )
    dag = tmp_path / "wf.dag"
    dag.write_text(tasks)
    res = subprocess.run(
        pilot_cmd(["-o", "out.txt", str(dag)], n=2),
        cwd=tmp_path,
        env={**os.environ, **rt.env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    assert starts(tmp_path) == [] and (tmp_path / "out.txt").read_text().count(IMAGE_TEXT) == 3


def test_a_container_that_cannot_start_fails_its_task_with_the_runtimes_message_and_the_worker_goes_on(
    tmp_path, runtime
):
    rt, wrapper = runtime
    missing = str(tmp_path / "no-such.sqfs") if rt.name == "apptainer" else "localhost/no-such:image"
    res = run(
        tmp_path,
        rt,
        f"TASK bad {line(rt, wrapper, tmp_path, missing, '/bin/true')}\n"
        f"TASK good {line(rt, wrapper, tmp_path, rt.image, '/bin/true')}\nEDGE bad good\n"
        "TASK other /bin/true\n",
    )
    assert res.returncode == 1
    err = (tmp_path / "err.txt").read_text()
    assert "Unable to start container: " in err and "no-such" in err
    said = {
        "podman": "no-such:image",
        "docker": "Unable to find image 'localhost/no-such:image' locally",
        "apptainer": "could not open image",
    }[rt.name]
    assert said in err, err  # the runtime's own stderr
    out = (tmp_path / "out.txt").read_text()
    assert "name=bad," in out and "name=other," in out and "status=0" in out  # the worker ran on
    assert left_running(rt) == []


def test_sigterm_of_the_run_ends_its_containers(tmp_path, runtime):
    rt, wrapper = runtime
    dag = tmp_path / "wf.dag"
    command = "/bin/sh -c " + quote_arg("echo > /srv/started; sleep 120")
    dag.write_text(f"TASK long {line(rt, wrapper, tmp_path, rt.image, command)}\n")
    proc = subprocess.Popen(
        pilot_cmd(["--containers", "once", str(dag)], n=2),
        cwd=tmp_path,
        env={**os.environ, **rt.env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: (tmp_path / "started").exists(), 120, "the task running in its started container")
        assert len(starts(tmp_path)) == 1
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode != 0
    assert left_running(rt) == []
    if rt.name == "apptainer":
        state = Path(rt.env["PILOT_APPTAINER_STANDIN_STATE"])
        calls = [json.loads(c) for c in (state / "calls.log").read_text().splitlines()]
        assert ["instance", "stop", starts(tmp_path)[0]] in calls


def _records(tmp_path: Path) -> dict[str, str]:
    """Each task's cluster-task record in out.txt, by name."""
    out = (tmp_path / "out.txt").read_text()
    rows = [row for row in out.splitlines() if row.startswith("[cluster-task")]
    return {row.split("name=", 1)[1].split(",", 1)[0]: row for row in rows}


def test_a_task_entering_its_container_runs_in_the_image_with_its_env_the_job_dir_at_srv_and_no_host_files(
    tmp_path, entered
):
    rt, wrapper = entered
    (tmp_path / "in").write_text("from the job directory\n")
    host_only = tmp_path / "host-only"  # not under the job directory: outside the container
    host_only.write_text("only on the host\n")
    key, value = IMAGE_ENV
    script = (
        f"cat {ONLY_IN_IMAGE} in; echo {key}=${key} TASK=$TASK_VAR PMC_TASK=$PMC_TASK; pwd; "
        f"test -e {host_only} && echo host file seen; test -e /usr/bin/python3 && echo host python seen; exit 0"
    )
    command = "/bin/sh -c " + quote_arg(script)
    res = run(tmp_path, rt, f"TASK t {line(rt, wrapper, tmp_path, rt.image, command, 'TASK_VAR=t1')}\n")
    assert res.returncode == 0, res.stderr
    out = (tmp_path / "out.txt").read_text()
    assert IMAGE_TEXT + "from the job directory\n" in out
    assert f"{key}={value} TASK=t1 PMC_TASK=t\n/srv\n" in out  # the image's env, the task's -e, the worker's
    assert "seen" not in out
    assert [c for c in _calls(tmp_path) if c.startswith("exec ")] == []  # entered with nsenter, not the runtime's exec
    assert any(c.startswith("inspect ") for c in _calls(tmp_path))


def test_under_once_exec_tasks_go_through_the_runtimes_exec(tmp_path, entered):
    rt, wrapper = entered
    res = run(
        tmp_path,
        rt,
        f"TASK t {line(rt, wrapper, tmp_path, rt.image, f'/bin/cat {ONLY_IN_IMAGE}')}\n",
        "--containers",
        "once-exec",
    )
    assert res.returncode == 0, res.stderr
    assert IMAGE_TEXT in (tmp_path / "out.txt").read_text()
    assert len([c for c in _calls(tmp_path) if c.startswith("exec ")]) == 1


def test_a_container_that_died_is_started_again_for_the_next_task(tmp_path, entered):
    rt, wrapper = entered
    killer = tmp_path / "kill.sh"  # a host task that kills the worker's container, as an OOM kill or an admin would
    killer.write_text(
        f'for n in $({rt.name} ps --format "{{{{.Names}}}}"); do case $n in pilot-*) '
        f'{rt.name} kill "$n" >/dev/null; {rt.name} wait "$n" >/dev/null 2>&1;; esac; done; exit 0\n'
    )
    cat = f"/bin/cat {ONLY_IN_IMAGE}"
    res = run(
        tmp_path,
        rt,
        f"TASK a {line(rt, wrapper, tmp_path, rt.image, cat)}\nTASK kill /bin/sh {killer}\n"
        f"TASK b {line(rt, wrapper, tmp_path, rt.image, cat)}\nEDGE a kill\nEDGE kill b\n",
        n=2,
    )
    assert res.returncode == 0, (tmp_path / "err.txt").read_text()
    assert (tmp_path / "out.txt").read_text().count(IMAGE_TEXT) == 2
    assert len(starts(tmp_path)) == 2
    assert "has ended" in res.stderr
    assert left_running(rt) == []


def test_the_wall_time_kill_reaches_a_task_inside_its_container(tmp_path, entered):
    """The task loops until a signal ends it, so a kill that does not reach it leaves the run going: the run is
    waited for with a deadline of 90 s (3 s of wall time, the container's start and end, a loaded machine), as every
    run here is, not timed."""
    rt, wrapper = entered
    stubborn = "trap 'echo TERM > /srv/termed; exit 1' TERM; while :; do sleep 0.1; done"
    command = "/bin/sh -c " + quote_arg(stubborn)
    res = run(
        tmp_path,
        rt,
        f"TASK long {line(rt, wrapper, tmp_path, rt.image, command)}\n",
        "--max-wall-time",
        "0.05",
        n=2,
        timeout=90,
    )
    assert res.returncode == 1
    assert "max wall time of 0.05 minutes reached" in res.stderr
    assert (tmp_path / "termed").read_text() == "TERM\n"  # the task's own shell got the worker's SIGTERM
    assert "status=0" not in _records(tmp_path)["long"]
    assert left_running(rt) == []


def test_a_container_whose_options_restrict_what_nsenter_would_not_keep_runs_its_tasks_through_exec(tmp_path, entered):
    rt, wrapper = entered
    task = line(rt, wrapper, tmp_path, rt.image, "/bin/sh -c " + quote_arg("grep CapEff /proc/self/status"))
    task = task.replace(" run --rm ", " run --rm --cap-drop ALL ")
    res = run(tmp_path, rt, f"TASK t {task}\nTASK u {task}\n", n=2)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "out.txt").read_text().count("CapEff:\t0000000000000000\n") == 2  # as the container has it
    assert len([c for c in _calls(tmp_path) if c.startswith("exec ")]) == 2
    assert res.stderr.count("its option --cap-drop asks for a restriction nsenter does not apply") == 1


def test_without_nsenter_on_path_tasks_go_through_the_runtimes_exec_with_one_warning(tmp_path, entered):
    rt, wrapper = entered
    path = tmp_path / "path"  # the machine's programs, less nsenter
    path.mkdir()
    for folder in os.environ["PATH"].split(os.pathsep):
        for entry in os.scandir(folder) if os.path.isdir(folder) else ():
            if entry.name != "nsenter" and not (path / entry.name).exists():
                (path / entry.name).symlink_to(entry.path)
    task = line(rt, wrapper, tmp_path, rt.image, f"/bin/cat {ONLY_IN_IMAGE}")
    dag = tmp_path / "wf.dag"
    dag.write_text(f"TASK t {task}\nTASK u {task}\nEDGE t u\n")
    res = subprocess.run(
        pilot_cmd(["--containers", "once", "-o", "out.txt", str(dag)], n=2),
        cwd=tmp_path,
        env={**os.environ, **rt.env, "PATH": str(path)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "out.txt").read_text().count(IMAGE_TEXT) == 2
    assert len([c for c in _calls(tmp_path) if c.startswith("exec ")]) == 2
    assert res.stderr.count("nsenter (util-linux) is not on PATH") == 1
