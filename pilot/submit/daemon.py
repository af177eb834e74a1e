"""``pilot submit --detach``: drive in the background, logging to ``SUBMIT_DIR/submit.log``."""

from __future__ import annotations

import os
import sys
from typing import Callable

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
