"""The abstract workflow as the planner sees it (jobs, edges, catalogs, properties), and the records every step
of the plan shares: its clusters (``Cluster``), the nodes data jobs are grouped by (``Unit``), the C-level
accessors the loops over a million jobs read them by.

Every record is built by keyword: two fields of one type (a job's namespace and version, ``str | None``)
swapped by position would be wrong data that no check catches."""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from pilot.contracts.clusters import ClusterKind

Profiles = dict[str, dict[str, str]]  # namespace -> key -> value


class _Empty(dict[str, Any]):
    """A read-only empty mapping, hashable so that a dataclass field may default to it. A dict underneath: its
    truth, ``in`` and ``get`` are C calls, and a plan asks them of each of a million jobs several times."""

    __slots__ = ()

    def __hash__(self) -> int:  # type: ignore[override]  # an empty mapping that never changes: hashable, unlike dict
        return 0

    def _read_only(self, *args: Any, **kwargs: Any) -> Any:  # noqa: ARG002 - stands in for every mutating method
        raise TypeError("a shared empty mapping is read-only: give the job a dict of its own")

    __setitem__ = __delitem__ = __ior__ = setdefault = update = pop = popitem = clear = _read_only  # type: ignore[assignment]  # every mutating method refuses, whatever its signature


# What a job without profiles or metadata holds: one shared read-only mapping, not an empty dict per job
# (a million jobs would hold two million of them).
NO_PROFILES: Mapping[str, Mapping[str, str]] = _Empty()
NO_METADATA: Mapping[str, str] = _Empty()


@dataclass(frozen=True)
class SysInfo:
    """A system as Pegasus' SysInfo describes one: architecture, OS type, release and version. The defaults
    are Pegasus' (SysInfo.java: x86_64, linux, no release, no version): what an entry that names none is."""

    arch: str = "x86_64"
    os: str = "linux"
    release: str = ""
    version: str = ""

    def __str__(self) -> str:
        """``arch=x86_64 os=linux`` (and ``osrelease=``/``osversion=`` when set), as Pegasus prints a SysInfo."""
        words = [f"arch={self.arch}", f"os={self.os}"]
        if self.release:
            words.append(f"osrelease={self.release}")
        if self.version:
            words.append(f"osversion={self.version}")
        return " ".join(words)


class JobType(enum.Enum):
    """What a job does, with Pegasus' type number and description (the ``type``/``type_desc``
    that pegasus-monitord stores and pegasus-statistics counts by)."""

    COMPUTE = (1, "compute")
    STAGE_IN = (2, "stage-in-tx")
    STAGE_OUT = (3, "stage-out-tx")
    REGISTRATION = (4, "registration")
    CREATE_DIR = (6, "create-dir")
    CLEANUP = (8, "cleanup")
    CHMOD = (9, "chmod")
    DAX = (10, "dax")  # a pegasusWorkflow job: a sub-workflow, planned and driven when it becomes ready

    @property
    def category(self) -> str | None:
        """The DAGMan category Pegasus gives a data job of this type (throttled by ``dagman.<category>.maxjobs``)."""
        return CATEGORIES.get(self)


CATEGORIES = {
    JobType.STAGE_IN: "stagein",
    JobType.STAGE_OUT: "stageout",
    JobType.CLEANUP: "cleanup",
    JobType.REGISTRATION: "registration",
}
# Members as module names: `JobType.X` is a lookup through the enum's metaclass each time (tens of nanoseconds),
# which Job's properties would pay for each of a million jobs.
_COMPUTE, _DAX = JobType.COMPUTE, JobType.DAX
# Pegasus' default MAXJOBS per category (its condor code generator and cleanup strategy); registration has none.
DEFAULT_MAXJOBS = {"stagein": 10, "stageout": 10, "cleanup": 4}


class Link(enum.Enum):
    """How a job uses a file (``uses[].type`` of a Pegasus 5 workflow)."""

    INPUT = "input"
    OUTPUT = "output"
    INOUT = "inout"
    CHECKPOINT = "checkpoint"


# Looked up once: each member of an enum costs a lookup each time, and a plan asks each of millions of uses.
_READING = (Link.INPUT, Link.INOUT, Link.CHECKPOINT)
_WRITING = (Link.OUTPUT, Link.INOUT, Link.CHECKPOINT)


@dataclass(slots=True, kw_only=True)
class Use:
    """One file a job reads or writes."""

    lfn: str
    link: Link
    stage_out: bool = True
    register: bool = True
    optional: bool = False
    # Its metadata (``uses[].metadata``, with the replica catalog's for a raw input): the monitoring DB's
    # rc_meta, the transfer entries' attributes and the output replica catalog's, as Pegasus passes them on.
    metadata: dict[str, str] | None = None

    @property
    def reads(self) -> bool:
        return self.link in _READING

    @property
    def writes(self) -> bool:
        return self.link in _WRITING


@dataclass(frozen=True)
class SubJob:
    """What a pegasusWorkflow job names: its workflow file and the pegasus-plan options it is planned with."""

    lfn: str  # the sub-workflow's file (a logical name: the replica catalog or a parent job gives its place)
    options: tuple[str, ...]  # pilot plan options made of the job's pegasus-plan arguments
    sites: tuple[str, ...] = ()  # the execution sites its --sites names ((): the parent's)


@dataclass(eq=False, slots=True, kw_only=True)
class Job:
    """One compute job of the abstract workflow.

    Its fields are lean because a workflow may hold a million jobs: what most jobs lack is a shared empty
    value (a tuple, NO_PROFILES, NO_METADATA) rather than an empty list or dict each, and its arguments are
    kept as the one quoted line they are written as (``args_line``), not as a list of words.
    """

    id: str
    name: str
    namespace: str | None = None
    version: str | None = None
    # The arguments as one command line, each word quoted as a TASK line quotes it (pilot.dag.lexer.quote_arg):
    # what the DAG and the monitoring files write, with ``arguments`` the words PMC splits it into.
    args_line: str = ""
    profiles: Mapping[str, Mapping[str, str]] = NO_PROFILES
    source: str = ""  # the workflow file, for errors
    index: int = 0  # position in Workflow.jobs (renumbered when data reuse removes jobs)
    yaml_index: int = -1  # position in the workflow file's jobs list, for errors (-1: a job the planner made)
    parents: list[Job] = field(default_factory=list)
    children: list[Job] = field(default_factory=list)
    uses: tuple[Use, ...] | list[Use] = ()
    type: JobType = JobType.COMPUTE
    # An auxiliary job's whole command (the planner made it; no transformation catalog entry).
    command: list[str] | None = None
    cwd: str | None = None  # the directory the job runs in (the workflow's directory on shared scratch)
    # An auxiliary job's input file (pegasus-transfer's JSON list, registration's map), written by emit.
    stdin_text: str | None = None
    stdio: tuple[str, str, str] | None = None  # stdin, stdout, stderr file names ("": none); None: none at all
    metadata: Mapping[str, str] = NO_METADATA  # the job's metadata, for the monitoring DB
    hooks: tuple[tuple[str, str], ...] | list[tuple[str, str]] = ()  # (monitord condition, command) of its shell hooks
    subworkflow: SubJob | None = None  # a pegasusWorkflow job's file and planner options (type DAX)
    wrapper: list[str] | None = None  # its container runtime's words before its executable (planner.containers)

    @property
    def where(self) -> str:
        """``file: jobs[3] (id X)`` for error messages (built only when one is needed)."""
        if self.yaml_index < 0:
            return f"{self.source}: job {self.id} (made by the planner)"
        return f"{self.source}: jobs[{self.yaml_index}] (id {self.id})"

    @property
    def tx_key(self) -> tuple[str | None, str, str | None]:
        return tx_key_of(self)

    @property
    def task_id(self) -> str:
        """The job's task id in a PMC DAG: ``<transformation>_<job id>`` as Pegasus writes a compute
        job, an auxiliary job's own name (``stage_in_local_local_0_0``)."""
        kind = self.type
        if kind is _COMPUTE:
            return f"{self.name}_{self.id}"
        if kind is _DAX:
            return f"subdax_{self.name}_{self.id}"  # Pegasus' name for it, which pegasus-monitord looks for
        return self.id

    @property
    def tx_label(self) -> str:
        """``ns::name:version`` as Pegasus prints a transformation."""
        text = self.name
        if self.namespace:
            text = f"{self.namespace}::{text}"
        if self.version:
            text = f"{text}:{self.version}"
        return text


@dataclass
class TransformationSite:
    site: str
    pfn: str
    profiles: Profiles = field(default_factory=dict)
    stageable: bool = False  # the entry's type is stageable: its pfn is copied to the job's directory first
    container: str | None = None  # the container (of the catalog's containers) the job runs in on this site
    # The system its executable was built for (arch, os.*): usable only on a site of the same (planner.sysinfo).
    sysinfo: SysInfo = SysInfo()
    where: str = ""  # file and YAML path, for errors


@dataclass
class Transformation:
    name: str
    namespace: str | None = None
    version: str | None = None
    # The entry each site uses: its first; once a job is placed, the one planner.sysinfo chose for the site.
    sites: dict[str, TransformationSite] = field(default_factory=dict)
    profiles: Profiles = field(default_factory=dict)
    hooks: list[tuple[str, str]] = field(default_factory=list)  # shell hooks of every job that runs it
    # Every per-site entry in catalog order: a site may have several, one per system (arch, os.*) it may be.
    entries: list[TransformationSite] = field(default_factory=list)
    sha256: str | None = None  # its executable's checksum, verified where the executable is staged
    requires: tuple[str, ...] = ()  # transformations ("ns::name:version") staged beside a staged executable


class DirectoryType(enum.Enum):
    """A site directory's role (``directories[].type`` of a Pegasus 5 site catalog)."""

    SHARED_SCRATCH = "sharedScratch"
    SHARED_STORAGE = "sharedStorage"
    LOCAL_SCRATCH = "localScratch"
    LOCAL_STORAGE = "localStorage"


@dataclass
class Directory:
    """A site directory: its path on the site (Pegasus' internal mount point) and the URL prefixes of its
    file servers (``operation: all|get|put``)."""

    type: DirectoryType
    path: str
    servers: list[tuple[str, str]] = field(default_factory=list)  # (url, operation)
    where: str = ""  # file and YAML path, for errors

    def url(self, operation: str) -> str:
        """The URL prefix for ``get`` or ``put``; a directory with no file server is reached as file://path."""
        for url, op in self.servers:
            if op in (operation, "all"):
                return url.rstrip("/")
        return "file://" + self.path.rstrip("/")


@dataclass(frozen=True)
class Grid:
    """A grid gateway of a site (``grids[]``): how HTCondor-G reaches the site's batch system from a submit host."""

    type: str  # gt5 | condor | cream | batch | nordugrid | unicore | ec2 | deltacloud | sfapi
    contact: str
    scheduler: str  # fork | pbs | lsf | condor | sge | slurm | flux | unknown
    jobtype: str | None  # compute | auxillary | transfer | register | cleanup; None: no job type
    where: str = ""  # file and YAML path, for errors


@dataclass
class Site:
    name: str
    profiles: Profiles = field(default_factory=dict)
    directories: dict[DirectoryType, Directory] = field(default_factory=dict)
    sysinfo: SysInfo = SysInfo()  # arch, os.* (Pegasus' defaults when unset)
    grids: list[Grid] = field(default_factory=list)


@dataclass(kw_only=True)
class Replica:
    """One physical copy of a file: its URL (or path) and site; ``pattern`` for a regex entry."""

    pfn: str
    site: str
    where: str = ""
    metadata: dict[str, str] = field(default_factory=dict)  # its attributes, checksum.type/value among them


@dataclass(frozen=True)
class ContainerSpec:
    """A container of the transformation catalog (``containers[]``)."""

    name: str
    kind: str  # singularity | docker | shifter
    image: str  # its URL (docker://, library://, shub://, file://, http(s)://, shifter://) or path
    image_site: str | None = None
    mounts: tuple[str, ...] = ()  # HOST[:CONTAINER[:OPTIONS]]
    bypass: bool = False  # the job uses the image from its URL, not a copy staged into its directory
    env: tuple[tuple[str, str], ...] = ()  # its env profiles: set inside the container
    where: str = ""  # file and YAML path, for errors
    sha256: str | None = None  # its image's checksum, verified where the image is staged


@dataclass
class Catalogs:
    transformations: dict[tuple[str | None, str, str | None], Transformation] = field(default_factory=dict)
    sites: dict[str, Site] = field(default_factory=dict)
    properties: dict[str, str] = field(default_factory=dict)
    containers: dict[str, ContainerSpec] = field(default_factory=dict)
    workflow_profiles: Profiles = field(default_factory=dict)  # the workflow's own: every job's, below the job's
    workflow_metadata: dict[str, str] = field(default_factory=dict)  # the workflow's metadata, for the monitoring DB
    workflow_hooks: list[tuple[str, str]] = field(default_factory=list)  # the workflow's shell hooks
    replicas: dict[str, list[Replica]] = field(default_factory=dict)  # lfn -> its copies
    # Regex entries: the whole lfn must match; [k] in a pfn is group k, [0] the whole lfn.
    regex_replicas: list[tuple[object, list[Replica]]] = field(default_factory=list)

    def find_transformation(self, key: tuple[str | None, str, str | None]) -> Transformation | None:
        tx = self.transformations.get(key)
        if tx is not None:
            return tx
        # A job may leave out namespace or version; match on what it gives.
        ns, name, version = key
        for (tns, tname, tver), t in self.transformations.items():
            if tname == name and (ns is None or ns == tns) and (version is None or version == tver):
                return t
        return None


@dataclass
class Workflow:
    name: str
    path: str
    jobs: list[Job] = field(default_factory=list)
    catalogs: Catalogs = field(default_factory=Catalogs)


INPUT_FILE = "@INPUT_FILE@"  # a data job's command word that emit replaces with the path of the job's input file


@dataclass(eq=False, kw_only=True)
class Cluster:
    """Jobs planned as one batch job: one PMC DAG, one line of clusters.yml."""

    name: str
    jobs: list[Job]
    kind: ClusterKind  # a pegasusWorkflow job is always a cluster of its own (SUBWORKFLOW), which no technique merges
    site: str
    parents: list[Cluster] = field(default_factory=list)
    children: list[Cluster] = field(default_factory=list)
    runtime: float | None = None  # sum of known job runtimes

    def __repr__(self) -> str:
        return f"Cluster({self.name}, {len(self.jobs)} jobs)"


@dataclass(slots=True, kw_only=True)
class Unit:
    """A node of the clustered workflow that data jobs are grouped by: the jobs of one cluster (one job under
    whole clustering: a million)."""

    jobs: Sequence[Job]
    level: int  # 0 for roots


# C-level accessors for the loops over a million jobs or clusters (a property or a lambda costs a call each).
tx_key_of = attrgetter("namespace", "name", "version")  # Job.tx_key
parents_of = attrgetter("parents")  # a job's or a cluster's
children_of = attrgetter("children")
uses_of = attrgetter("uses")  # a job's files
type_of = attrgetter("type")  # a job's JobType
