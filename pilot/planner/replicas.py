"""The input replica catalog: where each file the workflow reads already exists.

Read as pegasus-plan reads it (ReplicaFactory): inline in the workflow
(``replicaCatalog``), or a file: ``--replicas FILE``, else the property
``pegasus.catalog.replica.file``, else ``replicas.yml`` in the working
directory, else ``rc.txt``. A YAML file is Pegasus 5's replica catalog; any
other is Pegasus' ``File`` format, one replica a line: ``LFN PFN
site="SITE"`` (``regex="true"`` marks a regex entry). A regex entry's
pattern must match the whole file name (Java's ``matches``), and ``[k]`` in
its PFN is group k, ``[0]`` the whole name. A PFN without a URL scheme is a
path: an absolute one as written, a relative one from the directory of the
file that holds it (Pegasus leaves that to the planner's working directory,
which makes a catalog mean different files from different directories).
"""

from __future__ import annotations

import os
import re
import shlex

from pilot.errors import ConfigError
from pilot.planner import catalogs as catalog_readers
from pilot.planner import properties, yamlstream
from pilot.planner.expand import expand
from pilot.planner.fields import SHA256
from pilot.planner.model import Catalogs, Replica

SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")
GROUP = re.compile(r"\[(\d+)\]")
DEFAULT_FILES = ("replicas.yml", "rc.txt")
MAX_LINE = 1 << 16


def catalog_file(given: str | None, properties: dict[str, str]) -> str | None:
    """The replica catalog file pegasus-plan would read, or None."""
    if given:
        return given
    named = properties.get("pegasus.catalog.replica.file")
    if named:
        return named
    for name in DEFAULT_FILES:
        if os.path.exists(name):
            return name
    return None


def load(path: str, catalogs: Catalogs) -> None:
    """Add the replicas of a catalog file (YAML, or Pegasus' File format) to ``catalogs``."""
    kind = catalogs.properties.get("pegasus.catalog.replica", "")
    if kind.lower() == "file" or (not kind and not path.endswith((".yml", ".yaml"))):
        _load_text(path, catalogs)
    else:
        catalog_readers.read_replica_catalog(yamlstream.load(path), path, "", catalogs)
    resolve_relative(catalogs, os.path.dirname(os.path.abspath(path)), path)


def _load_text(path: str, catalogs: Catalogs) -> None:
    for lineno, raw in properties.numbered_lines(path, "a replica catalog"):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            words = shlex.split(line[:MAX_LINE])
        except ValueError as exc:
            raise ConfigError(f"{path}:{lineno}: {exc}: expected 'LFN PFN site=\"SITE\"'") from None
        if len(words) < 2:
            raise ConfigError(f"{path}:{lineno}: expected 'LFN PFN site=\"SITE\"'")
        attrs = dict(w.partition("=")[::2] for w in words[2:])
        metadata = {k: v for k, v in attrs.items() if k not in ("site", "pool", "regex")}
        if metadata.get("checksum.type", "sha256").lower() != "sha256" or (
            "checksum.value" in metadata and not SHA256.fullmatch(metadata["checksum.value"])
        ):
            raise ConfigError(
                f"{path}:{lineno}: checksum.type/checksum.value: pilot checks sha256 checksums (64 hex "
                "digits, as sha256sum prints them), as Pegasus does: give the file's sha256, or leave "
                "the checksum out"
            )
        copy = Replica(
            pfn=expand(words[1], f"{path}:{lineno}"),
            site=attrs.get("site") or attrs.get("pool") or "local",
            where=f"{path}:{lineno}",
            metadata=metadata,
        )
        if attrs.get("regex", "").lower() == "true":
            try:
                catalogs.regex_replicas.append((re.compile(words[0]), [copy]))
            except re.error as exc:
                raise ConfigError(f"{path}:{lineno}: {words[0]!r} is not a regular expression: {exc}") from None
        else:
            catalogs.replicas.setdefault(words[0], []).append(copy)


def resolve_relative(catalogs: Catalogs, base: str, source: str) -> None:
    """PFNs without a scheme that ``source`` gave become absolute, from ``base``."""
    groups = [*catalogs.replicas.values(), *(copies for _, copies in catalogs.regex_replicas)]
    for copies in groups:
        for copy in copies:
            if copy.where.startswith(source) and not SCHEME.match(copy.pfn) and not copy.pfn.startswith("/"):
                copy.pfn = os.path.normpath(os.path.join(base, copy.pfn))


def find(catalogs: Catalogs, lfn: str) -> list[Replica]:
    """The replicas of ``lfn``: exact entries, else those of every regex entry its name matches whole."""
    copies = catalogs.replicas.get(lfn)
    if copies:
        return copies
    out: list[Replica] = []
    for pattern, regex_copies in catalogs.regex_replicas:
        m = pattern.fullmatch(lfn)  # type: ignore[attr-defined]  # a compiled pattern (the catalog compiles each regex entry)
        if m is None:
            continue
        groups = (m.group(0), *m.groups())

        def group(ref: re.Match) -> str:
            k = int(ref.group(1))
            return (groups[k] or "") if k < len(groups) else ref.group(0)  # noqa: B023 - called only within this iteration

        for copy in regex_copies:
            out.append(Replica(pfn=GROUP.sub(group, copy.pfn), site=copy.site, where=copy.where))
    return out


def url_of(pfn: str) -> str:
    """A PFN as a URL: a path becomes ``file://`` and the path."""
    return pfn if SCHEME.match(pfn) else "file://" + pfn


def scheme(url: str) -> str:
    m = SCHEME.match(url)
    return m.group(1).lower() if m else "file"


def path_of(url: str) -> str | None:
    """The local path of a ``file://`` URL, else None."""
    return url[len("file://") :] if url.startswith("file://") else None


_PROTOCOLS: set[str] | None = None


def transfer_protocols() -> set[str]:
    """``src->dest`` scheme pairs pegasus-transfer can move (each tool's protocol map), empty if it is missing."""
    global _PROTOCOLS
    if _PROTOCOLS is None:
        _PROTOCOLS = set()
        try:
            import inspect

            from Pegasus import transfer  # noqa: PLC0415 (pegasus-wms.worker: only to read what it speaks)
        except ImportError:
            return {"file->file", "file->symlink"}
        for _, cls in inspect.getmembers(transfer, inspect.isclass):
            for pair in getattr(cls, "_protocol_map", None) or ():
                _PROTOCOLS.add(pair.split("::")[0])
    return _PROTOCOLS
