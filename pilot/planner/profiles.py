"""Pegasus- and env-namespace profiles of a job, with Pegasus' overloading order.

Highest first: transformation catalog (the transformation's site entry, then
the transformation), site catalog, the job in the workflow, the workflow's own
profiles, properties (``pegasus.<key>``, ``env.<NAME>``). Keys that Pegasus accepts under two names are stored
under one (``clusters_size`` as ``clusters.size``, ``job.runtime`` as
``runtime``, ``pmc_arguments`` as ``pmc_task_arguments``) by whoever reads
them, and values are checked where they are read, so that an error names the
file and YAML path (or properties line) the value came from.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping

from pilot.dag.parser import MAX_RUNTIME
from pilot.dag.taskline import ENV_NAME
from pilot.errors import ConfigError
from pilot.planner import keytable, profilekeys
from pilot.planner.model import Catalogs, Job, Transformation

ALIASES = {
    "clusters_size": "clusters.size",
    "clusters_num": "clusters.num",
    "clusters_maxruntime": "clusters.maxruntime",
    "maxruntime": "clusters.maxruntime",
    "job_aggregator": "job.aggregator",
    "job.runtime": "runtime",  # the name before Pegasus 4.x, which Pegasus still reads
    "pmc_arguments": "pmc_task_arguments",  # the name in the pegasus-mpi-cluster man page
    "glite_arguments": "glite.arguments",
}
Env = tuple[tuple[str, str], ...]  # a task's variables, in order
Layers = dict[str, dict[str, str]]  # per namespace, the catalogs' profiles of a transformation on a site


def canonical(key: str) -> str:
    """The one name a pegasus profile key is stored under."""
    return ALIASES.get(key, key)


def _whole(minimum: int) -> Callable[[str], str | None]:
    def check(raw: str) -> str | None:
        try:
            value = float(raw)
        except ValueError:
            return "is not a whole number"
        if not value.is_integer():
            return "is not a whole number"
        return None if value >= minimum else f"must be at least {minimum}"

    return check


def _amount(what: str, positive: bool = False, most: float | None = None) -> Callable[[str], str | None]:
    def check(raw: str) -> str | None:
        try:
            value = float(raw)
        except ValueError:
            return f"is not a number of {what}"
        if not math.isfinite(value):
            return f"is not a finite number of {what}"
        if positive and value <= 0:
            return "must be more than 0"
        if most is not None and value > most:
            return f"is more than {most:.0e} {what}: a typo?"
        return "must not be negative" if value < 0 else None

    return check


def _integer(raw: str) -> str | None:
    try:
        int(raw)
    except ValueError:
        return "is not an integer (negative ones are allowed)"
    return None


CHECKS: dict[str, Callable[[str], str | None]] = {
    "clusters.size": _whole(1),
    "clusters.num": _whole(1),
    "clusters.maxruntime": _amount("seconds", most=MAX_RUNTIME),
    "runtime": _amount("seconds", most=MAX_RUNTIME),
    "pmc_request_memory": _amount("MB"),
    "pmc_request_cpus": _amount("CPUs", positive=True),
    "pmc_priority": _integer,
    "memory": _amount("MB"),
    "cores": _amount("CPUs", positive=True),
    "gpus": _whole(0),
    "transfer.threads": _whole(1),
}


def check_value(key: str, raw: str) -> str | None:
    """Why ``raw`` is not a valid value of pegasus profile ``key`` (canonical name), as "is not ...", or None."""
    check = CHECKS.get(key)
    return None if check is None or raw == "" else check(raw)


class ProfileResolver:
    """A job's profiles on a site, merged in the order of the module doc. It keeps nothing per job, transformation
    or site: the resolve step (planner.resolve) asks it once per template and keeps the catalogs' layers of each
    transformation and site (``catalog_layers``) with its templates, so the plan has one cache, not two."""

    def __init__(self, catalogs: Catalogs, label_key: str) -> None:
        self.catalogs = catalogs
        self.label_key = label_key
        profilekeys.check_unknown(catalog_profiles(catalogs), label_key)
        wanted = PEGASUS_KEYS_READ | {label_key}
        layer: dict[str, dict[str, str]] = {"pegasus": {}, "globus": {}}
        for prop, value in catalogs.properties.items():
            ns, _, key = prop.partition(".")
            if ns == "pegasus" and canonical(key) in wanted:
                layer["pegasus"][canonical(key)] = value
            elif ns == "globus":
                layer[ns][key] = value
        profilekeys.fold(layer)  # checked where the properties were read
        self._from_properties = layer["pegasus"]
        self._from_properties.update(catalogs.workflow_profiles.get("pegasus", {}))
        # Per namespace but pegasus: the properties' <ns>.<key>, then the workflow's own profiles.
        self._below: dict[str, dict[str, str]] = {}
        for prop, value in catalogs.properties.items():
            ns, _, key = prop.partition(".")
            if key:
                self._below.setdefault(ns, {})[key] = value
        for ns, profiles in catalogs.workflow_profiles.items():
            self._below.setdefault(ns, {}).update(profiles)
        self.data_env = credentials_env(catalogs)

    def catalog_layers(self, tx_key: tuple, site: str) -> Layers:
        """The catalogs' profiles of transformation ``tx_key``'s jobs on ``site`` per namespace: the site's, under
        the transformation's, under its entry for the site. The entries are in use from now on, so their refused
        and unknown keys are errors now. The resolve step keeps them per transformation and site."""
        merged: Layers = {}
        site_entry = self.catalogs.sites.get(site)
        layers = []
        if site_entry is not None:
            self._check_used(site_entry.profiles)
            layers.append(site_entry.profiles)
        tx = self.catalogs.find_transformation(tx_key)
        if tx is not None:
            layers.append(tx.profiles)
            tx_site = tx.sites.get(site)
            if tx_site is not None:
                self._check_used(tx_site.profiles)
                layers.append(tx_site.profiles)
        for profiles in layers:
            for ns, values in profiles.items():
                merged.setdefault(ns, {}).update(values)
        return merged

    def transformation_profiles(self, tx: Transformation, site: str, ns: str) -> dict[str, str]:
        """The profiles of namespace ``ns`` that ``tx``'s entry itself gives on ``site`` (its site entry over the
        transformation's), without the site's or the properties': what a transformation that runs no job
        of the workflow, such as the aggregator, brings to the job it wraps."""
        merged = dict(tx.profiles.get(ns, {}))
        tx_site = tx.sites.get(site)
        if tx_site is not None:
            self._check_used(tx_site.profiles)
            merged.update(tx_site.profiles.get(ns, {}))
        return merged

    def _check_used(self, profiles: dict[str, dict[str, str]]) -> None:
        """A site entry a job uses: its refused and unknown keys are errors now (read, they were set aside)."""
        profilekeys.check_deferred(profiles)
        profilekeys.check_unknown((profiles,), self.label_key)

    def pegasus(self, job: Job, upper: Layers) -> dict[str, str]:
        """The job's pegasus profiles, ``upper`` the catalog layers of its transformation on its site
        (``catalog_layers``). A job without pegasus profiles of its own may get ``upper``'s own dict: callers
        read it, never change it."""
        profiles = job.profiles
        mine = None
        if profiles:
            if profilekeys.UNKNOWN in profiles:
                profilekeys.check_unknown((profiles,), self.label_key)
            mine = profiles.get("pegasus")
        catalog = upper.get("pegasus", _NONE)
        if not mine:
            return {**self._from_properties, **catalog} if self._from_properties else catalog
        out = dict(self._from_properties)
        out.update(mine)
        out.update(catalog)
        return out

    def other(self, job: Job, upper: Layers, ns: str) -> dict[str, str]:
        """The job's profiles of namespace ``ns`` (env, condor, globus, ...), in the order of the module doc; it
        may be ``upper``'s own dict, which callers read, never change."""
        below = self._below.get(ns)
        catalog = upper.get(ns, _NONE)
        mine = job.profiles.get(ns)
        if not mine and not below:
            return catalog
        merged = dict(below or ())
        if mine:
            merged.update(mine)
        merged.update(catalog)
        return merged

    def env(self, job: Job, upper: Layers) -> Env | None:
        """The variables the job's task gets (None: none)."""
        return tuple(self.other(job, upper, "env").items()) or None


_NONE: dict[str, str] = {}  # a namespace no layer sets: read, never changed


def credentials_env(catalogs: Catalogs) -> tuple[tuple[str, str], ...] | None:
    """The data jobs' variables: a site's credential (``pegasus::ssh_private_key``, ..., or the variable itself
    among its env profiles) as ``NAME_<site>``, which pegasus-transfer reads for that site's URLs (its
    site_label, '-' as '_'), as Pegasus' credential handlers set it for transfer jobs. None: no site has one."""
    out: dict[str, str] = {}
    for handle, site in catalogs.sites.items():
        for key, var in keytable.CREDENTIALS.items():
            value = site.profiles.get("pegasus", {}).get(key) or site.profiles.get("env", {}).get(var)
            if value:
                name = f"{var}_{handle.replace('-', '_')}"
                if not ENV_NAME.match(name):
                    raise ConfigError(
                        f"site {handle}: its {var} would reach pegasus-transfer as {name!r}, which is "
                        "no environment variable name: name the site with letters, digits, '_' and '-'"
                    )
                if any(c in value for c in "\n\r\0"):
                    raise ConfigError(f"site {handle}: its {key} holds a newline or NUL: give the file's path")
                out[name] = value
    return tuple(sorted(out.items())) or None


# The pegasus keys pilot reads, which the properties may carry as pegasus.<key> (Pegasus assimilates them all).
PEGASUS_KEYS_READ = frozenset(k for k, e in keytable.PEGASUS.items() if e.verdict == keytable.HONOURED)


def catalog_profiles(catalogs: Catalogs) -> Iterator[dict[str, dict[str, str]]]:
    """The profiles of the workflow itself and of each transformation."""
    yield catalogs.workflow_profiles
    for tx in catalogs.transformations.values():
        yield tx.profiles  # a site's entries, and the sites themselves, are checked where a job uses them


def int_profile(profiles: Mapping[str, str], key: str) -> int | None:
    """A whole-number profile (checked when read), or None when unset."""
    raw = profiles.get(key)
    return None if raw is None or raw == "" else int(float(raw))


def float_profile(profiles: Mapping[str, str], key: str) -> float | None:
    """A number profile (checked when read), or None when unset."""
    raw = profiles.get(key)
    return None if raw is None or raw == "" else float(raw)
