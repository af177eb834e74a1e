"""The ``[cluster-summary]`` record (pegasus-exitcode parses it) and the end-of-run utilisation report.

Formats follow pegasus-mpi-cluster, with one deliberate difference: the
summary's ``cpus`` is the total CPUs of the hosts (PMC always prints 0). Each
task's ``[cluster-task]`` record is pilot.contracts.taskrecord's.
"""

from __future__ import annotations

from pilot.contracts.taskrecord import iso_time


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
