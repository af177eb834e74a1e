"""The ``[cluster-task]`` record: one line per task attempt, written by ``pilot run`` into the task's stdout.

Its writer is a worker of ``pilot run`` (pilot.runtime.taskrecords, and the master
for a task its crashes stopped); its readers are ``pilot report``
(pilot.report.runs) and, outside pilot, pegasus-exitcode and pegasus-monitord.
The format follows pegasus-mpi-cluster::

    [cluster-task id=7, name=t1, start="2024-05-01T12:34:56.789-07:00", duration=1.235, status=0,
     app="/bin/echo", hostname="node7", slot=3, cpus=2, memory=100]

(one line), with one deliberate difference: ``status`` is the task's exit code
(or minus the signal number) instead of the raw wait status. ``id`` (the
Pegasus job id) is there only when the task has one. A field is added only at
the end, the existing ones kept byte for byte; the reader takes a record with
fields after ``memory`` it does not know.
"""

from __future__ import annotations

import datetime
import re
import time
from typing import NamedTuple

_last_second: tuple[int, str, str] = (-1, "", "")

_RECORD = re.compile(
    r'\[cluster-task (?:id=(?P<id>[^,]*), )?name=(?P<name>[^,]*), start="(?P<start>[^"]*)", '
    r'duration=(?P<duration>[0-9]{1,15}(?:\.[0-9]*)?), status=(?P<status>-?[0-9]{1,18}), app="(?P<app>[^"]*)", '
    r'hostname="(?P<host>[^"]*)", slot=(?P<slot>[0-9]{1,18}), cpus=(?P<cpus>[0-9]{1,18}), memory=(?P<memory>[0-9]{1,18})'
    r'(?:, [A-Za-z_][A-Za-z0-9_]*=(?:"[^"]*"|[^,"\]]*))*\]'  # fields a later pilot adds at the end
)


class TaskRecord(NamedTuple):
    """One record: one attempt of one task (fields in the writer's order)."""

    name: str
    start: float  # epoch; written to the millisecond
    duration: float  # seconds; written to the millisecond
    status: int  # exit code, or minus the signal number
    app: str  # the executable
    hostname: str
    slot: int  # the worker's rank
    cpus: int
    memory: int  # MB
    pegasus_id: str | None = None


def iso_time(epoch: float) -> str:
    """Local time as ``2024-05-01T12:34:56.789-07:00`` (kickstart/PMC style).

    A worker writes one per task, often thousands per second: the local-time
    conversion (a stat of /etc/localtime in libc) is done once per second.
    """
    global _last_second
    seconds = int(epoch)
    millis = int((epoch - seconds) * 1000)
    cached, stamp, zone = _last_second
    if seconds != cached:
        local = time.localtime(seconds)
        offset = local.tm_gmtoff // 60
        sign = "+" if offset >= 0 else "-"
        offset = abs(offset)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", local)
        zone = f"{sign}{offset // 60:02d}:{offset % 60:02d}"
        _last_second = (seconds, stamp, zone)
    return f"{stamp}.{millis:03d}{zone}"


def cluster_task(
    name: str,
    start: float,
    duration: float,
    status: int,
    app: str,
    hostname: str,
    slot: int,
    cpus: int,
    memory: int,
    pegasus_id: str | None = None,
) -> str:
    """The record of one task attempt, a whole line (``cluster_task(*record)`` writes a ``TaskRecord``)."""
    ident = f"id={pegasus_id}, " if pegasus_id else ""
    return (
        f'[cluster-task {ident}name={name}, start="{iso_time(start)}", duration={duration:.3f}, '
        f'status={status}, app="{app}", hostname="{hostname}", slot={slot}, cpus={cpus}, memory={memory}]\n'
    )


def read_task_record(line: str) -> TaskRecord | None:
    """The record in ``line`` (anywhere in it); None when it holds none, or one no pilot wrote (a number or a
    start time that does not parse)."""
    if "[cluster-task " not in line:
        return None
    m = _RECORD.search(line)
    if m is None:
        return None
    try:
        start = datetime.datetime.fromisoformat(m["start"]).timestamp()
    except ValueError:
        return None
    return TaskRecord(
        m["name"],
        start,
        float(m["duration"]),
        int(m["status"]),
        m["app"],
        m["host"],
        int(m["slot"]),
        int(m["cpus"]),
        int(m["memory"]),
        m["id"] or None,
    )
