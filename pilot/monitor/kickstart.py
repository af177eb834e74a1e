"""Minimal kickstart-style invocation records for tasks not run by pegasus-kickstart.

pegasus-monitord takes an invocation's transformation, task id, start,
duration and exit status from the YAML record pegasus-kickstart prints; a
``<task>.out.NNN`` without one leaves the stampede DB with NULL exit codes
(and a database error). With --monitord-hack the worker appends this record
to the task's stdout file unless the task already wrote one (it was wrapped
by pegasus-kickstart), so plain PMC DAGs are monitored too.

With --invocation-records (the batch jobs ``pilot plan`` writes) the worker
writes instead a record in kickstart's XML form into the task's stdout stream,
the one pegasus-monitord reads from a clustered job's output: that form is the
only one whose argument vector and stderr monitord keeps for each task (it
drops a YAML record's arguments), so pegasus-analyzer can show a failed task's
arguments and stderr. No file is created per task: a failed task's stderr is
read back from the worker's stderr file by offset (its last 60 kB, as monitord
keeps 64 kB per job at most); a task that succeeded carries none, which keeps
the job output small for chatty tasks (their stderr is in the -e file).
"""

from __future__ import annotations

import json
import os
import re

from pilot.contracts.submitdir import user_name
from pilot.contracts.taskrecord import iso_time
from pilot.dag.lexer import quote_arg

STDERR_LIMIT = 60000
# Characters XML 1.0 forbids (expat rejects the whole job output over one of them).
_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
MARKER = b"- invocation:"
_YAML_UNSAFE = re.compile(r"[\x7f-\x9f\u2028\u2029\ufeff\ud800-\udfff\ufffe\uffff]")


def yaml_str(value: str) -> str:
    """A double-quoted YAML scalar on one line (a JSON string with YAML's non-printables escaped)."""
    return _YAML_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", json.dumps(value, ensure_ascii=False))


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
        f"  hostaddr: {yaml_str(host_address(hostname))}",
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


def tail(fd: int, start: int, end: int, limit: int = STDERR_LIMIT) -> str:
    """What a task wrote to ``fd`` between offsets ``start`` and ``end`` (its last ``limit`` bytes)."""
    if end <= start:
        return ""
    begin = max(start, end - limit)
    try:
        data = os.pread(fd, end - begin, begin)
    except OSError:
        return ""
    return data.decode("utf-8", "replace")


def _cdata(text: str) -> str:
    text = _XML_BAD.sub("?", text)
    return "<![CDATA[" + text.replace("]]>", "]]]]><![CDATA[>") + "]]>"


def _attr(text: str) -> str:
    """A double-quoted XML attribute value (xml.sax.saxutils would import urllib, 40 ms per worker)."""
    text = _XML_BAD.sub("?", text)
    return '"' + text.replace("&", "&amp;").replace("<", "&lt;").replace('"', "&quot;").replace("\n", "&#10;") + '"'


_PROCESS: dict[str, str] = {}


def _process_attrs() -> tuple[str, str]:
    """The user and working directory, the same for every task of a worker: made once."""
    if not _PROCESS:
        _PROCESS["user"] = _attr(user_name())
        _PROCESS["cwd"] = _cdata(os.getcwd())
    return _PROCESS["user"], _PROCESS["cwd"]


def host_address(hostname: str) -> str:
    """The address kickstart reports beside the host name (``hostaddr``), made once per host.

    pegasus-monitord reads it whenever a clustered job's records name more than one host (its host
    table needs an address for each); tasks of a multi-node cluster do. A name that does not resolve
    gets 0.0.0.0, which monitord stores as any other.
    """
    key = "addr:" + hostname
    if key not in _PROCESS:
        import socket  # noqa: PLC0415 - only workers that write records, once

        try:
            _PROCESS[key] = socket.gethostbyname(hostname)
        except OSError:
            _PROCESS[key] = "0.0.0.0"
    return _PROCESS[key]


def xml_invocation(
    transformation: str,
    derivation: str,
    start: float,
    duration: float,
    status: int,
    argv: list[str],
    hostname: str,
    stderr: str = "",
    cwd: str | None = None,
) -> str:
    """One invocation record in kickstart's XML form (version 2), as monitord's XML parser reads it;
    ``cwd``: the task's own working directory, where it has one (else the worker's)."""
    when = iso_time(start)
    if status >= 0:
        outcome = f'<status raw="{raw_status(status)}"><regular exitcode="{status}"/></status>'
    else:
        outcome = f'<status raw="{raw_status(status)}"><signalled signal="{-status}">killed</signalled></status>'
    args = " ".join(quote_arg(a) for a in argv[1:])
    user, here = _process_attrs()
    cwd = here if cwd is None else _cdata(cwd)
    lines = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<invocation xmlns="http://pegasus.isi.edu/schema/invocation" version="2.3" start="{when}" '
        f'duration="{duration:.3f}" transformation={_attr(transformation)} derivation={_attr(derivation)} '
        f"hostname={_attr(hostname)} hostaddr={_attr(host_address(hostname))} user={user}>",
        f'<mainjob start="{when}" duration="{duration:.3f}">',
        outcome,
        f'<statcall error="0"><file name={_attr(argv[0])}/></statcall>',
        f'<argument-vector><arg nr="1">{_cdata(args)}</arg></argument-vector>' if args else "<argument-vector/>",
        "</mainjob>",
        f"<cwd>{cwd}</cwd>",
    ]
    if stderr:
        lines.append(f'<statcall error="0" id="stderr"><data>{_cdata(stderr)}</data></statcall>')
    lines.append("</invocation>")
    return "\n".join(lines) + "\n"
