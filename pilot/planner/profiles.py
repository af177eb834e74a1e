"""Pegasus-namespace profiles of a job, with Pegasus' overloading order.

Highest first: transformation catalog (the transformation's site entry, then
the transformation), site catalog, the job in the workflow, properties
(``pegasus.<key>``). Keys the seed documents spell two ways are normalised
(``clusters_size`` and ``clusters.size``; ``maxruntime`` and
``clusters.maxruntime``).
"""

from __future__ import annotations

import math

from pilot.errors import ConfigError
from pilot.planner.model import Catalogs, Job

ALIASES = {
    "clusters_size": "clusters.size",
    "clusters_num": "clusters.num",
    "clusters_maxruntime": "clusters.maxruntime",
    "maxruntime": "clusters.maxruntime",
    "job_aggregator": "job.aggregator",
}
# Properties that are profiles when written as pegasus.<key>.
PROPERTY_PROFILES = (
    "clusters.size", "clusters.num", "clusters.maxruntime", "runtime", "job.aggregator",
    "pmc_request_memory", "pmc_request_cpus", "pmc_priority", "pmc_task_arguments", "label",
)


def _norm(values: dict[str, str]) -> dict[str, str]:
    return {ALIASES.get(k, k): v for k, v in values.items()}


class ProfileResolver:
    """Resolved pegasus profiles per job on a site (memoised per transformation and site)."""

    def __init__(self, catalogs: Catalogs, label_key: str) -> None:
        self.catalogs = catalogs
        self.label_key = label_key
        props = catalogs.properties
        self._from_properties = {k: props[f"pegasus.{k}"] for k in PROPERTY_PROFILES if f"pegasus.{k}" in props}
        if label_key not in PROPERTY_PROFILES and f"pegasus.{label_key}" in props:
            self._from_properties[label_key] = props[f"pegasus.{label_key}"]
        self._upper: dict[tuple, dict[str, str]] = {}

    def _catalog_layers(self, job: Job, site: str) -> dict[str, str]:
        key = (job.tx_key, site)
        merged = self._upper.get(key)
        if merged is None:
            merged = {}
            site_entry = self.catalogs.sites.get(site)
            if site_entry is not None:
                merged.update(_norm(site_entry.profiles.get("pegasus", {})))
            tx = self.catalogs.find_transformation(job.tx_key)
            if tx is not None:
                merged.update(_norm(tx.profiles.get("pegasus", {})))
                tx_site = tx.sites.get(site)
                if tx_site is not None:
                    merged.update(_norm(tx_site.profiles.get("pegasus", {})))
            self._upper[key] = merged
        return merged

    def pegasus(self, job: Job, site: str) -> dict[str, str]:
        job_profiles = job.profiles.get("pegasus")
        upper = self._catalog_layers(job, site)
        if not job_profiles and not self._from_properties:
            return upper
        out = dict(self._from_properties)
        if job_profiles:
            out.update(_norm(job_profiles))
        out.update(upper)
        return out


def int_profile(profiles: dict[str, str], key: str, job: Job, minimum: int = 0) -> int | None:
    raw = profiles.get(key)
    if raw is None or raw == "":
        return None
    try:
        value = int(float(raw))
    except ValueError:
        raise ConfigError(f"{job.where}: profile pegasus.{key} = {raw!r} is not a number") from None
    if value < minimum:
        raise ConfigError(f"{job.where}: profile pegasus.{key} = {raw!r} must be at least {minimum}")
    return value


def float_profile(profiles: dict[str, str], key: str, job: Job) -> float | None:
    raw = profiles.get(key)
    if raw is None or raw == "":
        return None
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{job.where}: profile pegasus.{key} = {raw!r} is not a number of seconds") from None
    if not math.isfinite(value) or value < 0:
        raise ConfigError(f"{job.where}: profile pegasus.{key} = {raw!r} must be a non-negative number of seconds")
    return value
