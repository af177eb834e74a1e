"""Site configurations: which scheduler, launcher, queue and sizes a site uses.

A site is a YAML file: one of the files shipped in ``site_configs/`` (by
name) or a user's own (by path). Keys are checked: an unknown key fails with
the closest valid one suggested (``file:line: unknown key 'acount' (did you
mean 'account'?)``), and fields the site marks ``required`` (an account, an
allocation) must be set, in the file or with ``--set key=value``.
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass, field, fields
from importlib import resources
from typing import Any

import yaml

from pilot.errors import ConfigError
from pilot.yamlerrors import yaml_error

SCHEDULERS = ("local", "slurm", "pbspro", "torque")
LAUNCHERS = ("mpiexec", "srun", "aprun", "ibrun", "mpirun")
# Values that go into #SBATCH/#PBS lines must be plain words: no quoting applies there.
_DIRECTIVE_VALUE = re.compile(r"[A-Za-z0-9_.,:=@+/%-]+\Z")


@dataclass
class SiteConfig:
    name: str
    description: str = ""
    scheduler: str = "local"
    launcher: str = "mpiexec"
    launcher_options: str = ""
    nodes: int = 1
    ranks_per_node: int = 2
    cores_per_node: int | None = None
    memory_per_node_mb: int | None = None
    gpus_per_node: int | None = None
    walltime: str = "01:00:00"
    partition: str | None = None
    queue: str | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    exclusive: bool = False
    scheduler_options: str = ""
    worker_init: str = ""
    pilot_command: str = "pilot"
    pilot_options: str = ""
    max_queued: int = 10
    cmd_timeout: int = 60
    pegasus_site: str | None = None
    required: list[str] = field(default_factory=list)
    notes: str = ""
    path: str = ""

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


KEYS = [f.name for f in fields(SiteConfig) if f.name != "path"]


def parse_walltime(text: str, where: str = "walltime") -> float:
    """``[[D-]HH:]MM[:SS]`` or minutes -> minutes."""
    value = str(text).strip()
    m = re.fullmatch(r"(?:(\d+)-)?(\d+):(\d{1,2})(?::(\d{1,2}))?", value)
    if m:
        days = int(m.group(1) or 0)
        if m.group(4) is not None:
            h, mi, s = int(m.group(2)), int(m.group(3)), int(m.group(4))
        else:
            h, mi, s = int(m.group(2)), int(m.group(3)), 0
        return days * 1440 + h * 60 + mi + s / 60
    try:
        minutes = float(value)
    except ValueError:
        raise ConfigError(f"{where}: walltime {text!r} is not HH:MM:SS or minutes") from None
    if minutes <= 0:
        raise ConfigError(f"{where}: walltime must be positive")
    return minutes


def format_walltime(minutes: float) -> str:
    seconds = int(round(minutes * 60))
    return f"{seconds // 3600:02d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def shipped_sites() -> dict[str, str]:
    """Name -> path of the site configs shipped with pilot."""
    out: dict[str, str] = {}
    for entry in resources.files("site_configs").iterdir():
        if entry.name.endswith(".yaml"):
            out[entry.name[:-5]] = str(entry)
    return dict(sorted(out.items()))


def site_path(name_or_path: str) -> str:
    """The file of a shipped site (by name) or of a user's own (by path)."""
    if os.sep in name_or_path or name_or_path.endswith((".yaml", ".yml")):
        if not os.path.exists(name_or_path):
            raise ConfigError(f"{name_or_path}: no such site file")
        return name_or_path
    sites = shipped_sites()
    path = sites.get(name_or_path)
    if not path:
        close = difflib.get_close_matches(name_or_path, sites, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError(f"unknown site {name_or_path!r}{hint}; known sites: {', '.join(sites)}; or pass a path to your own YAML")
    return path


def load_site(name_or_path: str, overrides: dict[str, str] | None = None) -> SiteConfig:
    """Load a site by shipped name or by path, apply ``overrides``, validate."""
    path = site_path(name_or_path)
    raw, lines = _read(path)
    default_name = os.path.splitext(os.path.basename(path))[0]
    data: dict[str, Any] = {"name": default_name}
    for key, value in raw.items():
        _check_key(key, path, lines.get(key))
        data[key] = value
    for key, value in (overrides or {}).items():
        _check_key(key, "--set", None)
        data[key] = value
    site = SiteConfig(**{k: v for k, v in data.items() if v is not None or k == "name"})
    site.path = path
    _validate(site, lines)
    return site


def _read(path: str) -> tuple[dict[str, Any], dict[str, int]]:
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        node = yaml.compose(text)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise yaml_error(path, exc) from None
    if node is None:
        return {}, {}
    if not isinstance(node, yaml.MappingNode):
        raise ConfigError(f"{path}:1: a site config is a mapping of keys to values")
    lines = {k.value: k.start_mark.line + 1 for k, _ in node.value}
    data = yaml.safe_load(text) or {}
    return data, lines


def _check_key(key: str, path: str, line: int | None) -> None:
    if key in KEYS:
        return
    close = difflib.get_close_matches(str(key), KEYS, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    where = f"{path}:{line}" if line else path
    raise ConfigError(f"{where}: unknown key {key!r}{hint}")


def _validate(site: SiteConfig, lines: dict[str, int]) -> None:
    def fail(key: str, message: str) -> ConfigError:
        line = lines.get(key)
        where = f"{site.path}:{line}" if line else site.path
        return ConfigError(f"{where}: {key}: {message}")

    if site.scheduler not in SCHEDULERS:
        raise fail("scheduler", f"{site.scheduler!r} is not one of {', '.join(SCHEDULERS)}")
    if os.path.basename(site.launcher) not in LAUNCHERS or (os.sep in site.launcher and not os.path.isabs(site.launcher)):
        raise fail("launcher", f"{site.launcher!r} is not one of {', '.join(LAUNCHERS)} (or an absolute path to one)")
    for key in ("nodes", "ranks_per_node", "max_queued", "cmd_timeout", "cores_per_node", "memory_per_node_mb", "gpus_per_node"):
        value = getattr(site, key)
        if value is None:
            continue
        if isinstance(value, str) and value.isdigit():
            value = int(value)
            setattr(site, key, value)
        if not isinstance(value, int) or isinstance(value, bool) or value < (0 if key == "gpus_per_node" else 1):
            raise fail(key, f"{value!r} must be a positive integer")
    if site.nodes * site.ranks_per_node < 2:
        raise fail("ranks_per_node", "a pilot needs at least 2 MPI ranks (nodes x ranks_per_node)")
    if isinstance(site.exclusive, str):
        site.exclusive = site.exclusive.lower() in ("1", "true", "yes")
    site.walltime = str(site.walltime)
    parse_walltime(site.walltime, f"{site.path}:{lines.get('walltime', '')}".rstrip(":"))
    for key in ("partition", "queue", "account", "qos", "constraint"):
        value = getattr(site, key)
        if value is not None:
            value = str(value)
            setattr(site, key, value)
            if not _DIRECTIVE_VALUE.match(value):
                raise fail(key, f"{value!r} has characters that cannot go into a batch directive")
    for key in site.required:
        if key not in KEYS:
            raise fail("required", f"{key!r} is not a site key")
        if getattr(site, key) in (None, ""):
            raise ConfigError(
                f"{site.path}: site {site.name} needs {key}: pass --set {key}=VALUE, or copy the file, set it there and pass --site PATH"
            )
