"""A minimal kickstart-style invocation record for tasks not run by pegasus-kickstart.

pegasus-monitord takes an invocation's transformation, task id, start,
duration and exit status from the YAML record pegasus-kickstart prints; a
``<task>.out.NNN`` without one leaves the stampede DB with NULL exit codes
(and a database error). With --monitord-hack the worker appends this record
to the task's stdout file unless the task already wrote one (it was wrapped
by pegasus-kickstart), so plain PMC DAGs are monitored too.
"""

from __future__ import annotations

import getpass
import json
import os
import re

from pilot.monitor.records import iso_time

MARKER = b"- invocation:"
_YAML_UNSAFE = re.compile(r"[\x7f-\x9f\u2028\u2029\ufeff\ud800-\udfff\ufffe\uffff]")


def yaml_str(value: str) -> str:
    """A double-quoted YAML scalar on one line (a JSON string with YAML's non-printables escaped)."""
    return _YAML_UNSAFE.sub(lambda m: "\\u%04x" % ord(m.group()), json.dumps(value, ensure_ascii=False))


def has_record(fd: int, limit: int = 65536) -> bool:
    """Whether the task's stdout file (open for reading) already begins with a kickstart record."""
    try:
        if os.fstat(fd).st_size == 0:
            return False
        return MARKER in os.pread(fd, limit, 0)
    except OSError:
        return False


def raw_status(status: int) -> int:
    """Wait-status encoding kickstart reports: exit code << 8, or the signal number."""
    return -status if status < 0 else status << 8


def user_name() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


def invocation(
    transformation: str, derivation: str, start: float, duration: float, status: int, executable: str, hostname: str
) -> str:
    when = iso_time(start)
    lines = [
        "- invocation: True",
        "  version: 3.0",
        f"  start: {when}",
        f"  duration: {duration:.3f}",
        f"  transformation: {yaml_str(transformation)}",
        f"  derivation: {yaml_str(derivation)}",
        f"  hostname: {yaml_str(hostname)}",
        f"  user: {yaml_str(user_name())}",
        "  mainjob:",
        f"    start: {when}",
        f"    duration: {duration:.3f}",
        "    status:",
        f"      raw: {raw_status(status)}",
    ]
    if status >= 0:
        lines.append(f"      regular_exitcode: {status}")
    lines += [
        "    executable:",
        f"      file_name: {yaml_str(executable)}",
        f"  cwd: {yaml_str(os.getcwd())}",
    ]
    return "\n".join(lines) + "\n"
