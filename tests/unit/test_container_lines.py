"""The worker's reading of a container task's command line (pilot.runtime.containers): what is the container, what
is the task's own, and which lines it leaves alone because it cannot read them with certainty."""

from pilot.runtime.containers import Family, parse
from pilot.runtime.instances import Container

APPTAINER = [
    "apptainer",
    "exec",
    "--no-home",
    "--nv",
    "--bind",
    "/w/j:/srv",
    "--pwd",
    "/srv",
    "--env",
    "CV=1",
    "--bind",
    "/data:/data:ro",
    "--writable-tmpfs",
    "box.sif",
    "./echo",
    "hi",
    "--pwd",
]
PODMAN = [
    "/usr/bin/podman",
    "run",
    "--rm",
    "--network",
    "none",
    "--gpus=all",
    "-v",
    "/w/j:/srv",
    "-w",
    "/srv",
    "-e",
    "CV=1",
    "-v",
    "/data:/data",
    "localhost/box:1",
    "/bin/echo",
    "-e",
    "x",
]


def test_an_apptainer_line_splits_into_its_instance_and_the_tasks_part_relative_image_made_absolute():
    line = parse(APPTAINER, "/w/j")
    assert line.family is Family.APPTAINER
    assert line.container_options == (
        "--no-home",
        "--nv",
        "--bind",
        "/w/j:/srv",
        "--bind",
        "/data:/data:ro",
        "--writable-tmpfs",
    )
    assert line.image == "/w/j/box.sif"
    assert line.exec_options == ("--pwd", "/srv", "--env", "CV=1")
    assert line.command == ("./echo", "hi", "--pwd")  # the task's own words are not options of the runtime
    box = Container(line, "pilot-t-1")
    assert box.start_argv("m") == [
        "apptainer",
        "instance",
        "start",
        *line.container_options,
        "/w/j/box.sif",
        "pilot-t-1",
    ]
    assert box.exec_argv(line) == [
        "apptainer",
        "exec",
        "--pwd",
        "/srv",
        "--env",
        "CV=1",
        "instance://pilot-t-1",
        "./echo",
        "hi",
        "--pwd",
    ]
    assert box.stop_argv() == ["apptainer", "instance", "stop", "pilot-t-1"]


def test_a_podman_line_splits_into_its_container_and_the_tasks_part():
    line = parse(PODMAN, "/elsewhere")
    assert line.family is Family.DOCKER
    assert line.container_options == ("--network", "none", "--gpus", "all", "-v", "/w/j:/srv", "-v", "/data:/data")
    assert line.image == "localhost/box:1" and line.command == ("/bin/echo", "-e", "x")
    box = Container(line, "pilot-t-2")
    assert box.start_argv("m") == [
        "/usr/bin/podman",
        "run",
        "-d",
        "--rm",
        "--name",
        "pilot-t-2",
        *line.container_options,
        "-e",
        "PILOT_TASK_MARK=m",
        "localhost/box:1",
        "sleep",
        "2147483647",
    ]
    assert box.exec_argv(line) == [
        "/usr/bin/podman",
        "exec",
        "-w",
        "/srv",
        "-e",
        "CV=1",
        "pilot-t-2",
        "/bin/echo",
        "-e",
        "x",
    ]
    assert box.stop_argv() == ["/usr/bin/podman", "rm", "-f", "-t", "0", "pilot-t-2"]
    docker = parse(["docker", *PODMAN[1:]], None)
    assert Container(docker, "n").stop_argv() == ["docker", "rm", "-f", "n"]


def test_tasks_share_a_container_when_only_their_directory_env_and_command_differ():
    other = [*PODMAN[:9], "/tmp", "-e", "CV=2", *PODMAN[12:15], "/bin/cat", "f"]
    assert parse(other, None).key == parse(PODMAN, None).key
    assert parse([*PODMAN[:3], "--network", "host", *PODMAN[5:]], None).key != parse(PODMAN, None).key
    assert parse(APPTAINER, "/a").key != parse(APPTAINER, "/b").key  # box.sif of two directories: two images


def test_lines_it_cannot_read_with_certainty_run_as_written():
    unreadable = [
        ["/bin/echo", "exec", "x", "y"],
        ["apptainer", "run", "box.sif", "x"],  # the runscript, not exec
        ["apptainer", "exec", "--frobnicate", "v", "box.sif", "x"],  # arity unknown: v could be the image
        ["apptainer", "exec", "--no-home=yes", "box.sif", "x"],
        ["podman", "run", "-d", "img", "x"],
        ["podman", "run", "--entrypoint", "/x", "img", "x"],
        ["podman", "run", "--rm", "img"],  # no command
        ["podman", "run", "--rm", "-v"],
        ["shifter", "--image", "docker:ubuntu", "x"],
    ]
    for argv in unreadable:
        assert parse(argv, "/w") is None, argv


def test_a_task_entering_a_container_gets_its_env_then_its_own_then_the_workers_and_its_directory():
    import os

    from pilot.runtime import entering

    entry = entering.Entry(4321, "99", {"PATH": "/bin", "HOME": "/root", "CV": "image"}, "/", (), ())
    worker = {**os.environ, "PMC_TASK": "t", "CV": "worker"}
    line = parse(PODMAN, None)
    env = entering.task_env(entry, line.exec_options, worker)
    assert env["PATH"] == "/bin" and env["HOME"] == "/root"  # the container's, not the host's
    assert env["PMC_TASK"] == "t" and env["CV"] == "worker"
    assert not set(env) - {"PATH", "HOME", "CV", "PMC_TASK"}  # nothing else of the worker's own environment
    assert entering.task_env(entry, line.exec_options, dict(os.environ))["CV"] == "1"  # the task's -e over the image's
    assert entering.argv("/usr/bin/nsenter", entry, entering.workdir(line.exec_options), line.command) == [
        "/usr/bin/nsenter",
        "--target",
        "4321",
        "--mount",
        "--uts",
        "--ipc",
        "--net",
        "--pid",
        "--wdns=/srv",
        "--",
        "/bin/echo",
        "-e",
        "x",
    ]
    assert entering.restricted(line.container_options) is None
    assert entering.restricted(("--memory=2g",)) == "--memory"
