"""``pilot run --containers once`` on real runtimes: podman (runc, containers/containers.conf), a dockerd of the
test session's own, and apptainer through its stand-in (tests/bin/apptainer, which runs Charliecloud's ch-run).

Tasks are written as the planner writes a container job (pilot.planner.containers): the runtime's per-task
command line. Each runtime is called through a wrapper that logs its arguments, so the tests count the
containers started from what the runtime was asked, not from what pilot says it did.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from tests.containers import IMAGE_TEXT, ONLY_IN_IMAGE, apptainer_standin, dockerd, podman  # noqa: F401 - fixtures
from tests.containers import docker_archive, rootfs, squashfs  # noqa: F401 - fixtures they use
from tests.mpi.helpers import pilot_cmd
from tests.waiting import wait_for

pytestmark = pytest.mark.containers
RUNTIMES = ["podman", "dockerd", "apptainer_standin"]


@pytest.fixture(params=RUNTIMES)
def runtime(request, tmp_path):
    """The runtime's fixture, its calls logged by a wrapper in the test's directory (called by absolute path)."""
    rt = request.getfixturevalue(request.param)
    real = subprocess.run(["sh", "-c", f"command -v {rt.name}"], env={**os.environ, **rt.env}, capture_output=True,
                          text=True, check=True).stdout.strip()
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
            started.append((words[at], " ".join(words[:at - 1] + words[at + 1:])))
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
    out = subprocess.run([rt.name, "ps", "-a", "--format", "{{.Names}}"], env={**os.environ, **rt.env},
                         capture_output=True, text=True, timeout=60, check=True).stdout
    return [name for name in out.split() if name.startswith("pilot-")]


def run(tmp_path: Path, rt, dag_text: str, *extra: str) -> subprocess.CompletedProcess:
    dag = tmp_path / "wf.dag"
    dag.write_text(dag_text)
    return subprocess.run(pilot_cmd(["--containers", "once", "-o", "out.txt", "-e", "err.txt", *extra, str(dag)], n=3),
                          cwd=tmp_path, env={**os.environ, **rt.env}, capture_output=True, text=True, timeout=300)


def test_a_workers_tasks_of_one_container_run_in_one_it_starts_once_and_ends(tmp_path, runtime):
    rt, wrapper = runtime
    command, env = '/bin/sh -c "cat %s $X > %s.out"', "X=/srv/in"
    tasks = []
    for where, count in (("work", 6), ("other", 4)):  # two job directories bound at /srv: two containers
        (tmp_path / where).mkdir()
        (tmp_path / where / "in").write_text("from the host\n")
        tasks += [f"TASK {where}{k} {line(rt, wrapper, tmp_path / where, rt.image, command % (ONLY_IN_IMAGE, k), env)}\n"
                  for k in range(count)]
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
    tasks = "".join(f"TASK t{k} {line(rt, wrapper, tmp_path, rt.image, f'/bin/cat {ONLY_IN_IMAGE}')}\n" for k in range(3))
    dag = tmp_path / "wf.dag"
    dag.write_text(tasks)
    res = subprocess.run(pilot_cmd(["-o", "out.txt", str(dag)], n=2), cwd=tmp_path, env={**os.environ, **rt.env},
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert starts(tmp_path) == [] and (tmp_path / "out.txt").read_text().count(IMAGE_TEXT) == 3


def test_a_container_that_cannot_start_fails_its_task_with_the_runtimes_message_and_the_worker_goes_on(tmp_path,
                                                                                                        runtime):
    rt, wrapper = runtime
    missing = str(tmp_path / "no-such.sqfs") if rt.name == "apptainer" else "localhost/no-such:image"
    res = run(tmp_path, rt, f"TASK bad {line(rt, wrapper, tmp_path, missing, '/bin/true')}\n"
                            f"TASK good {line(rt, wrapper, tmp_path, rt.image, '/bin/true')}\nEDGE bad good\n"
                            "TASK other /bin/true\n")
    assert res.returncode == 1
    err = (tmp_path / "err.txt").read_text()
    assert "Unable to start container: " in err and "no-such" in err
    said = {"podman": "no-such:image", "docker": "Unable to find image 'localhost/no-such:image' locally",
            "apptainer": "could not open image"}[rt.name]
    assert said in err, err  # the runtime's own stderr
    out = (tmp_path / "out.txt").read_text()
    assert "name=bad," in out and "name=other," in out and "status=0" in out  # the worker ran on
    assert left_running(rt) == []


def test_sigterm_of_the_run_ends_its_containers(tmp_path, runtime):
    rt, wrapper = runtime
    dag = tmp_path / "wf.dag"
    dag.write_text(f"TASK long {line(rt, wrapper, tmp_path, rt.image, '/bin/sleep 120')}\n")
    proc = subprocess.Popen(pilot_cmd(["--containers", "once", str(dag)], n=2), cwd=tmp_path,
                            env={**os.environ, **rt.env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: any(call.startswith("exec ") for call in _calls(tmp_path)), 120,
                 "the task's exec in its started container")
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
