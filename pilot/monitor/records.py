"""``[cluster-task]`` and ``[cluster-summary]`` records (pegasus-exitcode parses them).

Formats follow pegasus-mpi-cluster, with two deliberate differences: a task's
``status`` is its exit code (or minus the signal number) instead of the raw
wait status, and the summary's ``cpus`` is the total CPUs of the hosts (PMC
always prints 0).
"""

from __future__ import annotations

import time


_last_second: tuple[int, str, str] = (-1, "", "")


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
    ident = f"id={pegasus_id}, " if pegasus_id else ""
    return (
        f"[cluster-task {ident}name={name}, start=\"{iso_time(start)}\", duration={duration:.3f}, "
        f"status={status}, app=\"{app}\", hostname=\"{hostname}\", slot={slot}, cpus={cpus}, memory={memory}]\n"
    )


def cluster_summary(
    ok: bool,
    tasks: int,
    submitted: int,
    succeeded: int,
    failed: int,
    start: float,
    duration: float,
    pid: int,
    app: str,
    runtime: float,
    slots: int,
    cpus: int,
) -> str:
    return (
        f"[cluster-summary stat=\"{'ok' if ok else 'failed'}\", tasks={tasks}, submitted={submitted}, "
        f"succeeded={succeeded}, failed={failed}, extra=0, start=\"{iso_time(start)}\", duration={duration:.3f}, "
        f"pid={pid}, app=\"{app}\", runtime={runtime:.3f}, slots={slots}, cpus={cpus}]\n"
    )


def utilisation_report(runtime: float, wall: float, makespan: float, workers: int, succeeded: int) -> list[str]:
    """The end-of-run report (PMC's formulas): sum of task runtimes over wall x ranks."""
    with_master = runtime / (wall * (workers + 1)) if runtime > 0 and wall > 0 else 0.0
    without = runtime / (wall * workers) if runtime > 0 and wall > 0 and workers else 0.0
    throughput = succeeded / makespan if makespan > 0 else 0.0
    return [
        f"Resource utilization (with master): {with_master:.6f}",
        f"Resource utilization (without master): {without:.6f}",
        f"Total runtime of tasks: {runtime:.6f} seconds ({runtime / 60:.6f} minutes)",
        f"Wall time: {wall:.6f} seconds ({wall / 60:.6f} minutes)",
        f"Makespan: {makespan:.6f} seconds ({makespan / 60:.6f} minutes)",
        f"Throughput: {throughput:.6f} tasks/second",
    ]
