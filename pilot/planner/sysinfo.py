"""Which transformation catalog entry a job may run on its site: the system (arch, os.*) must match.

Pegasus describes a system by its SysInfo: architecture, OS type, OS release and
OS version (SysInfo.java). A transformation catalog entry's SysInfo says what its
executable was built for, a site catalog entry's what the site is; an entry or
site that names none is Pegasus' default, x86_64 linux with no release or
version. Pegasus' transformation mappers (mapper/All.java, the default, and
Installed.java, Staged.java) use an entry on a site only when the two SysInfos
are equal in every part, and a job none matches cannot be mapped to that site.

pilot does the same and says why in one line: the job, the transformation, the
entry's system and the site's, and what to change. Among the usable entries it
keeps pilot's order (the site's own entry first, else a stageable one of another
site); Pegasus' default transformation selector picks one of them at random.
"""

from __future__ import annotations

import re
from typing import Any

from pilot.errors import ConfigError
from pilot.planner.model import Job, Site, SysInfo, Transformation, TransformationSite
from pilot.planner.yamlvalues import fail, need_text

# The values Pegasus' SysInfo enums accept (SysInfo.java: Architecture, OS, OS_RELEASE); it refuses any other.
ARCHES = ("x86", "x86_64", "ppc", "ppc_64", "ia64", "sparcv7", "sparcv9", "amd64", "ppc64le", "aarch64")
OS_TYPES = ("linux", "sunos", "aix", "macosx", "windows")
OS_RELEASES = ("alpine", "rhel", "deb", "ubuntu", "fedora", "fc", "suse", "sles", "freebsd", "macos", "sunos")
VERSION = re.compile(r"[0-9]+(\.[0-9]+(\.[0-9]+)?)?\Z")


def read(raw: dict, path: str, ypath: str) -> SysInfo:
    """The ``arch``, ``os.type``, ``os.release`` and ``os.version`` of a site or transformation site entry,
    each checked against what Pegasus accepts (its enums: a value Pegasus would refuse is refused here)."""
    default = SysInfo()
    return SysInfo(
        arch=_one_of(raw, "arch", ARCHES, default.arch, path, ypath),
        os=_one_of(raw, "os.type", OS_TYPES, default.os, path, ypath),
        release=_one_of(raw, "os.release", OS_RELEASES, default.release, path, ypath),
        version=_version(raw, path, ypath),
    )


def _version(raw: dict, path: str, ypath: str) -> str:
    """``os.version``: digits, dot-separated, as Pegasus' schema (common.yml versionString) requires."""
    value = _text(raw, "os.version", path, ypath)
    if value and not VERSION.match(value):
        raise fail(path, f"{ypath}.os.version", f"{value!r} is not a version Pegasus accepts: write N, N.N or N.N.N")
    return value


def _text(raw: dict, key: str, path: str, ypath: str) -> str:
    value: Any = raw.get(key)
    return "" if value is None else need_text(value, path, f"{ypath}.{key}")


def _one_of(raw: dict, key: str, allowed: tuple[str, ...], default: str, path: str, ypath: str) -> str:
    value = _text(raw, key, path, ypath)
    if not value:
        return default
    if value not in allowed:
        raise fail(path, f"{ypath}.{key}", f"{value!r} is not one Pegasus knows: use one of {', '.join(allowed)}")
    return value


def site_system(site: Site | None) -> SysInfo:
    """A site's system: its catalog entry's, else Pegasus' default (a site the site catalog does not describe)."""
    return site.sysinfo if site is not None else SysInfo()


def candidates(tx: Transformation, handle: str) -> list[TransformationSite]:
    """The entries a job of ``tx`` on site ``handle`` could run, best first: the site's own, then stageable
    entries of other sites (staged to the site first), as pegasus-plan's All mapper admits them."""
    return [*(e for e in tx.entries if e.site == handle), *(e for e in tx.entries if e.site != handle and e.stageable)]


def usable(tx: Transformation, handle: str, site: Site | None) -> TransformationSite | None:
    """The first candidate built for the site's system, recorded as the site's entry in ``tx.sites`` (whose
    profiles the job then gets); None when there is none."""
    system = site_system(site)
    entry = tx.sites.get(handle)
    if entry is not None and entry.sysinfo == system:
        return entry  # the site's first entry, or the one chosen before: no other comes before it
    for entry in candidates(tx, handle):
        if entry.sysinfo == system:
            if entry.site == handle:
                tx.sites[handle] = entry
            else:
                tx.sites.pop(handle, None)  # the site's own entries are for other systems: none of their profiles
            return entry
    return None


def entry_for(job: Job, tx: Transformation, handle: str, site: Site | None) -> TransformationSite | None:
    """``usable``, or the error that says why an entry that names the site (or a stageable one) is not;
    None when the catalog has no candidate at all (the caller says so)."""
    found = usable(tx, handle, site)
    if found is not None:
        return found
    others = candidates(tx, handle)
    if not others:
        return None
    entry = others[0]
    system = site_system(site)
    default = "" if site is not None else ", Pegasus' default: the site catalog does not describe the site"
    raise ConfigError(
        f"{job.where}: transformation {job.tx_label} has no entry for the system of site {handle!r} "
        f"({system}{default}): its entry {entry.where or entry.site} is for {entry.sysinfo}; set that entry's "
        f"arch/os.* to the site's, add an entry for {system}, or correct the site's arch/os.* in the site catalog"
    )
