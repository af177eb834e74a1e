"""Read a task's container runtime command line into the container it needs and the command it runs there.

The planner writes a containerized job's task as the runtime's own command
line, one container per task (pilot.planner.containers): ``apptainer exec
[options] IMAGE PFN ARGS`` or ``podman run --rm [options] IMAGE PFN ARGS``.
To start a container once per worker and run each task in it, the worker
splits such a line into

- the container's key: the runtime, its options that shape the container
  (binds and volumes, ``--no-home``, GPUs, network, the site's
  ``container.arguments``) and the image; tasks with equal keys share one
  container;
- the per-task part: the working directory and environment options, and the
  command with its arguments.

Only options known to take a value, or known not to, are read: an option
whose arity this module does not know could swallow the image word, so a line
with one is not split (``None``) and runs per task, as written. Relative image
and bind paths are made absolute against the task's working directory, where
the runtime would have read them.
"""

from __future__ import annotations

import enum
import os
from typing import NamedTuple


class Family(enum.Enum):
    """How a runtime starts a long-lived container and runs a command in it."""

    DOCKER = "docker"  # run -d, exec NAME, rm -f
    APPTAINER = "apptainer"  # instance start, exec instance://NAME, instance stop


RUNTIMES = {
    "apptainer": Family.APPTAINER,
    "singularity": Family.APPTAINER,
    "docker": Family.DOCKER,
    "podman": Family.DOCKER,
    "podman-hpc": Family.DOCKER,
}
SUBCOMMAND = {Family.APPTAINER: "exec", Family.DOCKER: "run"}


class Where(enum.Enum):
    """Which of the two command lines an option belongs to."""

    CONTAINER = 1  # the container's start
    EXEC = 2  # each task's exec
    BOTH = 3
    DROP = 4  # said by the start itself (--rm)


# Option -> (takes a value, where it goes). Anything else makes the line unreadable.
_DOCKER: dict[str, tuple[bool, Where]] = {
    **{
        o: (True, Where.CONTAINER)
        for o in (
            "-v",
            "--volume",
            "--mount",
            "--tmpfs",
            "--network",
            "--net",
            "--gpus",
            "--device",
            "-u",
            "--user",
            "--userns",
            "--security-opt",
            "--ipc",
            "--pid",
            "--uts",
            "--cgroupns",
            "--hostname",
            "--cap-add",
            "--cap-drop",
            "--shm-size",
            "--ulimit",
            "--group-add",
            "--platform",
            "--pull",
            "--env-file",
            "-m",
            "--memory",
            "--cpus",
        )
    },
    **{o: (False, Where.CONTAINER) for o in ("--read-only", "--privileged", "--init")},
    **{o: (True, Where.EXEC) for o in ("-w", "--workdir", "-e", "--env")},
    "--rm": (False, Where.DROP),
}
_APPTAINER: dict[str, tuple[bool, Where]] = {
    **{
        o: (True, Where.CONTAINER)
        for o in (
            "-B",
            "--bind",
            "--mount",
            "-H",
            "--home",
            "-o",
            "--overlay",
            "--network",
            "--network-args",
            "--hostname",
            "--security",
            "-W",
            "--workdir",
            "-S",
            "--scratch",
            "--no-mount",
            "--dns",
        )
    },
    **{
        o: (False, Where.CONTAINER)
        for o in (
            "--no-home",
            "--nv",
            "--nvccli",
            "--rocm",
            "--writable-tmpfs",
            "-c",
            "--contain",
            "-C",
            "--containall",
            "-f",
            "--fakeroot",
            "--no-privs",
            "--compat",
            "--no-init",
            "-u",
            "--userns",
            "--net",
            "--no-https",
        )
    },
    **{o: (True, Where.EXEC) for o in ("--pwd", "--env", "--env-file")},
    **{o: (False, Where.BOTH) for o in ("-e", "--cleanenv")},
}
OPTIONS = {Family.DOCKER: _DOCKER, Family.APPTAINER: _APPTAINER}
_ARCHIVES = ("docker-archive:", "oci-archive:", "oci:", "dir:")  # podman's image transports that name a path


class ContainerLine(NamedTuple):
    """A container task's command line, split; ``key`` is equal for tasks that can share a container."""

    runtime: str
    family: Family
    container_options: tuple[str, ...]
    image: str
    exec_options: tuple[str, ...]
    command: tuple[str, ...]

    @property
    def key(self) -> tuple[str, ...]:
        return (self.runtime, *self.container_options, "\0", self.image)


def parse(argv: list[str], cwd: str | None) -> ContainerLine | None:
    """The split line, or None when ``argv`` is not a container line this module can read with certainty."""
    family = RUNTIMES.get(os.path.basename(argv[0])) if argv else None
    if family is None or len(argv) < 4 or argv[1] != SUBCOMMAND[family]:
        return None
    known = OPTIONS[family]
    base = cwd or os.getcwd()
    container: list[str] = []
    exec_part: list[str] = []
    k = 2
    while k < len(argv) and argv[k].startswith("-"):
        name, eq, value = argv[k].partition("=")
        takes, where = known.get(name, (None, None))
        if takes is None or (eq and not takes):
            return None
        if takes and not eq:
            if k + 1 >= len(argv):
                return None
            k += 1
            value = argv[k]
        if where is not Where.DROP:
            words = [name, _absolute_bind(family, name, value, base)] if takes else [name]
            if where in (Where.CONTAINER, Where.BOTH):
                container += words
            if where in (Where.EXEC, Where.BOTH):
                exec_part += words
        k += 1
    if len(argv) - k < 2:  # an image and a command
        return None
    return ContainerLine(
        argv[0],
        family,
        tuple(container),
        _absolute_image(family, argv[k], base),
        tuple(exec_part),
        tuple(argv[k + 1 :]),
    )


def _absolute_image(family: Family, image: str, base: str) -> str:
    if family is Family.APPTAINER:
        return image if "://" in image else os.path.join(base, image)
    for transport in _ARCHIVES:
        if image.startswith(transport):
            return transport + os.path.join(base, image[len(transport) :])
    return image  # a name in the runtime's image store


def _absolute_bind(family: Family, name: str, value: str, base: str) -> str:
    """An apptainer bind's relative source, made absolute (docker's relative sources are volume names)."""
    if family is Family.APPTAINER and name in ("-B", "--bind") and value and not value.startswith("/"):
        return ",".join(
            os.path.join(base, part) if part and not part.startswith("/") else part for part in value.split(",")
        )
    return value
