"""``SUBMIT_DIR/submit.log``: the log of ``pilot submit --detach``, which drives in the background, and where
Parsl's own log lines go whatever the mode."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable

from pilot.errors import ConfigError
from pilot.util.safeopen import open_fd

LOG_FILE = "submit.log"


def detach(submit_dir: str, work: Callable[[], int]) -> int:
    """Double-fork a session leader that runs ``work()`` with stdout/stderr appended to submit.log and
    exits with its code. Returns the daemon's pid in the parent; never returns in the daemon."""
    log = os.path.join(submit_dir, LOG_FILE)
    try:  # opened here, so that a log that cannot be written is one line now, not a daemon that dies unseen
        fd = open_fd(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    except OSError as exc:
        raise ConfigError(f"{log}: cannot write the log of the background run: {exc.strerror}") from None
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid:
        os.close(fd)
        os.close(write_end)
        os.waitpid(pid, 0)  # the first child exits as soon as the daemon is forked
        with os.fdopen(read_end, "rb") as fh:
            text = fh.read().decode().strip()
        return int(text) if text.isdigit() else 0
    os.close(read_end)
    os.setsid()
    daemon = os.fork()
    if daemon:
        os.write(write_end, f"{daemon}\n".encode())
        os._exit(0)
    os.close(write_end)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    try:
        code = work()
    except BaseException as exc:  # noqa: BLE001 - the parent is gone: the log is the only place to say it
        print(f"pilot submit: {exc}", file=sys.stderr)
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def parsl_to_log(submit_dir: str) -> None:
    """Parsl's own log lines (a failed sbatch's "Submit command failed", "Retcode:1 STDOUT: STDERR:...") go to
    the submit directory's log, not the terminal: pilot submit and pilot cancel say what matters in their own lines."""
    parsl = logging.getLogger("parsl")
    parsl.setLevel(logging.WARNING)
    parsl.propagate = False
    for earlier in [h for h in parsl.handlers if getattr(h, "submit_log", False)]:  # an earlier call's, in this process
        parsl.removeHandler(earlier)
        earlier.close()
    try:
        fh = os.fdopen(open_fd(os.path.join(submit_dir, LOG_FILE), os.O_WRONLY | os.O_CREAT | os.O_APPEND), "a")
    except OSError:
        parsl.addHandler(logging.NullHandler())  # a directory that cannot be written fails with its own line later
        return
    handler = _LogFile(fh)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    parsl.addHandler(handler)


class _LogFile(logging.StreamHandler):
    """A handler on submit.log that closes the file it was given when it is closed."""

    submit_log = True

    def close(self) -> None:
        try:
            self.stream.close()
        finally:
            super().close()
