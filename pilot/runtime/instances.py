"""The containers a worker started once (``pilot run --containers once``), and the end of each.

Starting a container costs far more than the tasks it runs often take
(``podman run`` some 0.35 s here, ``apptainer`` pulling or unpacking an image
more), so a worker starts one container per key (pilot.runtime.containers)
when the first task of that key arrives and runs that task and the later ones
in it:

- podman, podman-hpc, docker: ``RUNTIME run -d --rm --name NAME <container
  options> IMAGE sleep 2147483647`` (a sleep every image's ``sleep`` takes,
  GNU's and busybox's alike), then each task enters the container's namespaces
  with nsenter (pilot.runtime.entering: the runtime's exec costs 90-200 ms a
  task, nsenter 2 ms); ``RUNTIME exec <exec options> NAME PFN ARGS`` where
  nsenter cannot enter (not on PATH, not permitted, a container whose options
  restrict what nsenter would not) or under ``--containers once-exec``;
  ended with ``RUNTIME rm -f NAME``. Before each task the worker checks that
  the container's process still runs, and starts another container if not;
- apptainer, singularity: ``RUNTIME instance start <container options> IMAGE
  NAME``, then ``RUNTIME exec <exec options> instance://NAME PFN ARGS`` (its
  starter is a small native program that enters the instance's namespaces
  itself, in milliseconds); ended with ``RUNTIME instance stop NAME``.

The worker ends them all when it ends (pilot.runtime.worker cleanup: after a
clean end, an abort, SIGTERM from the batch system). Their processes also
carry the run's mark (pilot.runtime.reaper) in their environment, so the
worker's watchdog ends them when the worker itself is killed, and the next
run of the same DAG ends what a lost one left.

A container that cannot start fails its task, never the worker: the task's
command becomes one that writes the runtime's message to the task's stderr and
exits with the runtime's status; the next task of that key tries again.
"""

from __future__ import annotations

import logging
import os
import subprocess
import time
from collections.abc import Callable

from pilot.runtime import containers, entering, reaper
from pilot.runtime.containers import ContainerLine, Family

log = logging.getLogger("pilot.worker")

FOREVER = "2147483647"  # seconds: the largest sleep a 32-bit time_t takes
STOP_TIMEOUT = 30.0
_SAY_AND_FAIL = 'printf "%s\\n" "$1" >&2; exit "$0"'  # the failed start, as the task's own stderr and status


class Container:
    """One started container: its name and how to run a task in it and end it."""

    __slots__ = ("line", "name", "entry", "enter")

    def __init__(self, line: ContainerLine, name: str) -> None:
        self.line = line
        self.name = name
        self.entry: entering.Entry | None = None  # podman's and docker's, once read
        self.enter = False  # whether its tasks enter it with nsenter

    def alive(self) -> bool:
        """Whether it still runs, as far as pilot can tell (an apptainer instance is taken to)."""
        return self.entry is None or entering.alive(self.entry)

    def start_argv(self, mark: str) -> list[str]:
        """The start; docker's and podman's container gets the run's mark in its own environment (its processes
        do not inherit the runtime's), apptainer's instance inherits it from the runtime's."""
        line = self.line
        if line.family is Family.APPTAINER:
            return [line.runtime, "instance", "start", *line.container_options, line.image, self.name]
        return [
            line.runtime,
            "run",
            "-d",
            "--rm",
            "--name",
            self.name,
            *line.container_options,
            "-e",
            f"{reaper.MARK_VAR}={mark}",
            line.image,
            "sleep",
            FOREVER,
        ]

    def exec_argv(self, line: ContainerLine) -> list[str]:
        target = f"instance://{self.name}" if line.family is Family.APPTAINER else self.name
        return [line.runtime, "exec", *line.exec_options, target, *line.command]

    def stop_argv(self) -> list[str]:
        line = self.line
        if line.family is Family.APPTAINER:
            return [line.runtime, "instance", "stop", self.name]
        quick = ["-t", "0"] if os.path.basename(line.runtime).startswith("podman") else []  # docker's -f kills at once
        return [line.runtime, "rm", "-f", *quick, self.name]


class Instances:
    """A worker's started containers, by key."""

    def __init__(self, token: str, enter: bool = True) -> None:
        self.token = token
        self.running: dict[tuple[str, ...], Container] = {}
        self._count = 0
        self._nsenter: str | None = None  # looked up when a container first starts (below)
        self._looked = not enter
        self._said_no_nsenter = not enter

    def command_for(
        self, argv: list[str], env: dict[str, str], cwd: str | None, mark: str, must_end: Callable[[], bool]
    ) -> tuple[list[str], dict[str, str]]:
        """The command and environment to spawn for a task: in its started container, as written, or a command
        that reports a failed start."""
        line = containers.parse(argv, cwd)
        if line is None:
            return argv, env
        box = self.running.get(line.key)
        if box is not None and not box.alive():
            log.warning(
                "container %s has ended (its process %d is gone): starting another",
                box.name,
                box.entry.pid if box.entry else 0,
            )
            del self.running[line.key]
            _remove_quietly(box)
            box = None
        if box is None:
            self._count += 1
            box = Container(line, f"pilot-{self.token}-{self._count}")
            failure = _start(box, cwd, mark, must_end)
            if failure is not None:
                return ["/bin/sh", "-c", _SAY_AND_FAIL, *failure], env
            self._read(box)
            self.running[line.key] = box
        if box.enter and box.entry is not None and self._nsenter is not None:
            return (
                entering.argv(self._nsenter, box.entry, entering.workdir(line.exec_options), line.command),
                entering.task_env(box.entry, line.exec_options, env),
            )
        return box.exec_argv(line), env

    def _read(self, box: Container) -> None:
        """Read a started podman or docker container's process and settings, and whether its tasks can enter it."""
        if box.line.family is not Family.DOCKER:
            return
        found = entering.inspect(box.line.runtime, box.name, dict(os.environ))
        if isinstance(found, str):
            log.warning(
                "container %s: %s; its tasks run through %s exec, and pilot cannot tell if it ends",
                box.name,
                found,
                box.line.runtime,
            )
            return
        box.entry = found
        why = None
        if not self._looked:
            import shutil  # here, not at the top: every rank imports this module before MPI_Init, shutil costs it ms

            self._nsenter, self._looked = shutil.which("nsenter"), True
        if self._nsenter is None:
            if not self._said_no_nsenter:
                log.warning(
                    "nsenter (util-linux) is not on PATH: tasks in started containers run through the "
                    "runtime's exec, some 100 ms each"
                )
            self._said_no_nsenter = True
            return
        option = entering.restricted(box.line.container_options)
        if option is not None:
            why = f"its option {option} asks for a restriction nsenter does not apply"
        elif found.why_not:
            why = found.why_not
        else:
            said = entering.probe(self._nsenter, found)
            if said is not None:
                why = f"nsenter cannot enter it: {said}"
        if why is not None:
            log.warning("container %s: %s; its tasks run through %s exec", box.name, why, box.line.runtime)
        box.enter = why is None

    def stop_all(self) -> None:
        """End every started container, all at once, each given STOP_TIMEOUT seconds."""
        boxes, self.running = list(self.running.values()), {}
        stopping = []
        for box in boxes:
            try:
                stopping.append(
                    (
                        box,
                        subprocess.Popen(
                            box.stop_argv(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
                        ),
                    )
                )
            except OSError as exc:
                log.error("cannot end container %s: %s", box.name, exc)
        deadline = time.monotonic() + STOP_TIMEOUT
        for box, proc in stopping:
            try:
                _, err = proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                _, err = proc.communicate()
            if proc.returncode != 0:
                log.error(
                    "ending container %s: %s exited %s: %s",
                    box.name,
                    " ".join(box.stop_argv()),
                    proc.returncode,
                    err.decode(errors="replace").strip(),
                )


def _start(box: Container, cwd: str | None, mark: str, must_end: Callable[[], bool]) -> tuple[str, str] | None:
    """Start the container; None when it runs, else (status, message) for the task that needed it.

    The start may take long (an image unpacked or converted): the master's
    messages are read meanwhile, and a task that must end stops it.
    """
    argv = box.start_argv(mark)
    env = dict(os.environ)
    env[reaper.MARK_VAR] = mark
    shown = " ".join(argv)
    import tempfile  # here, not at the top: it imports shutil, which costs every rank's start

    with tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(
                argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err
            )
        except OSError as exc:
            return "127", f"Unable to start container for {shown}: {exc.strerror or exc}"
        while True:
            try:
                status = proc.wait(timeout=0.05)
                break
            except subprocess.TimeoutExpired:
                if must_end():
                    proc.kill()
                    proc.wait()
                    _remove_quietly(box)
                    return "143", f"Start of container {box.name} interrupted: the task was ended"
        if status == 0:
            log.info("started container %s: %s", box.name, shown)
            return None
        err.seek(0)
        said = err.read(64 * 1024).decode(errors="replace").strip()
    log.error("container %s did not start: %s exited %d", box.name, shown, status)
    _remove_quietly(box)
    return str(status if status > 0 else 1), f"Unable to start container: {shown} exited {status}: {said}"


def _remove_quietly(box: Container) -> None:
    """Remove what a failed or interrupted start may have left (a created container, an instance half up)."""
    try:
        subprocess.run(
            box.stop_argv(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=STOP_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        pass
