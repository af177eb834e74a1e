"""The data jobs Pegasus adds to a sharedfs plan: create-dir, stage-in, chmod, stage-out, registration.

They are added after clustering, as Pegasus' refiners add them, to the nodes
of the clustered workflow (``Unit``: a cluster, or each job under whole
clustering, which plans every job as pegasus-plan's PMC-only mode does):

- stage-in: every file a job reads that no job of the workflow writes comes
  from the replica catalog into the workflow's directory. Per level of the
  workflow, ``ceil(nodes on the level / 10)`` stage-in jobs (Pegasus'
  BalancedCluster; ``pegasus.stagein.clusters`` sets the number), files dealt
  round-robin; a file is moved once and later readers depend on the job that
  moved it. A replica on the execution site becomes a symlink when
  ``pegasus.transfer.links`` is true (never an executable).
- stageable executables are staged the same way, then made executable by a
  chmod job (stage-in -> chmod -> compute); one chmod job per stage-in job
  that carried executables, where Pegasus makes one per compute job.
- stage-out: outputs marked stageOut go to the output site's storage,
  ``ceil(nodes on the level / 10)`` jobs per level (``pegasus.stageout.clusters``),
  each followed by a registration job for the files marked registerReplica;
  a file registered but not staged out is registered where it was written.
  Outputs of jobs removed by data reuse are staged from their replicas (level 1000).
- create-dir: one job makes the workflow's directory, parent of every root.

Names are Pegasus' (``stage_in_local_local_0_0``, ``register_local_0_0``,
``chmod_ID0000001_0``, ``create_dir_data_0_local``). Each transfer job runs
pegasus-transfer on a JSON list of entries, written by emit as the job's input
file (the ``INPUT_FILE`` word of its command).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from pilot.errors import ConfigError
from pilot.planner import replicas
from pilot.planner.containers import StagedImage
from pilot.planner.datainputs import map_line, transfer_input
from pilot.planner.datalayout import DataLayout
from pilot.planner.executables import Executable, checksum_of
from pilot.planner.model import INPUT_FILE, Catalogs, Job, JobType, Link, Unit, Use, Workflow, uses_of
from pilot.planner.stagesources import check_pair, producers, replica_sources
from pilot.util import safetext

JOBS_PER_TRANSFER = 10  # Pegasus' NUM_COMPUTE_JOBS_PER_TRANSFER_JOB
REUSED_LEVEL = 1000  # the level Pegasus names stage-outs of jobs removed by data reuse
DEFAULT_THREADS = "2"  # pegasus::transfer.threads
# What a data job is expected to take, for the plan's makespan estimate: pegasus-transfer starts its first
# worker thread 2 s after it starts (its "slow start"), which is most of a local transfer; chmod and
# registration take a process start.
TRANSFER_SECONDS = 2.0
OTHER_SECONDS = 0.1


def expected_runtime(job: Job) -> float:
    """A data job's expected run time in seconds (see TRANSFER_SECONDS)."""
    return (
        TRANSFER_SECONDS
        if job.command and INPUT_FILE in job.command and job.type is not JobType.REGISTRATION
        else OTHER_SECONDS
    )


@dataclass
class Container:
    """One transfer job being filled."""

    job: Job
    entries: list[dict] = field(default_factory=list)
    register: list[tuple[str, str, str, dict[str, str] | None]] = field(default_factory=list)  # lfn, url, site, attrs
    executables: list[str] = field(default_factory=list)  # paths to make executable
    verify: list[tuple[str, str]] = field(default_factory=list)  # (path, sha256) of what it brings, checked after
    images: list[str] = field(default_factory=list)  # RUNTIME PATH NAME URL of each image it brings (pilot.data.images)


class DataJobs:
    """Builds the data jobs for one plan; ``add`` links them to the compute jobs and returns them."""

    def __init__(
        self,
        wf: Workflow,
        lay: DataLayout,
        catalogs: Catalogs,
        stageable: dict[int, list[Executable]],
        reused: list[Job] | None = None,
        images: dict[str, StagedImage] | None = None,
    ) -> None:
        self.wf = wf
        self.lay = lay
        self.cat = catalogs
        self.props = catalogs.properties
        self.stageable = stageable  # job.index -> the stageable executables it needs
        self.replica_metadata: dict[str, dict[str, str]] = {}  # lfn -> its replicas' attributes (a raw input)
        # pegasus.integrity.checking: none turns checks off, as in Pegasus; else staged checksums are verified.
        self.verify = self.props.get("pegasus.integrity.checking", "full").lower() != "none"
        self.reused = reused or []
        self.images = images or {}  # lfn -> a container image: checked when found missing, loaded once staged
        self.made: list[Job] = []
        self.edges: set[tuple[int, int]] = set()
        self.copied_out: list[tuple[Job, list[str]]] = []  # stage-out jobs and the files they copy out of the directory
        self._turns: dict[tuple[str, int], int] = {}  # (in|out, level) -> files dealt to its transfer jobs so far
        self.known_sites = set(catalogs.sites) | {lay.exec_site, "local"}
        self.transfer = [
            *lay.transfer,
            "--threads",
            self._transfer_setting("transfer.threads") or DEFAULT_THREADS,
            *(self._transfer_setting("transfer.arguments") or "").split(),
        ]
        self.side = "local" if lay.exec_site == "local" else "remote"

    def _transfer_setting(self, key: str) -> str | None:
        """pegasus::``key`` of the data jobs, which run pegasus-transfer on the execution site, in Pegasus' order
        for a transfer job's profiles: the transformation catalog's pegasus::transfer (its entry for the site,
        then itself), the site's entry, the workflow's profiles, the property pegasus.``key``."""
        layers: list[dict[str, dict[str, str]]] = []
        tx = self.cat.find_transformation(("pegasus", "transfer", None))
        if tx is not None:
            entry = tx.sites.get(self.lay.exec_site)
            layers += [entry.profiles] if entry is not None else []
            layers.append(tx.profiles)
        site = self.cat.sites.get(self.lay.exec_site)
        for profiles in (*layers, site.profiles if site is not None else {}, self.cat.workflow_profiles):
            value = profiles.get("pegasus", {}).get(key)
            if value:
                return value
        return self.props.get(f"pegasus.{key}")

    # -- helpers ------------------------------------------------------------------------------
    def new_job(self, name: str, kind: JobType, tx: str, command: list[str] | None = None) -> Job:
        """A data job running ``command``, by default pegasus-transfer on its input file (``pegasus::<tx>``)."""
        if command is None:
            command = [*self.transfer, "-f", INPUT_FILE]
        job = Job(
            id=name,
            name=tx,
            namespace="pegasus",
            source=self.wf.path,
            type=kind,
            command=command,
            index=len(self.wf.jobs) + len(self.made),
        )
        self.made.append(job)
        return job

    def _transfer_job(self, name: str, kind: JobType) -> Container:
        return Container(job=self.new_job(name, kind, "transfer"))

    def edge(self, parent: Job, child: Job) -> None:
        """A dependency, once: every edge added here has a data job at one end, so only these need remembering
        (a set: a stage-in job feeds hundreds of jobs, and a list scan per edge would make planning quadratic)."""
        key = (id(parent), id(child))
        if key not in self.edges:
            self.edges.add(key)
            parent.children.append(child)
            child.parents.append(parent)

    def edges_of_new(self, new: Job, others: list[Job], below: bool = True) -> None:
        """Edges between ``new``, a job made just now with none yet, and each of ``others`` (its children, or its
        parents when not ``below``): none can be there already, so none is remembered (the create-dir job has an
        edge to each root of the workflow, the cleanup job one from each leaf: a million-job workflow's half)."""
        (new.children if below else new.parents).extend(others)
        for job in others:
            (job.parents if below else job.children).append(new)

    def _count(self, key: str, nodes: int) -> int:
        raw = self.props.get(key)
        if raw:
            try:
                value = int(raw)
            except ValueError:
                raise ConfigError(f"pegasus.properties: {key} = {raw!r} is not a whole number") from None
            if value >= 1:
                return value
        return max(1, math.ceil(nodes / JOBS_PER_TRANSFER))

    # -- stage-in -----------------------------------------------------------------------------
    def _sources(self, job: Job, k: int, use: Use) -> list[dict]:
        out, attributes = replica_sources(self.cat, job, k, use, self.lay.exec_site, self.known_sites)
        if attributes:
            self.replica_metadata[use.lfn] = attributes
        return out

    def _dest(self, lfn: str, src: dict, executable: bool) -> dict:
        path, url = self.lay.workdir.file(lfn)
        links = self.props.get("pegasus.transfer.links", "false").lower() == "true"
        if links and not executable and src["site_label"] == self.lay.exec_site and src["url"].startswith("file://"):
            url = "symlink://" + path
        return {"site_label": self.lay.exec_site, "url": url}

    def _wanted(self, job: Job, made: dict[str, Job]) -> list[tuple[int, Use, list[dict] | None]]:
        """What ``job`` needs staged: (uses index, file, sources; None: already on its way or not needed).

        Its inputs that no job writes, and its stageable executables (negative indexes).
        """
        out: list[tuple[int, Use, list[dict] | None]] = []
        if job.type is JobType.DAX:
            return out  # a sub-workflow stages its own inputs (its parent's outputs reach it as a cache file)
        for k, use in enumerate(job.uses):
            if use.reads and use.lfn not in made:
                out.append((k, use, None))
        for n, exe in enumerate(self.stageable.get(job.index, ())):
            why = safetext.problem_transfer_url(exe.url)
            if why:
                raise ConfigError(f"{job.where}: the executable {exe.url[:120]!r} of transformation {exe.lfn} {why}")
            use = Use(
                lfn=exe.lfn,
                link=Link.INPUT,
                metadata={"checksum.type": "sha256", "checksum.value": exe.sha256} if exe.sha256 else None,
            )
            out.append((-1 - n, use, [{"site_label": exe.site, "url": exe.url, "priority": 1}]))
        return out

    def _stage_in(self, by_level: dict[int, list[Unit]], made: dict[str, Job]) -> None:
        """Stage-in jobs per level, files dealt round-robin; ``made`` maps each file name to the job that writes it."""
        staged: dict[str, Container] = {}
        chmods: dict[int, tuple[Job, Container]] = {}  # id(stage-in job) -> the chmod job after it, and the stage-in
        per_job: dict[str, int] = {}  # job id -> the number of its last chmod job
        for level, on_level in by_level.items():
            count = self._count("pegasus.stagein.clusters", len(on_level))
            boxes: list[Container] = []
            for job in (j for unit in on_level for j in unit.jobs):
                if not job.uses and job.index not in self.stageable:
                    continue  # nothing to stage, as for most jobs of a big workflow
                for k, use, sources in self._wanted(job, made):
                    executable = k < 0
                    box = staged.get(use.lfn)
                    fresh: list[dict] = []  # where a file not on its way yet comes from
                    if box is None:
                        fresh = sources or self._sources(job, k, use)
                        if not fresh:
                            continue  # an optional input that no replica provides
                    if use.lfn in self.replica_metadata:  # the replica catalog's attributes, as Pegasus' stage-in adds
                        use.metadata = {**(use.metadata or {}), **self.replica_metadata[use.lfn]}
                    if box is None:
                        if len(boxes) < count:
                            name = f"stage_in_{self.side}_{self.lay.exec_site}_{level}_{len(boxes)}"
                            boxes.append(self._transfer_job(name, JobType.STAGE_IN))
                        box = boxes[self._turn(("in", level)) % count]
                        self._add_input(box, job, k, use, fresh, executable)
                        staged[use.lfn] = box
                    if not executable:
                        self.edge(box.job, job)
                        continue
                    if id(box.job) not in chmods:
                        n = per_job[job.id] = per_job.get(job.id, -1) + 1  # >0: its requires' are in another
                        chmod = self.new_job(f"chmod_{job.id}_{n}", JobType.CHMOD, "chmod")
                        chmods[id(box.job)] = (chmod, box)
                        self.edge(box.job, chmod)
                    self.edge(chmods[id(box.job)][0], job)
            for box in boxes:
                box.job.stdin_text = transfer_input(box.entries)
                assert box.job.command is not None
                if box.verify:
                    box.job.command = [
                        sys.executable,
                        "-m",
                        "pilot.data.integrity",
                        *(f"{path}={sha}" for path, sha in box.verify),
                        "--",
                        *box.job.command,
                    ]
                if box.images:  # loaded after their checksums are checked
                    box.job.command = [sys.executable, "-m", "pilot.data.images", *box.images, "--", *box.job.command]
        for chmod, box in chmods.values():  # each makes executable what its stage-in job brought
            chmod.command = ["/bin/chmod", "+x", *box.executables]

    def _turn(self, key: tuple[str, int]) -> int:
        """The next round-robin place of a direction and level (files are dealt one at a time, as
        BalancedCluster deals them)."""
        turn = self._turns.get(key, 0)
        self._turns[key] = turn + 1
        return turn

    def _add_input(self, box: Container, job: Job, k: int, use: Use, sources: list[dict], executable: bool) -> None:
        dest = self._dest(use.lfn, sources[0], executable)
        image = self.images.get(use.lfn)
        if image is not None:  # pegasus-transfer pulls a docker:// image by the type (docker save, apptainer pull)
            dest["type"] = image.kind
            box.images += [image.runtime, self.lay.workdir.file(use.lfn)[0], image.tag, sources[0]["url"]]
        for src in sources:
            check_pair(src["url"], dest["url"], f"{job.where}: uses[{k}]" if k >= 0 else job.where)
        entry = {
            "type": "transfer",
            "linkage": "input",
            "lfn": use.lfn,
            "id": len(box.entries) + 1,
            "src_urls": sources,
            "dest_urls": [dest],
        }
        if use.metadata:
            entry["attributes"] = dict(use.metadata)
        box.entries.append(entry)
        sha = checksum_of(use.metadata)
        if sha and self.verify:
            box.verify.append((self.lay.workdir.file(use.lfn)[0], sha))
        if executable:
            box.executables.append(self.lay.workdir.file(use.lfn)[0])

    # -- stage-out and registration ------------------------------------------------------------
    def _storage_url(self, job: Job, k: int, lfn: str) -> str:
        if self.lay.output_site not in self.cat.sites:
            raise ConfigError(
                f"{job.where}: uses[{k}]: output {lfn!r} is to be staged out to site "
                f"{self.lay.output_site!r}, which no site catalog names: add it, or choose another "
                "--output-sites"
            )
        if self.lay.storage is None:
            raise ConfigError(
                f"{job.where}: uses[{k}]: output {lfn!r} is to be staged out, but output site "
                f"{self.lay.output_site!r} has no storage directory: add a localStorage directory to "
                "it in the site catalog, choose another --output-sites, or set stageOut: false"
            )
        return self.lay.storage.file(lfn)[1]

    def _get_url(self, lfn: str) -> str:
        """Where readers find a staged-out file: the storage's URL for get (what Pegasus registers)."""
        assert self.lay.storage_get is not None
        return self.lay.storage_get.file(lfn)[1]

    def _stage_out(self, levels: dict[int, list[Unit]]) -> None:
        """Stage-out jobs per level (files dealt round-robin), each with a registration job beside it."""
        output_site = self.lay.output_site
        if not output_site:
            return  # as pegasus-plan without an output site: nothing staged out, nothing registered
        by_level = dict(levels)
        if self.reused:
            by_level[REUSED_LEVEL] = [Unit(jobs=self.reused, level=REUSED_LEVEL)]
        for level, on_level in by_level.items():
            reused = level == REUSED_LEVEL
            count = self._count("pegasus.stageout.clusters", JOBS_PER_TRANSFER if reused else len(on_level))
            boxes: list[Container] = []
            registers: dict[int, Container] = {}
            for job in (j for unit in on_level for j in unit.jobs):
                for k, use in enumerate(job.uses):
                    if use.writes and use.stage_out:
                        self._stage_out_file(job, k, use, level, count, boxes, registers, output_site)
                    elif use.writes and use.register and not reused:  # registered where it was written
                        reg = self._register_job(registers, self._turn(("out", level)) % count, level)
                        reg.register.append(
                            (use.lfn, self.lay.workdir_read.file(use.lfn)[1], self.lay.exec_site, use.metadata)
                        )
                        self.edge(job, reg.job)
            for reg in registers.values():
                reg.job.stdin_text = "".join(map_line(*entry) for entry in reg.register)
            for box in boxes:
                box.job.stdin_text = transfer_input(box.entries)
                if not reused:
                    self.copied_out.append((box.job, [e["lfn"] for e in box.entries]))

    def _stage_out_file(
        self,
        job: Job,
        k: int,
        use: Use,
        level: int,
        count: int,
        boxes: list[Container],
        registers: dict[int, Container],
        output_site: str,
    ) -> None:
        """One output to the output site's storage: from the workflow's directory, or, for a job data reuse
        left out, from its replicas (a local transfer, level 1000); then its registration."""
        reused = level == REUSED_LEVEL
        dest = self._storage_url(job, k, use.lfn)
        if reused:
            sources = [{"site_label": c.site, "url": replicas.url_of(c.pfn)} for c in replicas.find(self.cat, use.lfn)]
        else:
            sources = [
                {"site_label": self.lay.exec_site, "url": self.lay.workdir_read.file(use.lfn)[1]}
            ]  # its get server
        if not sources or any(s["url"] == dest for s in sources):
            return  # already where it belongs
        for src in sources:
            check_pair(src["url"], dest, f"{job.where}: uses[{k}]")
        if len(boxes) < count:
            side, site = ("local", "local") if reused else (self.side, self.lay.exec_site)
            boxes.append(self._transfer_job(f"stage_out_{side}_{site}_{level}_{len(boxes)}", JobType.STAGE_OUT))
        slot = self._turn(("out", level)) % count
        box = boxes[slot]
        entry = {
            "type": "transfer",
            "linkage": "output",
            "lfn": use.lfn,
            "id": len(box.entries) + 1,
            "src_urls": sources,
            "dest_urls": [{"site_label": self.lay.output_site, "url": dest}],
        }
        if use.metadata:
            entry["attributes"] = dict(use.metadata)
        box.entries.append(entry)
        if not reused:
            self.edge(job, box.job)
        if use.register:
            reg = self._register_job(registers, slot, level)
            reg.register.append((use.lfn, self._get_url(use.lfn), output_site, use.metadata))
            self.edge(box.job, reg.job)

    def _register_job(self, registers: dict[int, Container], slot: int, level: int) -> Container:
        """The registration job beside stage-out job ``slot`` of a level (pegasus-rc-client's map on its input)."""
        reg = registers.get(slot)
        if reg is None:
            command = [sys.executable, "-m", "pilot.data.register", "--db", self.lay.replica_db, "--insert", INPUT_FILE]
            reg = Container(
                job=self.new_job(
                    f"register_{self.lay.exec_site}_{level}_{slot}", JobType.REGISTRATION, "rc-client", command
                )
            )
            registers[slot] = reg
        return reg

    # -- all of it ----------------------------------------------------------------------------
    def add(self, units: Callable[[], list[Unit]]) -> list[Job]:
        """The data jobs, linked. ``units()``: the nodes transfers are grouped by, with their levels, asked for
        only when there is something to stage (for a million jobs with no files, about 0.4 s)."""
        made = producers(self.wf)
        cwd = self.lay.workdir.path
        for job in self.wf.jobs:
            job.cwd = cwd
        if self.stageable or self.reused or any(map(uses_of, self.wf.jobs)):
            by_level = _levels(units())
            self._stage_in(by_level, made)
            self._stage_out(by_level)
        else:  # the properties that would size the transfer jobs are checked all the same
            self._count("pegasus.stagein.clusters", 1)
            if self.lay.output_site:
                self._count("pegasus.stageout.clusters", 1)
        roots = [j for j in (*self.wf.jobs, *self.made) if not j.parents]
        mkdir = self.new_job(f"create_dir_{self.wf.name}_0_{self.lay.exec_site}", JobType.CREATE_DIR, "dirmanager")
        mkdir.stdin_text = transfer_input(
            [{"id": 1, "type": "mkdir", "target": {"site_label": self.lay.exec_site, "url": self.lay.workdir.url}}]
        )
        self.edges_of_new(mkdir, roots)
        return self.made


def _levels(units: list[Unit]) -> dict[int, list[Unit]]:
    out: dict[int, list[Unit]] = {}
    for unit in units:
        out.setdefault(unit.level, []).append(unit)
    return dict(sorted(out.items()))
