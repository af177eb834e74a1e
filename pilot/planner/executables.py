"""Which executables a job needs staged into its directory: its own, when stageable, and those its transformation
``requires``, each under the file name Pegasus stages it by."""

from __future__ import annotations

from dataclasses import dataclass

from pilot.errors import ConfigError
from pilot.planner import replicas, sysinfo
from pilot.planner.catalogs import split_requirement
from pilot.planner.model import Catalogs, Job, Transformation


def executable_lfn(job: Job) -> str:
    """A staged executable's file name, ``<namespace>-<name>-<version>`` without empty parts (Pegasus')."""
    return "-".join(p for p in (job.namespace, job.name, job.version) if p)


@dataclass(frozen=True)
class Executable:
    """A stageable executable a job needs in its directory: its own, or one its transformation ``requires``."""

    lfn: str  # its name there (executable_lfn)
    url: str
    site: str
    sha256: str | None = None


def checksum_of(metadata: dict[str, str] | None) -> str | None:
    """The sha256 a file's metadata gives (``checksum.type``/``checksum.value``, as Pegasus keeps it)."""
    if not metadata or metadata.get("checksum.type", "sha256").lower() != "sha256":
        return None
    return metadata.get("checksum.value")


def required_executables(catalogs: Catalogs, job: Job, tx: Transformation, handle: str) -> list[Executable]:
    """The stageable executables that ``job``'s staged executable ``requires``, staged beside it under their own
    staged names, as Pegasus stages a transformation's dependent executables (an installed one is there already)."""
    out = []
    for text in tx.requires:
        need = catalogs.find_transformation(split_requirement(text))
        entry = None if need is None else sysinfo.usable(need, handle, catalogs.sites.get(handle))
        if need is None or entry is None:
            raise ConfigError(
                f"{job.where}: transformation {job.tx_label} requires {text!r}, which the transformation "
                f"catalog has no entry of for site {handle!r} and its system: add one, or drop it from requires"
            )
        if entry.stageable:
            lfn = "-".join(p for p in (need.namespace, need.name, need.version) if p)
            out.append(Executable(lfn, replicas.url_of(entry.pfn), entry.site, need.sha256))
    return out
