"""What a workflow's jobs ask of the batch job their cluster runs in: queue, project, extra directives.

Pegasus submits a job to Slurm or PBS through HTCondor's glite/BLAHP and maps
its profiles there: ``queue`` (pegasus or globus namespace, else condor
``batch_queue``) to the partition or queue, ``project`` to the account, ``glite.arguments`` to one extra
directive line written verbatim (Pegasus drops every ``"`` in it), and
condor ``request_memory`` (MB) to the job's memory (``--mem``, ``-l mem``).
A cluster's batch job gets the values of its jobs merged in cluster order,
the last job that sets a key winning, as Pegasus merges the profiles of the
jobs it clusters; values from the site config are the default. The job
resources Pegasus sums for a clustered job (cores, memory, runtime) are not
batch options here: pilot sizes the job from the cluster's width and the
site's walltime, and the tasks ask the pilot for their cores and memory.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from pilot.errors import ConfigError
from pilot.planner.clustering import Cluster
from pilot.planner.model import Job
from pilot.planner.profiles import ProfileResolver
from pilot.util.safetext import is_plain
from providers import Scheduler


@dataclass(frozen=True)
class BatchOptions:
    queue: str | None = None
    account: str | None = None
    directives: tuple[str, ...] = ()
    asked: tuple[str, ...] = ()  # the profile keys its jobs set, for the warning on a site without batch system


def _first(key: str, *layers: dict[str, str]) -> str | None:
    """The first non-empty value of ``key`` among the namespaces' profiles."""
    for profiles in layers:
        value = profiles.get(key)
        if value not in (None, ""):
            return value
    return None


def _plain_words(value: str, job: Job, key: str) -> str:
    words = value.replace('"', "").split()
    bad = next((w for w in words if not is_plain(w)), None)
    if bad is not None or any(c in value for c in "\n\r\0"):
        raise ConfigError(f"{job.where}: {key} {value!r} cannot go into a batch directive: use words of letters, "
                          "digits and _.,:=@+/%- only")
    return " ".join(words)


def batch_options(cluster: Cluster, resolver: ProfileResolver, scheduler: Scheduler) -> BatchOptions:
    """The batch options of ``cluster``'s job on a site of ``scheduler`` (see the module doc): its plug-in says
    which directive lines a memory request and ``glite.arguments`` become (none without a batch system)."""
    queue = account = extra = memory = None
    asked: dict[str, None] = {}
    seen: dict[tuple, tuple] = {}  # jobs with no profiles of their own share their transformation's values
    for job in cluster.jobs:
        if job.command is not None:
            continue  # a data job of the planner's own
        values = seen.get(job.tx_key) if not job.profiles else None
        if values is None:
            values = _job_values(job, resolver, cluster.site)
            asked.update((key, None) for key, value in zip(KEYS, values) if value is not None)
            if not job.profiles:
                seen[job.tx_key] = values
        job_queue, job_account, job_extra, job_memory = values
        queue = job_queue or queue
        account = job_account or account
        extra = job_extra or extra
        memory = job_memory if job_memory is not None else memory
    directives = []
    if memory is not None and scheduler.memory_directive:
        directives.append(scheduler.memory_directive.format(memory))
    if extra and scheduler.directive_prefix:
        directives.append(f"{scheduler.directive_prefix} {extra}")
    return BatchOptions(queue, account, tuple(directives), tuple(asked))


KEYS = ("queue", "project", "glite.arguments", "request_memory")


def _job_values(job: Job, resolver: ProfileResolver, site: str) -> tuple:
    """(queue, project, glite.arguments as directive words, request_memory in MB) of one job, checked."""
    pegasus, globus = resolver.pegasus(job, site), resolver.other(job, site, "globus")
    condor = resolver.other(job, site, "condor")
    # condor batch_queue is the attribute glite gives the batch system; Pegasus' queue profile, when set, fills it
    queue = _first("queue", pegasus, globus) or _first("batch_queue", condor)
    project = _first("project", pegasus, globus)
    for key, value in (("queue", queue), ("project", project)):
        if value is not None and not is_plain(value):
            raise ConfigError(f"{job.where}: {key} {value!r} cannot go into a batch directive: use letters, "
                              "digits and _.,:=@+/%- only")
    raw = _first("glite.arguments", pegasus)
    mem = _first("request_memory", condor)
    return queue, project, None if raw is None else _plain_words(raw, job, "glite.arguments"), \
        None if mem is None else _megabytes(mem, job)


# HTCondor's units for a request (condor_submit: request_memory, request_disk): K/KB, M/MB, G/GB, T/TB, any case,
# powers of 1024, a space allowed before them; Ki/Mi/Gi/Ti(B) are read as the same binary units.
_QUANTITY = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE]([+-]?[0-9]+))?\s*(?:([kmgt])i?b?)?\s*\Z",
                       re.IGNORECASE)
_POWER = {"k": 1, "m": 2, "g": 3, "t": 4}


def htcondor_quantity(text: str, unit: str = "m") -> float | None:
    """``text`` as HTCondor reads a request_memory (``unit`` m: a bare number is MB) or request_disk (``unit``
    k: KB) value, in that unit: ``2048``, ``2048 MB``, ``1.5G``, ``512m``, ``1 GiB``. None: no finite number of
    0 or more (an expression, ``inf``, ``1e400``, ``-5``)."""
    m = _QUANTITY.match(text)
    if m is None:
        return None
    try:
        value = float(m.group(1) + (f"e{m.group(2)}" if m.group(2) else ""))
    except ValueError:
        return None
    value *= 1024.0 ** (_POWER[(m.group(3) or unit).lower()] - _POWER[unit])
    return value if math.isfinite(value) else None


def _megabytes(mem: str, job: Job) -> int:
    """condor request_memory as whole MB for a memory directive (rounded up, so the job gets what it asked for),
    read as HTCondor reads it: a number of MB, or with a unit (``htcondor_quantity``). A finite number, not
    negative (``inf`` or ``1e400`` would be no number at all, ``-5`` a directive the batch system refuses only
    when it is submitted)."""
    value = htcondor_quantity(mem)
    if value is None:
        raise ConfigError(f"{job.where}: condor request_memory {mem[:80]!r} is not an amount of memory: give a "
                          "number of MB, 0 or more, or one with HTCondor's unit (e.g. 2048, 2 GB, 512M)")
    return math.ceil(value)
