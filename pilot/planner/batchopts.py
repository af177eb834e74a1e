"""What a workflow's jobs ask of the batch job their cluster runs in: queue, project, extra directives.

Pegasus submits a job to Slurm or PBS through HTCondor's glite/BLAHP and maps
its profiles there: ``queue`` (pegasus or globus namespace) to the partition
or queue, ``project`` to the account, ``glite.arguments`` to one extra
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

from dataclasses import dataclass

from pilot.errors import ConfigError
from pilot.planner.clustering import Cluster
from pilot.planner.model import Job
from pilot.planner.profiles import ProfileResolver
from pilot.siteschema import is_plain

# Directive lines of a request_memory, per scheduler (MB).
MEMORY_DIRECTIVE = {"slurm": "#SBATCH --mem={}", "pbspro": "#PBS -l mem={}mb", "torque": "#PBS -l mem={}mb"}
PREFIX = {"slurm": "#SBATCH", "pbspro": "#PBS", "torque": "#PBS"}


@dataclass(frozen=True)
class BatchOptions:
    queue: str | None = None
    account: str | None = None
    directives: tuple[str, ...] = ()
    asked: tuple[str, ...] = ()  # the profile keys its jobs set, for the warning on a site without batch system


def _profile(job: Job, resolver: ProfileResolver, site: str, key: str, namespaces: tuple[str, ...]) -> str | None:
    for ns in namespaces:
        value = resolver.pegasus(job, site).get(key) if ns == "pegasus" else resolver.other(job, site, ns).get(key)
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


def batch_options(cluster: Cluster, resolver: ProfileResolver, scheduler: str) -> BatchOptions:
    """The batch options of ``cluster``'s job on a site of ``scheduler`` (see the module doc)."""
    queue = account = extra = memory = None
    asked: dict[str, None] = {}
    for job in cluster.jobs:
        if job.command is not None:
            continue  # a data job of the planner's own
        site = cluster.site
        queue = _profile(job, resolver, site, "queue", ("pegasus", "globus")) or queue
        account = _profile(job, resolver, site, "project", ("pegasus", "globus")) or account
        raw = _profile(job, resolver, site, "glite.arguments", ("pegasus",))
        if raw is not None:
            extra = _plain_words(raw, job, "glite.arguments")
        mem = _profile(job, resolver, site, "request_memory", ("condor",))
        if mem is not None:
            try:
                memory = int(float(mem))
            except ValueError:
                raise ConfigError(f"{job.where}: condor request_memory {mem!r} is not a number of MB") from None
        for key, value in (("queue", queue), ("project", account), ("glite.arguments", raw), ("request_memory", mem)):
            if value is not None:
                asked[key] = None
            if key in ("queue", "project") and value is not None and not is_plain(value):
                raise ConfigError(f"{job.where}: {key} {value!r} cannot go into a batch directive: use letters, "
                                  "digits and _.,:=@+/%- only")
    directives = []
    if memory is not None and scheduler in MEMORY_DIRECTIVE:
        directives.append(MEMORY_DIRECTIVE[scheduler].format(memory))
    if extra and scheduler in PREFIX:
        directives.append(f"{PREFIX[scheduler]} {extra}")
    return BatchOptions(queue, account, tuple(directives), tuple(asked))
