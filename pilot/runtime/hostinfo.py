"""What a worker reports about its host: name, memory (MB), CPUs and GPU ids.

Options (--host-memory, --host-cpus, --host-gpus and the PMC_HOST_* aliases)
override detection on the master, for every host alike, as in PMC.

Every worker rank asks this once before its first task, so the common case
reads the kernel's own numbers (sysconf, /sys topology) and psutil, whose
import costs a rank some 25 ms of CPU at start, is loaded only where /sys
does not tell the physical cores.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Mapping


def hostname() -> str:
    """The host name a worker reports; PILOT_HOSTNAME overrides it.

    Workers that report the same name share one host's resources and run its
    host script once. The override is for containers whose host names
    collide, and for tests that play several hosts on one machine.
    """
    return os.environ.get("PILOT_HOSTNAME") or os.uname().nodename  # gethostname(2), without importing socket


def memory_mb() -> int:
    """Physical memory of the host (MemTotal), in MB."""
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // (1024 * 1024)


def cpu_count() -> int:
    """Logical CPUs of the host (PMC counts all cores, not the inherited mask)."""
    return os.cpu_count() or 1


def cpu_topology() -> tuple[int, int]:
    """(physical cores, sockets) of the host, 0 where unknown; they align multi-CPU tasks' CPU numbers."""
    cores: set[tuple[str, str]] = set()
    packages: set[str] = set()
    for path in glob.glob("/sys/devices/system/cpu/cpu[0-9]*/topology"):
        package, core = _read(path + "/physical_package_id"), _read(path + "/core_id")
        if package is not None:
            packages.add(package)
            if core is not None:
                cores.add((package, core))
    if cores:
        return len(cores), len(packages)
    import psutil  # noqa: PLC0415 - only where /sys has no topology (it reads /proc/cpuinfo then)

    try:
        return psutil.cpu_count(logical=False) or 0, len(packages)
    except (OSError, RuntimeError):
        return 0, len(packages)


def _read(path: str) -> str | None:
    try:
        with open(path) as fh:
            return fh.read().strip()
    except OSError:
        return None


def gpu_ids(env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """GPUs visible to this process.

    A *_VISIBLE_DEVICES variable set by the batch system wins (its ids are
    what tasks must be given back); otherwise NVIDIA device nodes are counted.
    Without either, the host has no GPUs (use --host-gpus to say otherwise).
    """
    env = os.environ if env is None else env
    for var in ("CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"):
        value = env.get(var)
        if value is not None:
            ids = tuple(v.strip() for v in value.split(",") if v.strip())
            if ids and ids[0] not in ("-1", "NoDevFiles"):
                return ids
            return ()
    nodes = [p for p in glob.glob("/dev/nvidia*") if re.fullmatch(r"/dev/nvidia\d+", p)]
    return tuple(str(i) for i in range(len(nodes)))
