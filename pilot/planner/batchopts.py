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
Pegasus gives a PMC job the profiles of pegasus-mpi-cluster's entry; that entry's ``nodes``, ``ppn`` and
``cores`` (globus ``hostcount``, ``xcount``, ``count``) also size its batch job, and its ``runtime``
(``maxwalltime`` in minutes) is its walltime, rounded up to a whole minute, as Pegasus' glite style asks
for a PMC job (NODES, PROCS, CORES, WALLTIME; GLite.java): ``cores`` with one of the other two gives the
third, and alone the ranks. A job's own ``nodes``, ``cores`` and ``runtime`` are its task's (a task runs on
one node), so no job's values size a batch job: without the aggregator's, pilot sizes it from the
cluster's width and the site config's ranks_per_node and walltime. A size the site config cannot give (more
nodes than its ``nodes``, a walltime over its ``max_walltime``, fewer than the two ranks a pilot needs) is
refused in one line naming the entry. What those two kinds of entry say that acts on nothing yet is said
once per plan (note_unused_keys).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pilot.contracts.clusters import ClusterKind
from pilot.errors import ConfigError
from pilot.planner import profilekeys, replaced
from pilot.planner.model import Cluster, Job
from pilot.planner.profiles import Layers, ProfileResolver
from pilot.sites import SiteConfig
from pilot.siteschema import format_walltime, parse_walltime
from pilot.util.safetext import is_plain
from providers import scheduler_for

if TYPE_CHECKING:  # resolve reads each job's values with job_values
    from pilot.planner.resolve import Aggregator, Template


@dataclass(frozen=True)
class Size:
    """The batch job's size the aggregator's entry asks for; None: the site config's (jobrequest.request_for)."""

    nodes: int | None = None
    ranks_per_node: int | None = None
    ranks: int | None = None  # cores alone: the ranks, spread over nodes as the site config's ranks_per_node allow
    walltime_minutes: float | None = None


@dataclass(frozen=True)
class BatchOptions:
    queue: str | None = None
    account: str | None = None
    directives: tuple[str, ...] = ()
    asked: tuple[str, ...] = ()  # the profile keys its jobs set, for the warning on a site without batch system
    size: Size = Size()


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
        raise ConfigError(
            f"{where}: {key} {value!r} cannot go into a batch directive: use words of letters, "
            "digits and _.,:=@+/%- only"
        )
    return " ".join(words)


def batch_options(
    cluster: Cluster, templates: Iterable[Template], aggregator: Aggregator | None, site: SiteConfig
) -> BatchOptions:
    """The batch options of ``cluster``'s job on ``site`` (see the module doc), from its jobs' ``templates`` (by
    their places; planner.resolve) and, for a clustered job, the ``aggregator``'s entry on the cluster's site:
    its scheduler's plug-in says which directive lines a memory request and ``glite.arguments`` become (none
    without a batch system)."""
    scheduler = scheduler_for(site)
    size = Size()
    asked: dict[str, None] = {}
    merged: list[tuple] = [(None,) * len(KEYS), (None,) * len(KEYS)]  # data jobs' values, compute jobs'
    last: list[tuple | None] = [None, None]  # the values merged last into each: the same again changes nothing
    for job, template in zip(cluster.jobs, templates):
        values = template.batch
        if values is None:
            continue  # a sub-workflow's: no batch job of this cluster's
        slot = job.command is None  # 1: a compute job, 0: a data job of the planner's own
        if values is not last[slot]:  # most jobs share their transformation's tuple: no merge each
            last[slot] = values
            merged[slot] = _over(merged[slot], values)
            asked.update((key, None) for key, value in zip(KEYS, values) if value is not None)
    queue, account, extra, memory = _over(merged[0], merged[1])
    if cluster.kind in CLUSTERED and aggregator is not None:
        if aggregator.values is not None:
            asked.update((key, None) for key, value in zip(KEYS, aggregator.values) if value is not None)
            queue, account, extra, memory = _over((queue, account, extra, memory), aggregator.values)
        if aggregator.size is not None:
            asked.update(dict.fromkeys(aggregator.size[1]))
            size = aggregator.size[0]
    directives = []
    if memory is not None and scheduler.memory_directive:
        directives.append(scheduler.memory_directive.format(memory))
    if extra and scheduler.directive_prefix:
        directives.append(f"{scheduler.directive_prefix} {extra}")
    return BatchOptions(queue, account, tuple(directives), tuple(asked), size)


KEYS = ("queue", "project", "glite.arguments", "request_memory")
# The transformation pegasus-mpi-cluster is in Pegasus' transformation catalog, and the clusters it runs.
AGGREGATOR = ("pegasus", "mpiexec", None)
CLUSTERED = (ClusterKind.HORIZONTAL, ClusterKind.LABEL, ClusterKind.WHOLE)


# The keys of a data job's or the aggregator's own entry that act on its batch job or task, by namespace; every
# other key the catalog reader let pass in silence (one pilot honours on a job's transformation) is said once per
# plan with what becomes of it (the keys pilot replaces everywhere were said where the catalog was read).
BATCH_KEYS = {
    "pegasus": frozenset(("queue", "project", "glite.arguments")),
    "globus": frozenset(("queue", "project")),
    "condor": frozenset(("request_memory", "batch_queue")),
}
# The aggregator's entry sizes its batch job too (aggregator_size); globus maxwalltime and pegasus maxwalltime are
# its runtime in minutes, hostcount its nodes, xcount its ppn, count its cores (profilekeys.fold).
AGGREGATOR_KEYS = {
    **BATCH_KEYS,
    "pegasus": BATCH_KEYS["pegasus"] | {"nodes", "ppn", "cores", "runtime", "maxwalltime"},
    "globus": BATCH_KEYS["globus"] | {"hostcount", "xcount", "count", "maxwalltime"},
}
DATA_KEYS = {**BATCH_KEYS, "env": None}  # None: every key (a data task's environment)
TRANSFER_KEYS = {**DATA_KEYS, "pegasus": BATCH_KEYS["pegasus"] | {"transfer.threads", "transfer.arguments"}}
DATA_INSTEAD = (
    "no effect on a data job: its task asks the pilot for one core, and its batch job has the site "
    "config's nodes, ranks_per_node and walltime; set those there, or queue, project or "
    "glite.arguments here"
)
AGGREGATOR_INSTEAD = (
    "no effect on the clustered job: its batch job takes this entry's queue, project, "
    "glite.arguments, request_memory, nodes, ppn, cores and runtime, and its tasks the environment "
    "and resources of their own transformations; set those there"
)


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
        _note_unused(resolver, AGGREGATOR, site, AGGREGATOR_KEYS, AGGREGATOR_INSTEAD)


def _note_unused(
    resolver: ProfileResolver, key: tuple, site: str, honoured: Mapping[str, frozenset[str] | None], instead: str
) -> None:
    """note_unused_keys for transformation ``key``'s entry on ``site``: its keys ``honoured`` does not name."""
    tx = resolver.catalogs.find_transformation(key)
    if tx is None:
        return
    entry = tx.sites.get(site)
    where = (
        f"{entry.where if entry is not None else 'the transformation catalog'}, "
        f"transformation {tx.namespace}::{tx.name}"
    )
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
    ``site``), as job_values reads a job's; None: the catalog has no such entry."""
    tx = resolver.catalogs.find_transformation(AGGREGATOR)
    if tx is None:
        return None
    return _values(
        lambda ns: resolver.transformation_profiles(tx, site, ns),
        "the transformation catalog: transformation pegasus::mpiexec",
    )


def aggregator_size(resolver: ProfileResolver, handle: str, site: SiteConfig) -> tuple[Size, tuple[str, ...]] | None:
    """(the batch job's size, the keys that ask for it) from the aggregator's own entry on ``handle`` (the module
    doc), checked against ``site``; on a site without batch system the size is the site config's (the keys are
    named in the plan's warning there). None: the catalog has no such entry."""
    tx = resolver.catalogs.find_transformation(AGGREGATOR)
    if tx is None:
        return None
    entry = tx.sites.get(handle)
    where = (
        f"{entry.where if entry is not None else 'the transformation catalog'}, transformation "
        f"{tx.namespace}::{tx.name}"
    )
    profiles = resolver.transformation_profiles(tx, handle, "pegasus")
    asked = tuple(k for k in SIZE_KEYS if profiles.get(k) not in (None, ""))
    single = scheduler_for(site).single_host
    return (Size() if single or not asked else _size(profiles, site, where)), asked


# The pegasus keys of the aggregator's entry that size its batch job (its globus ones are folded into these).
SIZE_KEYS = ("nodes", "ppn", "cores", "runtime")


def _size(profiles: dict[str, str], site: SiteConfig, where: str) -> Size:
    """The Size the aggregator's pegasus ``profiles`` ask for, as Pegasus' glite style derives NODES, PROCS and
    CORES from one another; one the site config cannot give is refused (ConfigError naming ``where``)."""

    def whole(key: str) -> int | None:
        raw = profiles.get(key)
        if raw is None or raw == "":
            return None
        try:
            value = float(raw)
        except ValueError:
            value = 0.0
        if not value.is_integer() or value < 1:
            raise ConfigError(
                f"{where}: pegasus::{key} = {raw[:40]!r}: the clustered job's {key} is a whole number " "of 1 or more"
            )
        return int(value)

    nodes, ppn, cores = whole("nodes"), whole("ppn"), whole("cores")
    ranks = None
    if cores is not None and nodes is not None and ppn is not None and cores != nodes * ppn:
        raise ConfigError(
            f"{where}: pegasus::cores = {cores} is not nodes x ppn ({nodes} x {ppn}), as Pegasus "
            f"requires of a job that sets all three: drop cores, or make it {nodes * ppn}"
        )
    if cores is not None and (nodes is None) != (ppn is None):
        given, other = ("nodes", nodes) if nodes is not None else ("ppn", ppn)
        if cores % other:  # type: ignore[operator]  # other is the one of nodes and ppn that is given, not None
            raise ConfigError(
                f"{where}: pegasus::cores = {cores} is not a multiple of {given} {other}, as Pegasus "
                f"requires to derive the job's {'ppn' if given == 'nodes' else 'nodes'}: give a multiple"
            )
        nodes, ppn = (nodes, cores // nodes) if nodes is not None else (cores // ppn, ppn)  # type: ignore[operator]  # exactly one of nodes and ppn is None here (tested above)
    elif cores is not None and nodes is None:
        ranks = cores
    site_rpn = site.ranks_per_node or 2
    path = site.path or site.name
    if nodes is None and ranks is not None:
        nodes_needed = -(-ranks // site_rpn)
        if nodes_needed > site.nodes:
            raise ConfigError(
                f"{where}: pegasus::cores = {ranks}: site {site.name} has {site.nodes} node(s) of "
                f"{site_rpn} ranks ({path}: nodes, ranks_per_node): ask for at most "
                f"{site.nodes * site_rpn}, or raise the site config's nodes (--set nodes={nodes_needed})"
            )
    if nodes is not None and nodes > site.nodes:
        raise ConfigError(
            f"{where}: pegasus::nodes = {nodes}: site {site.name} has {site.nodes} node(s) per batch "
            f"job ({path}: nodes): ask for at most {site.nodes}, or raise the site config's nodes "
            f"(--set nodes={nodes})"
        )
    most = ranks if ranks is not None else (nodes or site.nodes) * (ppn or site_rpn)
    if most < 2:
        raise ConfigError(
            f"{where}: pegasus::nodes/ppn/cores ask for {most} MPI rank: a clustered job needs at least "
            "2 (one hands out the tasks, as in pegasus-mpi-cluster): ask for ppn 2 or more"
        )
    return Size(nodes, ppn, ranks, _walltime(profiles.get("runtime"), site, where))


def _walltime(runtime: str | None, site: SiteConfig, where: str) -> float | None:
    """Pegasus ``runtime`` (seconds) as the batch job's walltime in minutes, rounded up to a whole minute as
    Pegasus writes WALLTIME; at most the site config's max_walltime."""
    if runtime is None or runtime == "":
        return None
    minutes = math.ceil(float(runtime) / 60.0)
    if minutes < 1:
        raise ConfigError(
            f"{where}: pegasus::runtime = {runtime!r}: a batch job needs a walltime of more than 0 s: "
            "give the clustered job's seconds"
        )
    if site.max_walltime and minutes > parse_walltime(site.max_walltime):
        raise ConfigError(
            f"{where}: pegasus::runtime = {runtime!r} ({format_walltime(minutes)}) is longer than site "
            f"{site.name}'s max_walltime {site.max_walltime} ({site.path or site.name}: max_walltime): "
            "ask for less"
        )
    return float(minutes)


def job_values(job: Job, resolver: ProfileResolver, upper: Layers) -> tuple:
    """(queue, project, glite.arguments as directive words, request_memory in MB) of one job, checked; ``upper``:
    the catalogs' profiles of its transformation on its site (ProfileResolver.catalog_layers)."""
    where = job.where if job.command is None else f"{job.where}, from transformation {job.tx_label}'s profiles"
    return _values(
        lambda ns: resolver.pegasus(job, upper) if ns == "pegasus" else resolver.other(job, upper, ns), where
    )


def _values(profiles_of: Callable[[str], dict[str, str]], where: str) -> tuple:
    """job_values of the profiles ``profiles_of(namespace)`` gives; an error names ``where``."""
    pegasus, globus, condor = profiles_of("pegasus"), profiles_of("globus"), profiles_of("condor")
    # condor batch_queue is the attribute glite gives the batch system; Pegasus' queue profile, when set, fills it
    queue = _first("queue", pegasus, globus) or _first("batch_queue", condor)
    project = _first("project", pegasus, globus)
    for key, value in (("queue", queue), ("project", project)):
        if value is not None and not is_plain(value):
            raise ConfigError(
                f"{where}: {key} {value!r} cannot go into a batch directive: use letters, " "digits and _.,:=@+/%- only"
            )
    raw = _first("glite.arguments", pegasus)
    mem = _first("request_memory", condor)
    return (
        queue,
        project,
        None if raw is None else _plain_words(raw, where, "glite.arguments"),
        None if mem is None else _megabytes(mem, where),
    )


# HTCondor's units for a request (condor_submit: request_memory, request_disk): K/KB, M/MB, G/GB, T/TB, any case,
# powers of 1024, a space allowed before them; Ki/Mi/Gi/Ti(B) are read as the same binary units.
_QUANTITY = re.compile(
    r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE]([+-]?[0-9]+))?\s*(?:([kmgt])i?b?)?\s*\Z", re.IGNORECASE
)
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
        raise ConfigError(
            f"{where}: condor request_memory {mem[:80]!r} is not an amount of memory: give a "
            "number of MB, 0 or more, or one with HTCondor's unit (e.g. 2048, 2 GB, 512M)"
        )
    return math.ceil(value)
