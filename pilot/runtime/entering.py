"""Run a task in a started podman or docker container by entering the container's namespaces with nsenter.

``podman exec`` costs some 160-210 ms per task on a loaded machine (the podman
program alone 70 ms, then conmon and runc), ``docker exec`` some 90 ms: far
more than the tasks of many workflows take. Entering the namespaces of the
container's first process costs about 2 ms, and the task stays the worker's
own child, in the worker's process group: its kill, its exit status, its
stdio and pipe forwards work as for a task on the host.

After the container's start, pilot reads once (``RUNTIME inspect``) its first
process's PID, environment, working directory and user, and tries one
``nsenter ... sleep 0`` (the image has ``sleep``: the container runs it); each
task then runs as ``nsenter --target PID --mount --uts --ipc --net --pid
[--user] [-S UID -G GID] --wdns=DIR -- PFN ARGS`` with the environment the
runtime's exec would have given it (the container's, then the task's ``-e``
values, then what the worker sets for the task). What does not carry over
(capabilities, seccomp, cgroup, rlimits) is in docs/pmc-differences.md.
"""

from __future__ import annotations

import os
import subprocess
from typing import NamedTuple

INSPECT_TIMEOUT = 60.0
_FORMAT = "{{json .State.Pid}}\n{{json .Config.Env}}\n{{json .Config.WorkingDir}}\n{{json .Config.User}}"
# Options asking for a restriction a task that enters the namespaces would not have (a seccomp or AppArmor
# profile, fewer capabilities, the container's cgroup limits, its rlimits): their tasks go through the runtime.
RESTRICTING = frozenset(("--security-opt", "--cap-drop", "-m", "--memory", "--cpus", "--ulimit"))


class Entry(NamedTuple):
    """How to enter one started container: its first process and the task environment's base."""

    pid: int
    started: str  # the process's start time (/proc/PID/stat), so a reused PID is not taken for it
    env: dict[str, str]
    workdir: str
    credentials: tuple[str, ...]  # nsenter's user options
    prefix: tuple[str, ...]  # what runs before nsenter (setpriv --nnp where the container's process has it)
    why_not: str = ""  # why a task cannot enter it, though it runs (its user, a missing setpriv)


def restricted(container_options: tuple[str, ...]) -> str | None:
    """The option that makes a container's tasks go through the runtime's exec, if any."""
    for word in container_options:
        if word.partition("=")[0] in RESTRICTING:
            return word.partition("=")[0]
    return None


def inspect(runtime: str, name: str, env: dict[str, str]) -> Entry | str:
    """The started container's Entry, or why it cannot be entered."""
    try:
        res = subprocess.run(
            [runtime, "inspect", "--format", _FORMAT, name],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=INSPECT_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{runtime} inspect {name}: {exc}"
    if res.returncode != 0:
        return f"{runtime} inspect {name} exited {res.returncode}: {res.stderr.strip()}"
    from pilot.errors import ConfigError  # here: only once a container started (every rank imports this module)
    from pilot.util.boundedload import parse_json

    where = f"{runtime} inspect {name}"
    try:
        pid_text, env_text, workdir_text, user_text = res.stdout.strip().split("\n")
        pid, env_list, workdir, user = (
            parse_json(pid_text, where),
            parse_json(env_text, where) or [],
            parse_json(workdir_text, where),
            parse_json(user_text, where),
        )
    except (ValueError, ConfigError):
        return f"{runtime} inspect {name} said {res.stdout.strip()!r}, not its PID, env, working directory and user"
    started = start_time(pid)
    if not isinstance(pid, int) or pid <= 0 or started is None:
        return f"container {name} has no running process (PID {pid})"
    user_ids = _ids(user)
    if user_ids is None:
        return Entry(pid, started, {}, "/", (), (), f"it runs as user {user!r}, not as numeric IDs nsenter takes")
    base = dict(word.split("=", 1) for word in env_list if "=" in word)
    base.setdefault("HOME", _home(pid, user_ids[0]))
    credentials: tuple[str, ...] = ()
    if user_ids != (0, 0):
        credentials = ("-S", str(user_ids[0]), "-G", str(user_ids[1]))
    try:
        if os.readlink(f"/proc/{pid}/ns/user") != os.readlink("/proc/self/ns/user"):
            credentials = ("--user", *credentials)  # a rootless container: its user namespace first
    except OSError as exc:
        return Entry(pid, started, base, "/", (), (), f"its namespaces cannot be read: {exc.strerror or exc}")
    prefix: tuple[str, ...] = ()
    if _status(pid).get("NoNewPrivs") == "1":  # kept: it does not stop nsenter's setns
        import shutil  # here, not at the top: every rank imports this module before MPI_Init, shutil costs it ms

        setpriv = shutil.which("setpriv")
        if setpriv is None:
            return Entry(pid, started, base, "/", (), (), "its process has no_new_privs; setpriv is not on PATH")
        prefix = (setpriv, "--nnp")
    return Entry(pid, started, base, workdir or "/", credentials, prefix)


def start_time(pid: object) -> str | None:
    """The start time of process ``pid`` (field 22 of /proc/PID/stat), None when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def alive(entry: Entry) -> bool:
    """Whether the container's first process still runs (the same process, not one that got its PID since)."""
    return start_time(entry.pid) == entry.started


def argv(nsenter: str, entry: Entry, workdir: str | None, command: tuple[str, ...]) -> list[str]:
    """The task's command line; nsenter forks once, so the task is in the container's PID namespace."""
    return [
        *entry.prefix,
        nsenter,
        "--target",
        str(entry.pid),
        "--mount",
        "--uts",
        "--ipc",
        "--net",
        "--pid",
        *entry.credentials,
        f"--wdns={workdir or entry.workdir}",
        "--",
        *command,
    ]


def task_env(entry: Entry, exec_options: tuple[str, ...], worker_env: dict[str, str]) -> dict[str, str]:
    """The container's environment, then the task's ``-e`` values, then the variables the worker set for the task
    (those that differ from the worker's own environment: PMC_*, the run's mark, GPUs, the job's env profiles)."""
    env = dict(entry.env)
    for name, value in zip(exec_options[::2], exec_options[1::2]):
        if name in ("-e", "--env"):
            key, eq, val = value.partition("=")
            if eq:
                env[key] = val
            elif key in os.environ:  # -e NAME: the runtime passes the caller's value, if it has one
                env[key] = os.environ[key]
    env.update((key, val) for key, val in worker_env.items() if os.environ.get(key) != val)
    return env


def workdir(exec_options: tuple[str, ...]) -> str | None:
    """The task's working directory in the container (``-w``), None for the container's own."""
    found = None
    for name, value in zip(exec_options[::2], exec_options[1::2]):
        if name in ("-w", "--workdir"):
            found = value
    return found


def probe(nsenter: str, entry: Entry) -> str | None:
    """None when a task can enter the container, else nsenter's message (no permission, no such namespace)."""
    try:
        res = subprocess.run(
            argv(nsenter, entry, "/", ("sleep", "0")),
            env=entry.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=INSPECT_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    return None if res.returncode == 0 else f"exited {res.returncode}: {res.stderr.strip()}"


def _ids(user: str) -> tuple[int, int] | None:
    """(uid, gid) of the container's user setting; root's when empty."""
    if user in ("", "root", "0", "0:0", "root:root"):
        return 0, 0
    uid, _, gid = user.partition(":")
    if uid.isdigit() and gid.isdigit():
        return int(uid), int(gid)
    return None


def _home(pid: int, uid: int) -> str:
    """The user's home directory as the image's /etc/passwd says, "/" without one (what podman and docker set)."""
    try:
        with open(f"/proc/{pid}/root/etc/passwd") as fh:
            for row in fh:
                fields = row.rstrip("\n").split(":")
                if len(fields) >= 6 and fields[2] == str(uid):
                    return fields[5] or "/"
    except OSError:
        pass
    return "/"


def _status(pid: int) -> dict[str, str]:
    try:
        with open(f"/proc/{pid}/status") as fh:
            return {key: value.strip() for key, _, value in (row.partition(":") for row in fh)}
    except OSError:
        return {}
