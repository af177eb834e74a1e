"""The resolve step: each job of a plan turned into the frozen Template its task, batch job and task table use.

A plan reads the workflow, resolves its jobs here, clusters them, adds the data jobs (resolved here too, on
their cluster's site) and emits: the DAG writer, the batch options, the task table and the cluster's retry
read a job's Template and nothing else. What a job's Template holds is chosen in this module alone: which
executable it runs (its catalog entry's, or the copy staged into its directory), in which container wrapper,
its checked TASK head, environment, request, runtime and retry. The jobs of a transformation and site that
add nothing of their own (no profiles) share one Template, resolved once: a million jobs of one transformation
cost one lookup. A job with profiles of its own gets its own, equal ones being one object.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from pilot.errors import ConfigError
from pilot.planner import batchopts, containers, replicas, sysinfo
from pilot.planner.dagfile import requested, task_head, task_request, with_credentials
from pilot.planner.datalayout import Place
from pilot.planner.executables import Executable, executable_lfn, required_executables
from pilot.planner.model import Cluster, Job, JobType, Link, Replica, TransformationSite, Use, Workflow
from pilot.planner.profiles import Env, Layers, ProfileResolver, float_profile, int_profile
from pilot.planner.staging import expected_runtime
from pilot.sites import SiteConfig
from pilot.util import safetext

_COMPUTE, _DAX = JobType.COMPUTE, JobType.DAX  # looked up once (an enum's members cost a lookup each time)
_index, _site, _command = attrgetter("index"), attrgetter("site"), attrgetter("command")
_staged, _retry_of = attrgetter("staged"), attrgetter("retry")


@dataclass(frozen=True)
class Template:
    """What a job's task, its cluster's batch job and the task table take from the job's profiles and catalog
    entries on a site. A data job's and a sub-workflow's have no executable (``head`` and ``pfn`` empty)."""

    site: str  # the site handle it was resolved for
    label: str  # the transformation's label (Job.tx_label)
    env: Env | None  # the task's variables (None: none); equal environments are one tuple
    request: tuple[int, int, int]  # the task's CPUs, memory (MB) and GPUs, as pilot run reads its TASK line
    retry: int | None  # dagman.retry (None: unset)
    batch: tuple | None  # (queue, project, directive words, memory MB) for the batch job; None: a sub-workflow's
    runtime: float | None = None  # seconds (the runtime profile; a data job's expected one)
    head: str = ""  # the TASK words between the task id and the arguments, checked by the DAG parser
    pfn: str = ""  # the executable run: the catalog entry's, or the copy staged into the job's directory
    wrapper: tuple[str, ...] | None = None  # the container runtime's words before the executable
    staged: tuple[Executable, ...] | None = None  # executables staged into the job's directory first
    # What clustering reads: the value of the label key (pegasus.clusterer.label.key), clusters.num,
    # clusters.size and clusters.maxruntime.
    cluster_label: str | None = None
    clusters_num: int | None = None
    clusters_size: int | None = None
    clusters_maxruntime: float | None = None
    # (value, key) of the first of pmc_request_cpus, cores and of pmc_request_memory, memory the job sets, as
    # written: the warning of a task larger than a node quotes them.
    cpus_asked: tuple[str, str] | None = None
    memory_asked: tuple[str, str] | None = None


@dataclass(frozen=True)
class Aggregator:
    """What the aggregator's own entry (``pegasus::mpiexec``) gives a clustered job's batch job on a site."""

    values: tuple | None  # as Template.batch; None: no such entry
    size: tuple[batchopts.Size, tuple[str, ...]] | None  # (size, keys asking for it); None: no such entry


SITE_HINTS = ("selector.execution.site", "hints.execution.site")


def job_sites(jobs: Sequence[Job], default: str) -> list[str]:
    """Each job's site handle by its index: the one its profiles hint at, else ``default`` (the site planned for)."""
    return [_hinted_site(job, default) if job.profiles else default for job in jobs]


def _hinted_site(job: Job, default: str) -> str:
    for key in SITE_HINTS:
        value = job.profiles.get("pegasus", {}).get(key) or job.profiles.get("selector", {}).get("execution.site")
        if value:
            why = safetext.problem_word(value)
            if why:  # a site names the cluster's .sub file lines, directories and batch job
                raise ConfigError(f"{job.where}: profile selector execution.site {value[:80]!r} {why}")
            return value
    return default


class Resolved:
    """The plan's one cache: each job's Template by Job.index, the shared ones by (transformation, site) with
    the catalog entry and the catalogs' profiles they were made of, and the aggregator's values per site.
    ``site`` is the site config; ``workdir`` where staged executables are put; ``sites`` each job's site handle
    by its index."""

    def __init__(
        self, wf: Workflow, resolver: ProfileResolver, site: SiteConfig, workdir: Place, sites: Sequence[str]
    ) -> None:
        self.resolver, self.site_config, self.workdir = resolver, site, workdir
        self.catalogs = resolver.catalogs
        self.images: dict[str, containers.StagedImage] = {}  # lfn -> a container image the stage-in jobs bring
        self._shared: dict[tuple, Template] = {}  # (transformation, site, kind) -> the template of its plain jobs
        self._equal: dict[Template, Template] = {}  # the templates of jobs with profiles: equal ones are one
        self._entries: dict[tuple, TransformationSite] = {}  # (transformation, site) -> the entry its jobs run
        self._layers: dict[tuple, Layers] = {}  # (transformation, site) -> the catalogs' profiles of its jobs
        self._envs: dict[Env, Env] = {}  # equal environments are one tuple: the DAG writer says each once
        self._aggregators: dict[str, Aggregator] = {}
        self.by_index: list[Template] = self._resolve_all(wf.jobs, sites)

    def _resolve_all(self, jobs: Sequence[Job], sites: Sequence[str]) -> list[Template]:
        """Each job's template on its site (``sites`` by Job.index, which is the job's place in ``jobs``). The
        jobs of a big workflow come in runs of one transformation without profiles: a job of the run of the
        last plain job takes that job's template, the one _first would find for it, told by the identity of its
        names (one string per name: the reader shares them) rather than by a key built and hashed per job."""
        out: list[Template] = []
        add, first = out.append, self._first
        last: Template | None = None  # the template of the last plain job, unless it is wrapped (each job is)
        name = namespace = version = site = None  # that job's
        for job, handle in zip(jobs, sites):
            if job.name is name and handle is site and job.namespace is namespace and job.version is version:
                if last is not None and not job.profiles and job.type is _COMPUTE:
                    add(last)
                    continue
            made = first(job, handle)
            add(made)
            if not job.profiles and job.type is _COMPUTE:
                last = made if made.wrapper is None else None
                name, namespace, version, site = job.name, job.namespace, job.version, handle
        return out

    def _upper(self, job: Job, handle: str) -> Layers:
        """The catalogs' profiles of the job's transformation on site ``handle``, merged once per pair."""
        key = (job.tx_key, handle)
        found = self._layers.get(key)
        if found is None:
            found = self._layers[key] = self.resolver.catalog_layers(key[0], handle)
        return found

    def _pegasus(self, job: Job, handle: str) -> dict[str, str]:
        return self.resolver.pegasus(job, self._upper(job, handle))

    def _env(self, job: Job, handle: str) -> Env | None:
        env = self.resolver.env(job, self._upper(job, handle))
        return None if env is None else self._envs.setdefault(env, env)

    def _batch(self, job: Job, handle: str) -> tuple:
        return batchopts.job_values(job, self.resolver, self._upper(job, handle))

    def stageable(self) -> dict[int, list[Executable]]:
        """Job index -> the executables staged into its directory first (planner.staging); a list per template."""
        if all(t.staged is None for t in (*self._shared.values(), *self._equal)):  # every distinct one
            return {}
        staged = list(map(_staged, self.by_index))
        lists: dict[int, list[Executable]] = {}
        return {
            k: lists.setdefault(id(staged[k]), list(staged[k])) for k in itertools.compress(range(len(staged)), staged)
        }

    def add_data(self, clusters: Sequence[Cluster], made: int) -> None:
        """The templates of the ``made`` data jobs the plan added (numbered after the workflow's jobs), each on
        its cluster's site."""
        data: dict[int, Template] = {}
        for cluster in clusters:
            for job in itertools.compress(cluster.jobs, map(_command, cluster.jobs)):
                data[job.index] = self._data(job, cluster.site)
        start = len(self.by_index)
        self.by_index += [data[k] for k in range(start, start + made)]

    def of_cluster(self, cluster: Cluster) -> Iterator[Template]:
        """The templates of ``cluster``'s jobs in their order, on the cluster's site (a job whose own site is
        another, clustered there by whole clustering, is resolved for the cluster's but keeps its executable
        and runtime); one at a time, as a cluster may hold a million jobs."""
        at, site = self.by_index.__getitem__, cluster.site
        if set(map(_site, map(at, map(_index, cluster.jobs)))) <= {site}:
            return map(at, map(_index, cluster.jobs))
        return (
            t if t.site == site else self._elsewhere(job, t, site)
            for job, t in zip(cluster.jobs, map(at, map(_index, cluster.jobs)))
        )

    def aggregator(self, handle: str) -> Aggregator:
        """The aggregator's entry on site ``handle``, looked up once per site."""
        found = self._aggregators.get(handle)
        if found is None:
            found = self._aggregators[handle] = Aggregator(
                batchopts.aggregator_values(self.resolver, handle),
                batchopts.aggregator_size(self.resolver, handle, self.site_config),
            )
        return found

    def _first(self, job: Job, handle: str) -> Template:
        """A job of the workflow on its own site: its transformation's entry found (or an error now)."""
        if job.type is _DAX:  # a sub-workflow: planned when it is ready (pilot.planner.subworkflow)
            return self._plain(job, handle, "dax", self._dax)
        if not job.profiles:  # most jobs: their transformation's, unless a container's image comes with each
            shared = self._shared.get((job.tx_key, handle, "compute"))
            if shared is not None and shared.wrapper is None:
                return shared
        entry = self._entries.get((job.tx_key, handle)) or self._entry(job, handle)
        inside = self._in_container(job, entry.container, handle) if entry.container is not None else None
        made = self._plain(job, handle, "compute", lambda j, h: self._compute(j, h, entry, inside))
        if made.wrapper is not None:
            job.wrapper = list(made.wrapper)
        return made

    def _plain(self, job: Job, handle: str, kind: object, make) -> Template:
        if job.profiles:
            made = make(job, handle)
            return self._equal.setdefault(made, made)
        key = (job.tx_key, handle, kind)
        found = self._shared.get(key)
        if found is None:
            found = self._shared[key] = make(job, handle)
        return found

    def _entry(self, job: Job, handle: str) -> TransformationSite:
        tx = self.catalogs.find_transformation(job.tx_key)
        if tx is None:
            raise ConfigError(
                f"{job.where}: unknown transformation {job.tx_label}: add it to the transformation catalog (--tc)"
            )
        # The site's own entry, else a stageable one of another site (staged to the site, as pegasus-plan does),
        # built for the site's system (arch, os.*): planner.sysinfo, which says why none is.
        entry = sysinfo.entry_for(job, tx, handle, self.catalogs.sites.get(handle))
        if entry is None:
            hint = f", or name the catalogs' site with --set pegasus_site={next(iter(tx.sites))}" if tx.sites else ""
            raise ConfigError(
                f"{job.where}: transformation {job.tx_label} has no entry for site {handle!r} "
                f"(it has: {', '.join(tx.sites) or 'none'}); add one, plan for another --site{hint}"
            )
        self._entries[(job.tx_key, handle)] = entry
        return entry

    def _in_container(self, job: Job, name: str, handle: str) -> str:
        """Wrap the job in its container's runtime, its image staged in as an input (planner.containers); the
        job's directory inside the container."""
        spec = self.catalogs.containers.get(name)
        if spec is None:
            raise ConfigError(
                f"{job.where}: transformation {job.tx_label} names container {name!r}, which the "
                "transformation catalog's containers do not list: add it there"
            )
        runtime, spec = containers.runtime_for(job, spec, self.site_config, handle)
        if job.profiles or (job.tx_key, handle, "compute") not in self._shared:  # else its transformation's
            env_names = tuple(name for name, _ in self._env(job, handle) or ())
            job.wrapper = containers.wrapper(spec, runtime, self.workdir.path, self._pegasus(job, handle), env_names)
        image = containers.staged_image(spec, runtime, self.workdir.path)
        if image is not None:
            job.uses = [*job.uses, Use(lfn=image.lfn, link=Link.INPUT)]  # a job's uses may be the shared empty tuple
            checksum = {"checksum.type": "sha256", "checksum.value": spec.sha256} if spec.sha256 else {}
            self.catalogs.replicas.setdefault(
                image.lfn,
                [Replica(pfn=image.url, site=spec.image_site or "local", where=spec.where, metadata=checksum)],
            )
            self.images[image.lfn] = image
        return containers.WORKDIR[spec.kind]

    def _compute(self, job: Job, handle: str, entry: TransformationSite, inside: str | None) -> Template:
        profiles = self._pegasus(job, handle)
        staged = None
        pfn = entry.pfn
        if entry.stageable:
            tx = self.catalogs.find_transformation(job.tx_key)
            assert tx is not None  # the entry is one of its
            staged = (
                Executable(executable_lfn(job), replicas.url_of(entry.pfn), entry.site, tx.sha256),
                *required_executables(self.catalogs, job, tx, handle),
            )
            # in a container the job's directory is bound there
            pfn = f"{inside}/{executable_lfn(job)}" if inside else self.workdir.file(executable_lfn(job))[0]
        runtime = float_profile(profiles, "runtime")
        return self._template(job, handle, profiles, runtime, pfn, job.wrapper, staged)

    def _template(
        self,
        job: Job,
        handle: str,
        profiles: Mapping[str, str],
        runtime: float | None,
        pfn: str,
        wrapper,
        staged: tuple[Executable, ...] | None,
    ) -> Template:
        env, batch = self._env(job, handle), self._batch(job, handle)
        head = task_head(job, pfn, profiles, wrapper)  # the DAG parser's check, before any other of the request
        return Template(
            **self._common(job, handle, profiles),
            env=env,
            batch=batch,
            runtime=runtime,
            head=head,
            pfn=pfn,
            wrapper=tuple(wrapper) if wrapper else None,
            staged=staged,
            **self._clustering_and_fit(profiles),
        )

    def _common(self, job: Job, handle: str, profiles: Mapping[str, str]) -> dict[str, Any]:
        """The Template fields every kind of job has: its site, label, request and retry (checked in that order)."""
        return {
            "site": handle,
            "label": job.tx_label,
            "request": task_request(profiles),
            "retry": self._retry(job, handle),
        }

    def _clustering_and_fit(self, profiles: Mapping[str, str]) -> dict[str, Any]:
        """The Template fields that clustering and the node-fit warning read."""
        return {
            "cluster_label": profiles.get(self.resolver.label_key) or None,
            "clusters_num": int_profile(profiles, "clusters.num"),
            "clusters_size": int_profile(profiles, "clusters.size"),
            "clusters_maxruntime": float_profile(profiles, "clusters.maxruntime"),
            "cpus_asked": requested(profiles, ("pmc_request_cpus", "cores")),
            "memory_asked": requested(profiles, ("pmc_request_memory", "memory")),
        }

    def _elsewhere(self, job: Job, own: Template, handle: str) -> Template:
        """A job on a site other than its own: that site's values, with its own executable and runtime."""
        if own.batch is None:
            return self._dax(job, handle)
        if job.command is not None:
            return self._data(job, handle)
        pfn = (
            own.pfn
            if own.staged is not None
            else (self._entries.get((job.tx_key, handle)) or self._entry(job, handle)).pfn
        )
        made = self._template(job, handle, self._pegasus(job, handle), own.runtime, pfn, job.wrapper, own.staged)
        return self._equal.setdefault(made, made)

    def _dax(self, job: Job, handle: str) -> Template:
        profiles = self._pegasus(job, handle)
        return Template(
            **self._common(job, handle, profiles), env=None, batch=None, **self._clustering_and_fit(profiles)
        )

    def _data(self, job: Job, handle: str) -> Template:
        """A data job's: its transformation's environment with pegasus-transfer's credentials, no executable."""
        runtime = expected_runtime(job)

        def make(job: Job, handle: str) -> Template:
            profiles = self._pegasus(job, handle)
            env = with_credentials(self._env(job, handle), self.resolver.data_env)
            return Template(
                **self._common(job, handle, profiles),
                env=env,
                batch=self._batch(job, handle),
                runtime=runtime,
                **self._clustering_and_fit(profiles),
            )

        return self._plain(job, handle, ("data", runtime), make)

    def _retry(self, job: Job, handle: str) -> int | None:
        """Pegasus' ``dagman.retry``, overloaded as pegasus profiles are (transformation catalog > site catalog >
        job > properties); keys compare case-insensitively (Pegasus.api writes ``RETRY``)."""
        cat = self.catalogs
        tx = cat.find_transformation(job.tx_key)
        tx_site = tx.sites.get(handle) if tx is not None else None
        site_entry = cat.sites.get(handle)
        value = None
        for layer in (
            tx_site.profiles if tx_site else {},
            tx.profiles if tx else {},
            site_entry.profiles if site_entry else {},
            job.profiles,
        ):
            value = _retry_in(layer.get("dagman", {}))
            if value is not None:
                break
        if value is None:
            value = cat.properties.get("dagman.retry")
        if value is None or value == "":
            return None
        try:
            retry = int(value)
        except ValueError:
            raise ConfigError(f"{job.where}: profile dagman.retry = {value!r} is not a whole number") from None
        if retry < 0:
            raise ConfigError(f"{job.where}: profile dagman.retry = {value!r} must not be negative")
        return retry


def _retry_in(layer: Mapping[str, str]) -> str | None:
    value = None
    for key, raw in layer.items():
        if key.lower() == "retry":
            value = raw
    return value


def cluster_retry(templates: Iterable[Template]) -> int | None:
    """A cluster is retried as often as the most-retried of its jobs asks (None: no job says)."""
    retries = set(map(_retry_of, templates))
    retries.discard(None)
    return max(retries, default=None)
