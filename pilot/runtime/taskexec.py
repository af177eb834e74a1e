"""Start a task, collect its forwarded I/O, and wait for it without spinning.

Spawning uses ``os.posix_spawnp`` (vfork+exec in glibc): a worker that holds
MPI buffers would pay for copying page tables with fork. Each task gets its
own process group (so the whole tree can be signalled at abort), default
dispositions for the signals Python ignores (SIGPIPE, SIGXFSZ), stdin from
/dev/null and its stdout/stderr dup'ed from already-open files.

Waiting is event driven: SIGCHLD writes to a wakeup pipe, and the worker
selects on that pipe plus the task's forwarding pipes, so a task's exit is
seen at once and an idle wait costs no CPU. This works on any Linux kernel
(pidfd would need 5.3; RHEL 8 ships 4.18).

Its records are plain slotted classes: importing dataclasses costs every
worker rank some 10 ms of CPU at start, before MPI_Init.
"""

from __future__ import annotations

import os
import select
import signal
import stat
import time
from typing import TYPE_CHECKING

from pilot.runtime.protocol import KILL_GRACE
from pilot.util.safeopen import read_at_most

if TYPE_CHECKING:  # annotations only: a worker imports this module at start
    from collections.abc import Callable, Sequence
    from types import FrameType

FILE_FORWARD_LIMIT = 1024 * 1024


class ChildWaker:
    """SIGCHLD -> wakeup fd, installed once per worker process (main thread)."""

    def __init__(self) -> None:
        self.rfd, self.wfd = os.pipe()
        os.set_blocking(self.rfd, False)
        os.set_blocking(self.wfd, False)
        signal.signal(signal.SIGCHLD, _ignore)
        self._old = signal.set_wakeup_fd(self.wfd, warn_on_full_buffer=False)

    def drain(self) -> None:
        try:
            while len(os.read(self.rfd, 4096)) == 4096:  # a short read took all there was
                pass
        except BlockingIOError:
            pass

    def close(self) -> None:
        signal.set_wakeup_fd(self._old)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.close(self.rfd)
        os.close(self.wfd)


def _ignore(signum: int, frame: FrameType | None) -> None:  # a signal handler's signature
    pass


class Pipe:
    """The worker's read end of one -f VAR=FILE forward, and what came through it."""

    __slots__ = ("fd", "var", "dest", "chunks", "open")

    def __init__(self, fd: int, var: str, dest: str) -> None:
        self.fd = fd
        self.var = var
        self.dest = dest
        self.chunks: list[bytes] = []
        self.open = True

    def close(self) -> None:
        if self.open:
            os.close(self.fd)
            self.open = False


class Running:
    """A started task: its pid, start times, forwarding pipes, and how it ended."""

    __slots__ = ("pid", "start", "started", "pipes", "kill_at", "status")

    def __init__(self, pid: int, start: float, started: float, pipes: list[Pipe]) -> None:
        self.pid = pid
        self.start = start
        self.started = started  # monotonic
        self.pipes = pipes
        self.kill_at: float | None = None
        self.status: int | None = None


_DEVNULL = -1


def _devnull() -> int:
    """/dev/null for tasks' stdin, opened once (close-on-exec; dup'ed onto 0 in the child)."""
    global _DEVNULL
    if _DEVNULL < 0:
        fd = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        if fd < 3:  # a worker started with stdio closed: DUP2 onto itself would keep close-on-exec (glibc < 2.29)
            import fcntl  # noqa: PLC0415 - only a worker started with its stdio closed

            high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
            os.close(fd)
            fd = high
        _DEVNULL = fd
    return _DEVNULL


def limited_argv(argv: list[str], memory_mb: int) -> list[str]:
    """Wrap argv so the task runs under RLIMIT_AS/RLIMIT_DATA of its request (--strict-limits).

    posix_spawn has no rlimit attribute, lowering the worker's own limit
    around the spawn breaks glibc's stack mmap, and preexec hooks force a slow
    fork; ``sh`` sets the limits and execs the task (argv passed as
    arguments, never interpolated into the script).
    """
    kb = str(memory_mb * 1024)
    return ["/bin/sh", "-c", 'ulimit -v "$0" && ulimit -d "$0" && exec "$@"', kb, *argv]


def spawn(
    argv: list[str],
    env: dict[str, str],
    stdout_fd: int,
    stderr_fd: int,
    pipe_forwards: Sequence[tuple[str, str]] = (),
    stdin_fd: int | None = None,
) -> Running:
    """Start ``argv`` (stdin from ``stdin_fd``, else /dev/null); raise OSError if it cannot be executed."""
    pipes: list[Pipe] = []
    child_ends: list[int] = []
    try:
        if pipe_forwards:
            env = dict(env)
            for var, dest in pipe_forwards:
                r, w = os.pipe()
                os.set_blocking(r, False)
                os.set_inheritable(w, True)
                child_ends.append(w)
                pipes.append(Pipe(r, var, dest))
                env[var] = str(w)
        actions = [
            (os.POSIX_SPAWN_DUP2, _devnull() if stdin_fd is None else stdin_fd, 0),
            (os.POSIX_SPAWN_DUP2, stdout_fd, 1),
            (os.POSIX_SPAWN_DUP2, stderr_fd, 2),
        ]
        start = time.time()
        started = time.monotonic()
        pid = os.posix_spawnp(
            _in_this_directory(argv[0]),
            argv,
            env,
            file_actions=actions,
            setpgroup=0,
            setsigdef=(signal.SIGPIPE, signal.SIGXFSZ),
            setsigmask=(),
        )
    except BaseException:
        for pipe in pipes:
            pipe.close()
        raise
    finally:
        for w in child_ends:
            os.close(w)
    return Running(pid, start, started, pipes)


def _in_this_directory(name: str) -> str:
    """pegasus-mpi-cluster's lookup of a program named without a ``/``: an executable of that name in the
    working directory comes first, then PATH (which posix_spawnp searches). Costs one access() only for such names."""
    if "/" in name or not os.access(name, os.X_OK) or os.path.isdir(name):
        return name
    return "./" + name


def spawn_in(
    cwd: str | None,
    stdio: tuple[str, str, str] | None,
    argv: list[str],
    env: dict[str, str],
    stdout_fd: int,
    stderr_fd: int,
    pipe_forwards: Sequence[tuple[str, str]] = (),
) -> Running:
    """``spawn`` in the task's working directory with its own stdio files, as kickstart's ``-w`` and
    ``-i/-o/-e`` run a Pegasus job.

    posix_spawn has no directory attribute, so the worker enters the directory
    for the moment of the spawn (a relative executable or stdio file is found
    there too) and returns to its own. Stdout and stderr files are made anew
    for each attempt; the task's records still go to ``stdout_fd``, the job
    output. An OSError names the directory or file that failed.
    """
    home = os.getcwd()
    if cwd is not None:
        os.chdir(cwd)
    opened: list[int] = []
    try:
        fds: list[int | None] = [None, stdout_fd, stderr_fd]
        for k, name in enumerate(stdio or ()):
            if name:
                flags = os.O_RDONLY if k == 0 else os.O_WRONLY | os.O_CREAT | os.O_TRUNC
                fd = os.open(name, flags | os.O_CLOEXEC, 0o666)
                opened.append(fd)
                fds[k] = fd
        return spawn(argv, env, fds[1], fds[2], pipe_forwards, stdin_fd=fds[0])  # type: ignore[arg-type]  # stdout and stderr are always set: only stdin may be None
    finally:
        for fd in opened:
            os.close(fd)
        if cwd is not None:
            os.chdir(home)


def read_pipes(run: Running, ready: list[int] | None = None) -> None:
    """Read what is available on (ready) forwarding pipes; close them at EOF."""
    for pipe in run.pipes:
        if not pipe.open or (ready is not None and pipe.fd not in ready):
            continue
        while True:
            try:
                data = os.read(pipe.fd, 1 << 16)
            except BlockingIOError:
                break
            if not data:
                pipe.close()
                break
            pipe.chunks.append(data)


def reap(run: Running) -> bool:
    """True (and ``run.status`` set) once the task has exited."""
    pid, wstatus = os.waitpid(run.pid, os.WNOHANG)
    if pid == 0:
        return False
    run.status = os.waitstatus_to_exitcode(wstatus)
    return True


def signal_group(pid: int, signum: int) -> None:
    try:
        os.killpg(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def wait(run: Running, waker: ChildWaker, must_end: Callable[[], bool], check_every: float = 0.05) -> None:
    """Block until the task exits, reading its pipes.

    ``must_end()`` is called at least every ``check_every`` seconds; once it
    returns True the task's group gets SIGTERM, then SIGKILL KILL_GRACE
    seconds later.
    """
    # The first look is the select: a task that ends before it has already
    # written to the wakeup pipe, so nothing is missed.
    while True:
        fds = [waker.rfd]
        fds.extend(p.fd for p in run.pipes if p.open)
        timeout = check_every
        if run.kill_at is not None:
            timeout = max(0.0, min(timeout, run.kill_at - time.monotonic()))
        ready, _, _ = select.select(fds, [], [], timeout)
        if ready:
            if waker.rfd in ready:
                waker.drain()
            if len(fds) > 1:
                read_pipes(run, ready)
        if run.kill_at is None:
            if must_end():
                signal_group(run.pid, signal.SIGTERM)
                run.kill_at = time.monotonic() + KILL_GRACE
        elif time.monotonic() >= run.kill_at:
            signal_group(run.pid, signal.SIGKILL)
            run.kill_at = float("inf")
        if reap(run):
            break
    # Take what the task wrote before it exited; a pipe still held open by a
    # background grandchild must not block us, so read only what is there.
    read_pipes(run)
    for pipe in run.pipes:
        pipe.close()


def pipe_data(run: Running) -> list[tuple[str, bytes]]:
    """(destination, data) per pipe forward, in declaration order."""
    return [(p.dest, b"".join(p.chunks)) for p in run.pipes]


def read_file_forward(src: str) -> bytes | None:
    """Read (at most 1 MB) and delete a file-forward source.

    None when the task did not write it: as in PMC, a missing source means
    nothing to forward (a task may succeed without output). ValueError when it
    is not a regular file, too large or unreadable.
    """
    try:
        st = os.stat(src)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ValueError(f"stat failed on file {src}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"{src} is not a file")
    try:
        data = read_at_most(src, FILE_FORWARD_LIMIT + 1)
    except OSError as exc:
        raise ValueError(f"Unable to read {src}: {exc.strerror or exc}") from None
    finally:
        try:
            os.unlink(src)
        except OSError:
            pass
    if len(data) > FILE_FORWARD_LIMIT:
        raise ValueError(f"File {src} is too large (over 1 MB); write large outputs to a file instead")
    return data
