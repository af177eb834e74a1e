"""What a workflow's jobs ask of the batch job their cluster runs in: queue, project, extra directives.

Pegasus submits a job to Slurm or PBS through HTCondor's glite/BLAHP and maps
its profiles there: ``queue`` (pegasus or globus namespace, else condor
``batch_queue``) to the partition or queue, ``project`` to the account, ``glite.arguments`` to one extra
directive line written verbatim (Pegasus drops every ``"`` in it), and
condor ``request_memory`` (MB) to the job's memory (``--mem``, ``-l mem``).
A cluster's batch job gets the values of its jobs merged in cluster order,
the last job that sets a key winning, as Pegasus merges the profiles of the
jobs it clusters; values from the site config are the default.

Pegasus' data jobs take the profiles of their transformations, ``pegasus::transfer`` (stage-in and
stage-out), ``pegasus::dirmanager`` (create-dir), ``pegasus::cleanup``, ``pegasus::rc-client``
(registration) and ``pegasus::chmod``, from the transformation catalog, with the site's and the
properties' under them, as Pegasus gives a data job its transformation's entry (1000genome puts its
transfers in an ``xfer`` QOS this way). In a cluster of compute and data jobs the compute jobs' values
win: the data jobs' fill only what no compute job sets. A clustered job (horizontal, label or whole)
then takes the profiles of the aggregator's own entry, ``pegasus::mpiexec``, over its jobs', as
Pegasus gives a PMC job the profiles of pegasus-mpi-cluster's entry. The job
resources Pegasus sums for a clustered job (cores, memory, runtime) are not
batch options here: pilot sizes the job from the cluster's width and the
site's walltime, and the tasks ask the pilot for their cores and memory. What
those two kinds of entry say that acts on nothing yet is said once per plan
(note_unused_keys).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Callable

from pilot.contracts.clusters import ClusterKind
from pilot.errors import ConfigError
from pilot.planner import profilekeys, replaced
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


def _plain_words(value: str, where: str, key: str) -> str:
    words = value.replace('"', "").split()
    bad = next((w for w in words if not is_plain(w)), None)
    if bad is not None or any(c in value for c in "\n\r\0"):
        raise ConfigError(f"{where}: {key} {value!r} cannot go into a batch directive: use words of letters, "
                          "digits and _.,:=@+/%- only")
    return " ".join(words)


def batch_options(cluster: Cluster, resolver: ProfileResolver, scheduler: Scheduler) -> BatchOptions:
    """The batch options of ``cluster``'s job on a site of ``scheduler`` (see the module doc): its plug-in says
    which directive lines a memory request and ``glite.arguments`` become (none without a batch system)."""
    asked: dict[str, None] = {}
    seen: dict[tuple, tuple] = {}  # jobs with no profiles of their own share their transformation's values
    merged: list[tuple] = [(None,) * len(KEYS), (None,) * len(KEYS)]  # data jobs' values, compute jobs'
    last: list[tuple | None] = [None, None]  # the values merged last into each: the same again changes nothing
    for job in cluster.jobs:
        values = seen.get(job.tx_key) if not job.profiles else None
        if values is None:
            values = _job_values(job, resolver, cluster.site)
            asked.update((key, None) for key, value in zip(KEYS, values) if value is not None)
            if not job.profiles:
                seen[job.tx_key] = values
        slot = job.command is None  # 1: a compute job, 0: a data job of the planner's own
        if values is not last[slot]:  # most jobs share their transformation's tuple: no merge each
            last[slot] = values
            merged[slot] = _over(merged[slot], values)
    queue, account, extra, memory = _over(merged[0], merged[1])
    if cluster.kind in CLUSTERED:
        aggregator = aggregator_values(resolver, cluster.site)
        if aggregator is not None:
            asked.update((key, None) for key, value in zip(KEYS, aggregator) if value is not None)
            queue, account, extra, memory = _over((queue, account, extra, memory), aggregator)
    directives = []
    if memory is not None and scheduler.memory_directive:
        directives.append(scheduler.memory_directive.format(memory))
    if extra and scheduler.directive_prefix:
        directives.append(f"{scheduler.directive_prefix} {extra}")
    return BatchOptions(queue, account, tuple(directives), tuple(asked))


KEYS = ("queue", "project", "glite.arguments", "request_memory")
# The transformation pegasus-mpi-cluster is in Pegasus' transformation catalog, and the clusters it runs.
AGGREGATOR = ("pegasus", "mpiexec", None)
CLUSTERED = (ClusterKind.HORIZONTAL, ClusterKind.LABEL, ClusterKind.WHOLE)


# The keys of a data job's or the aggregator's own entry that act on its batch job or task, by namespace; every
# other key the catalog reader let pass in silence (one pilot honours on a job's transformation) is said once per
# plan with what becomes of it (the keys pilot replaces everywhere were said where the catalog was read).
BATCH_KEYS = {"pegasus": frozenset(("queue", "project", "glite.arguments")), "globus": frozenset(("queue", "project")),
              "condor": frozenset(("request_memory", "batch_queue"))}
DATA_KEYS = {**BATCH_KEYS, "env": None}  # None: every key (a data task's environment)
TRANSFER_KEYS = {**DATA_KEYS, "pegasus": BATCH_KEYS["pegasus"] | {"transfer.threads", "transfer.arguments"}}
DATA_INSTEAD = ("no effect on a data job: its task asks the pilot for one core, and its batch job has the site "
                "config's nodes, ranks_per_node and walltime; set those there, or queue, project or "
                "glite.arguments here")
AGGREGATOR_INSTEAD = ("no effect yet on the clustered job: its batch job has as many ranks as the cluster is wide, "
                      "at most the site config's nodes x ranks_per_node, for the site config's walltime, and its "
                      "tasks the environment of their own transformations; set those there, or glite.arguments "
                      "here (1000genome's --nodes=2 --ntasks-per-node=1)")


def note_unused_keys(clusters: list[Cluster], data_jobs: list[Job], resolver: ProfileResolver) -> None:
    """Say once per plan each key of a data transformation's or the aggregator's own entry that acts on nothing:
    a workflow's word about a batch job is never dropped in silence. Called by the plan before emit, whose
    forked workers' notes would not reach the plan's (planner.replaced)."""
    if not resolver.catalogs.transformations:
        return
    # dicts, not sets: the lines come in the order the plan made its jobs, the same each time
    sites = dict.fromkeys(c.site for c in clusters if c.kind is ClusterKind.DATA or c.kind in CLUSTERED)
    for key, name in dict.fromkeys((job.tx_key, job.name) for job in data_jobs):
        for site in sites:
            _note_unused(resolver, key, site, TRANSFER_KEYS if name == "transfer" else DATA_KEYS, DATA_INSTEAD)
    for site in dict.fromkeys(c.site for c in clusters if c.kind in CLUSTERED):
        _note_unused(resolver, AGGREGATOR, site, BATCH_KEYS, AGGREGATOR_INSTEAD)


def _note_unused(resolver: ProfileResolver, key: tuple, site: str, honoured: dict[str, frozenset[str] | None],
                 instead: str) -> None:
    """note_unused_keys for transformation ``key``'s entry on ``site``: its keys ``honoured`` does not name."""
    tx = resolver.catalogs.find_transformation(key)
    if tx is None:
        return
    entry = tx.sites.get(site)
    where = f"{entry.where if entry is not None else 'the transformation catalog'}, " \
            f"transformation {tx.namespace}::{tx.name}"
    for ns in ("pegasus", "globus", "condor", "env"):
        acts = honoured.get(ns, frozenset())
        if acts is None:
            continue
        for name, value in resolver.transformation_profiles(tx, site, ns).items():
            if name not in acts and (ns == "env" or profilekeys.replacement(ns, name, value, "entry") is None):
                replaced.note(f"{ns}::{name}", where, instead)


def _over(below: tuple, above: tuple) -> tuple:
    """``above``'s values where set, else ``below``'s."""
    return tuple(b if a is None else a for b, a in zip(below, above))


def aggregator_values(resolver: ProfileResolver, site: str) -> tuple | None:
    """The values of the aggregator's own entry (``pegasus::mpiexec``: the transformation and its entry for
    ``site``), as _job_values reads a job's; None: the catalog has no such entry. Looked up once per site."""
    memo = resolver.memo.setdefault("aggregator", {})
    if site not in memo:
        tx = resolver.catalogs.find_transformation(AGGREGATOR)
        memo[site] = None if tx is None else _values(
            lambda ns: resolver.transformation_profiles(tx, site, ns),
            "the transformation catalog: transformation pegasus::mpiexec")
    return memo[site]


def _job_values(job: Job, resolver: ProfileResolver, site: str) -> tuple:
    """(queue, project, glite.arguments as directive words, request_memory in MB) of one job, checked."""
    where = job.where if job.command is None else f"{job.where}, from transformation {job.tx_label}'s profiles"
    return _values(lambda ns: resolver.pegasus(job, site) if ns == "pegasus" else resolver.other(job, site, ns), where)


def _values(profiles_of: Callable[[str], dict[str, str]], where: str) -> tuple:
    """_job_values of the profiles ``profiles_of(namespace)`` gives; an error names ``where``."""
    pegasus, globus, condor = profiles_of("pegasus"), profiles_of("globus"), profiles_of("condor")
    # condor batch_queue is the attribute glite gives the batch system; Pegasus' queue profile, when set, fills it
    queue = _first("queue", pegasus, globus) or _first("batch_queue", condor)
    project = _first("project", pegasus, globus)
    for key, value in (("queue", queue), ("project", project)):
        if value is not None and not is_plain(value):
            raise ConfigError(f"{where}: {key} {value!r} cannot go into a batch directive: use letters, "
                              "digits and _.,:=@+/%- only")
    raw = _first("glite.arguments", pegasus)
    mem = _first("request_memory", condor)
    return queue, project, None if raw is None else _plain_words(raw, where, "glite.arguments"), \
        None if mem is None else _megabytes(mem, where)


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


def _megabytes(mem: str, where: str) -> int:
    """condor request_memory as whole MB for a memory directive (rounded up, so the job gets what it asked for),
    read as HTCondor reads it: a number of MB, or with a unit (``htcondor_quantity``). A finite number, not
    negative (``inf`` or ``1e400`` would be no number at all, ``-5`` a directive the batch system refuses only
    when it is submitted)."""
    value = htcondor_quantity(mem)
    if value is None:
        raise ConfigError(f"{where}: condor request_memory {mem[:80]!r} is not an amount of memory: give a "
                          "number of MB, 0 or more, or one with HTCondor's unit (e.g. 2048, 2 GB, 512M)")
    return math.ceil(value)
