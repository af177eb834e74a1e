"""Site configurations: which scheduler, launcher, queue and sizes a site uses.

A site is a YAML file: one of the files shipped in ``site_configs/`` (by
name) or a user's own (by path). Every key is declared in ``SiteConfig`` with
a kind (``pilot.siteschema``): an unknown key, or a value of the wrong type or
shape, fails with one line naming the file, the line and the key, with the
closest valid key suggested for a typo. ``--set key=value`` values are read
by the same rules (lists comma-separated). Fields the site marks
``required`` (an account, an allocation) must be set, in the file or with
``--set``. The ``scheduler`` and ``launcher`` are names in the registries of
``providers`` (the layer below this one), and ``scheduler_options`` lines
must start with the scheduler plug-in's directive prefix.
"""

from __future__ import annotations

import difflib
import logging
import os
import shutil
from dataclasses import dataclass, field, fields
from importlib import resources
from typing import Any

from pilot.errors import ConfigError
from pilot.siteschema import (
    ARGS,
    BOOL,
    COMMAND,
    CONTAINER_RUNTIMES,
    DURATION,
    LINES,
    RUNTIMES,
    TEXT,
    TEXTLIST,
    WORD,
    Kind,
    choice,
    integer,
    key_list,
    parse_walltime,
    spec,
)
from pilot.util.boundedload import CONFIG_BYTES, load_yaml_lines, read_text
from providers import SCHEDULERS  # the one registry of scheduler plug-ins
from providers.launchers import LAUNCHERS  # the one registry of launcher lines

DEFAULT_UNREACHABLE_LIMIT = 1800  # seconds (site key unreachable_limit)


def _launcher(value: str) -> str | None:
    if os.path.basename(value) in LAUNCHERS and (os.sep not in value or os.path.isabs(value)):
        return None
    return f"{value!r} is not one of {', '.join(LAUNCHERS)} (or an absolute path to one)"


def _scheduler(value: str) -> str | None:
    return None if value in SCHEDULERS else f"{value!r} is not one of {', '.join(SCHEDULERS)}"


@dataclass
class SiteConfig:
    name: str = field(default="", metadata=spec(WORD))
    description: str = field(default="", metadata=spec(TEXT))
    scheduler: str = field(default="local", metadata=spec(choice(_scheduler)))
    launcher: str = field(default="mpiexec", metadata=spec(choice(_launcher)))
    # Where mpiexec/mpirun come from: "environment" = the one beside the Python pilot was planned
    # with (the mpich wheel), when it has one; "path" = the job's PATH after worker_init (a site module).
    launcher_from: str = field(
        default="environment",
        metadata=spec(
            choice(lambda v: None if v in ("environment", "path") else f"{v!r} is not 'environment' or 'path'")
        ),
    )
    launcher_options: str = field(default="", metadata=spec(ARGS))
    nodes: int = field(default=1, metadata=spec(integer(1)))
    ranks_per_node: int | None = field(default=None, metadata=spec(integer(1)))  # default: cores_per_node, else 2
    cores_per_node: int | None = field(default=None, metadata=spec(integer(1)))
    memory_per_node_mb: int | None = field(default=None, metadata=spec(integer(1)))
    gpus_per_node: int | None = field(default=None, metadata=spec(integer(0)))
    walltime: str = field(default="01:00:00", metadata=spec(DURATION))
    max_walltime: str | None = field(default=None, metadata=spec(DURATION))
    partition: str | None = field(default=None, metadata=spec(WORD))
    queue: str | None = field(default=None, metadata=spec(WORD))
    account: str | None = field(default=None, metadata=spec(WORD))
    qos: str | None = field(default=None, metadata=spec(WORD))
    constraint: str | None = field(default=None, metadata=spec(WORD))
    exclusive: bool = field(default=False, metadata=spec(BOOL))
    scheduler_options: list[str] = field(default_factory=list, metadata=spec(LINES))
    worker_init: list[str] = field(default_factory=list, metadata=spec(LINES))
    pilot_command: str = field(default="pilot", metadata=spec(COMMAND))
    pilot_options: str = field(default="", metadata=spec(ARGS))
    # pilot run's --max-crashes: a task running alone when its worker died this often is failed, not rerun
    max_crashes: int | None = field(default=None, metadata=spec(integer(1)))
    max_queued: int = field(default=10, metadata=spec(integer(1)))
    # Pilot jobs (pilot submit --pilots N): each of pilot_nodes nodes (default: nodes) for pilot_walltime
    # (default: max_walltime, else walltime); pilot_min_blocks kept while the run lasts; one without a
    # cluster for pilot_idle_timeout seconds ends.
    pilot_nodes: int | None = field(default=None, metadata=spec(integer(1)))
    pilot_walltime: str | None = field(default=None, metadata=spec(DURATION))
    pilot_min_blocks: int = field(default=0, metadata=spec(integer(0)))
    pilot_idle_timeout: int = field(default=120, metadata=spec(integer(0)))
    cmd_timeout: int = field(default=60, metadata=spec(integer(1)))
    # Seconds pilot submit keeps trying a scheduler that answers neither a submission nor a look for the job
    # before the clusters waiting to be submitted there fail (a controller restarted or failed over is back
    # well within the default).
    unreachable_limit: int = field(default=DEFAULT_UNREACHABLE_LIMIT, metadata=spec(integer(1)))
    # Seconds a cluster's batch job (with --pilots: the pilot job it waits for) may stay pending here, when pilot
    # submit was given other sites too, before it is withdrawn and bound to one of them (once per cluster, as a
    # matchmaker backs out of a choice that does not start); 0: never.
    pending_limit: int = field(default=0, metadata=spec(integer(0)))
    pegasus_site: str | None = field(default=None, metadata=spec(WORD))
    # The site's shared scratch (a directory every node sees) where the site catalog gives none:
    # the workflow's directory is made under it and every job runs there. $VARS are expanded at plan time.
    shared_scratch: str | None = field(default=None, metadata=spec(TEXT))
    # The container runtimes its compute nodes have (siteschema.CONTAINER_RUNTIMES), in the order to use them:
    # a job whose transformation runs in a container of the kind one of them runs is wrapped in it. A site whose
    # jobs run on this machine (scheduler: local) that does not name them offers those found on PATH.
    container_runtimes: list[str] = field(default_factory=list, metadata=spec(RUNTIMES))
    required: list[str] = field(default_factory=list, metadata=spec(key_list(lambda: KEYS)))
    sources: list[str] = field(default_factory=list, metadata=spec(TEXTLIST))
    path: str = ""

    def __post_init__(self) -> None:
        if self.ranks_per_node is None:
            self.ranks_per_node = self.cores_per_node or 2

    @property
    def handle(self) -> str:
        """The Pegasus site handle used for catalog lookups."""
        return self.pegasus_site or self.name

    @property
    def walltime_minutes(self) -> float:
        return parse_walltime(self.walltime, self.path or self.name)

    @property
    def batch_queue(self) -> str | None:
        return self.partition or self.queue


KINDS: dict[str, Kind] = {f.name: f.metadata["kind"] for f in fields(SiteConfig) if "kind" in f.metadata}
KEYS: list[str] = list(KINDS)


def shipped_sites() -> dict[str, str]:
    """Name -> path of the site configs shipped with pilot."""
    out: dict[str, str] = {}
    for entry in resources.files("site_configs").iterdir():
        if entry.name.endswith(".yaml"):
            out[entry.name[:-5]] = str(entry)
    return dict(sorted(out.items()))


# Names people use for a shipped site of another name: the site, and the one line said when it is used.
ALIASES = {
    "cori": (
        "cori-haswell",
        "NERSC retired Cori at the end of May 2023: --site cori plans for its Haswell partition "
        "as it was (cori-haswell; cori-knl for KNL); NERSC's current system is perlmutter-cpu",
    ),
}


def site_path(name_or_path: str) -> str:
    """The file of a shipped site (by name or alias) or of a user's own (by path)."""
    if os.sep in name_or_path or name_or_path.endswith((".yaml", ".yml")):
        try:  # a FIFO, a directory, a binary or over-long file: one line here, for every reader of the path
            read_text(name_or_path, CONFIG_BYTES)
        except FileNotFoundError:
            raise ConfigError(f"{name_or_path}: no such site file") from None
        return name_or_path
    sites = shipped_sites()
    if name_or_path in ALIASES and name_or_path not in sites:
        name_or_path, note = ALIASES[name_or_path]
        logging.getLogger("pilot.site").warning("%s", note)
    path = sites.get(name_or_path)
    if not path:
        close = difflib.get_close_matches(name_or_path, sites, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError(
            f"unknown site {name_or_path!r}{hint}; known sites: {', '.join(sites)}; or pass a path to your own YAML"
        )
    return path


def load_site(name_or_path: str, overrides: dict[str, str] | None = None, need_required: bool = True) -> SiteConfig:
    """Load a site by shipped name or by path, apply ``overrides`` (``--set``), validate (the keys it
    marks ``required`` only with ``need_required``: ``pilot sites show`` describes a site without them)."""
    path = site_path(name_or_path)
    raw, lines = read_site_file(path)
    data: dict[str, Any] = {"name": os.path.splitext(os.path.basename(path))[0]}
    for key, value in raw.items():
        where = f"{path}:{lines.get(key, 1)}"
        _check_key(key, where)
        data[key] = KINDS[key].check(value, f"{where}: {key}", from_text=False)
    for key, value in (overrides or {}).items():
        where = "--set"
        _check_key(key, where)
        data[key] = KINDS[key].check(value, f"{where}: {key}", from_text=True)
    if data.get("scheduler", "local") == "local" and "container_runtimes" not in data:
        data["container_runtimes"] = found_runtimes()
    site = SiteConfig(**{k: v for k, v in data.items() if v is not None})
    site.path = path
    _check_site(site, lines, need_required)
    return site


def found_runtimes() -> list[str]:
    """The container runtimes installed here (on PATH), in CONTAINER_RUNTIMES' order."""
    return [runtime for runtime in CONTAINER_RUNTIMES if shutil.which(runtime)]


def read_site_file(path: str) -> tuple[dict[str, Any], dict[str, int]]:
    """The file's mapping and the line of each key (bounded: pilot.util.boundedload)."""
    try:
        data, lines = load_yaml_lines(path)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such site file") from None
    if data is None:
        return {}, {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}:1: a site config is a mapping of keys to values")
    return {str(k): v for k, v in data.items()}, {str(k): n for k, n in lines.items()}


def _check_key(key: str, where: str) -> None:
    if key in KINDS:
        return
    close = difflib.get_close_matches(str(key), KEYS, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise ConfigError(f"{where}: unknown key {key!r}{hint}")


def _check_site(site: SiteConfig, lines: dict[str, int], need_required: bool) -> None:
    """Rules across keys, once every key has its type."""

    def where(key: str) -> str:
        return f"{site.path}:{lines[key]}" if key in lines else site.path

    if site.nodes * (site.ranks_per_node or 0) < 2:
        raise ConfigError(
            f"{where('ranks_per_node')}: ranks_per_node: a pilot needs at least 2 MPI ranks (nodes x ranks_per_node)"
        )
    if site.max_walltime and site.walltime_minutes > parse_walltime(site.max_walltime):
        raise ConfigError(
            f"{where('walltime')}: walltime: {site.walltime} is longer than the site's max_walltime {site.max_walltime}"
        )
    prefix = SCHEDULERS[site.scheduler].directive_prefix
    for line in site.scheduler_options:
        if not prefix or not line.startswith(prefix + " "):
            wanted = f"a {prefix} directive line" if prefix else "nothing (a local site has no batch directives)"
            raise ConfigError(f"{where('scheduler_options')}: scheduler_options: {line!r}: each entry must be {wanted}")
    for key in site.required if need_required else ():
        if getattr(site, key) in (None, "", []):
            raise ConfigError(
                f"{site.path}: site {site.name} needs {key}: pass --set {key}=VALUE, or copy the file, set it there and pass --site PATH"
            )
