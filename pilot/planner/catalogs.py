"""Read the Pegasus 5 YAML catalogs: transformations (and containers), sites, replicas.

Each may be inline in the workflow (``transformationCatalog``, ``siteCatalog``,
``replicaCatalog``) or a file of its own, as Pegasus.api writes them. Every
value is checked for its type where it is read, and an error names the file
and the YAML path.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from pilot.planner import containers, gateways, sysinfo
from pilot.planner.expand import expand
from pilot.planner.fields import read_checksum, read_file_metadata, read_hooks, read_metadata, read_profiles
from pilot.planner.model import (
    Catalogs,
    Directory,
    DirectoryType,
    Replica,
    Site,
    Transformation,
    TransformationSite,
)
from pilot.planner.yamlvalues import fail, flag, identifier, need_list, need_mapping, need_text, optional_text
from pilot.util import safetext

# The transformation pegasus-mpi-cluster is in a Pegasus transformation catalog: its profiles are its PMC job's.
AGGREGATOR = ("pegasus", "mpiexec")


def _under(ypath: str, key: str) -> str:
    return f"{ypath}.{key}" if ypath else key


def _catalog_entries(data: Any, path: str, ypath: str, key: str, what: str, needs: str) -> Iterator[tuple[str, dict]]:
    """(YAML path, mapping) of each entry of a catalog's list ``key`` (``transformations``, ``sites``,
    ``replicas``), each checked to be a mapping with its ``needs`` key."""
    data = need_mapping(data, path, ypath or "(top)", f"a {what} catalog: {{{key}: [...]}}")
    entries = _under(ypath, key)
    for i, raw in enumerate(need_list(data.get(key), path, entries, f"of {key}")):
        epath = f"{entries}[{i}]"
        raw = need_mapping(raw, path, epath, f"a {what} entry: {{{needs}: ..., ...}}")
        if needs not in raw:
            raise fail(path, epath, f"a {what} entry needs a {needs}")
        yield epath, raw


def read_transformation_catalog(data: Any, path: str, ypath: str, catalogs: Catalogs) -> None:
    for tpath, raw in _catalog_entries(data, path, ypath, "transformations", "transformation", "name"):
        name = need_text(raw["name"], path, f"{tpath}.name")
        namespace = identifier(raw, "namespace", path, tpath)
        aggregator = (namespace, name) == AGGREGATOR  # its nodes and ppn are the PMC job's, not a task's
        tx = Transformation(
            name=name,
            namespace=namespace,
            version=identifier(raw, "version", path, tpath),
            profiles=read_profiles(raw.get("profiles"), path, f"{tpath}.profiles", aggregator),
            hooks=read_hooks(raw.get("hooks"), path, f"{tpath}.hooks"),
            sha256=read_checksum(raw.get("checksum"), path, f"{tpath}.checksum"),
            requires=tuple(
                _requirement(r, path, f"{tpath}.requires[{k}]")
                for k, r in enumerate(need_list(raw.get("requires"), path, f"{tpath}.requires", "of NS::NAME:VERSION"))
            ),
        )
        read_metadata(raw.get("metadata"), path, f"{tpath}.metadata")  # checked; no plan step reads it (see docs)
        for k, site in enumerate(need_list(raw.get("sites"), path, f"{tpath}.sites", "of {name: SITE, pfn: PATH}")):
            spath = f"{tpath}.sites[{k}]"
            site = need_mapping(site, path, spath, "{name: SITE, pfn: PATH}")
            if "name" not in site or "pfn" not in site:
                raise fail(path, spath, "a transformation site needs name and pfn")
            handle = need_text(site["name"], path, f"{spath}.name")
            kind = need_text(site.get("type", "installed"), path, f"{spath}.type")
            if kind not in ("installed", "stageable"):
                raise fail(path, f"{spath}.type", f"{kind!r}: use installed or stageable")
            profiles = read_profiles(site.get("profiles"), path, f"{spath}.profiles", aggregator)
            entry = TransformationSite(
                handle,
                _pfn(site["pfn"], path, f"{spath}.pfn"),
                profiles,
                stageable=kind == "stageable",
                container=optional_text(site, "container", path, spath),
                sysinfo=sysinfo.read(site, path, spath),
                where=f"{path}: {spath}",
            )
            flag(site, "bypass", False, path, spath)  # Pegasus bypasses staging outside sharedfs only: staged here too
            tx.entries.append(entry)  # a site may have one entry per system: planner.sysinfo picks a job's
            tx.sites.setdefault(handle, entry)
        catalogs.transformations[(tx.namespace, tx.name, tx.version)] = tx
    for cpath, raw in _catalog_entries(data, path, ypath, "containers", "container", "name"):
        name = need_text(raw["name"], path, f"{cpath}.name")
        env = read_profiles(raw.get("profiles"), path, f"{cpath}.profiles").get("env", {})
        spec = containers.read(name, raw, env, path, cpath)
        catalogs.containers[name] = replace(spec, sha256=read_checksum(raw.get("checksum"), path, f"{cpath}.checksum"))


def _requirement(raw: Any, path: str, ypath: str) -> str:
    """A transformation another one needs (``requires``), as Pegasus.api writes it: ``[NS::]NAME[:VERSION]``."""
    text = need_text(raw, path, ypath)
    if not text.strip() or any(c.isspace() for c in text):
        raise fail(path, ypath, f"{text!r}: name a transformation of the catalog, as NS::NAME:VERSION")
    return text


def split_requirement(text: str) -> tuple[str | None, str, str | None]:
    """(namespace, name, version) of ``[NS::]NAME[:VERSION]``, as Pegasus' Separator splits it."""
    ns, sep, rest = text.partition("::")
    if not sep:
        ns, rest = "", text
    name, _, version = rest.partition(":")
    return ns or None, name, version or None


def _pfn(raw: Any, path: str, ypath: str) -> str:
    pfn = expand(need_text(raw, path, ypath), f"{path}: {ypath}")
    if not pfn.strip():
        raise fail(path, ypath, "an empty pfn: name the executable's path on the site")
    return pfn


def read_site_catalog(data: Any, path: str, ypath: str, catalogs: Catalogs) -> None:
    for spath, raw in _catalog_entries(data, path, ypath, "sites", "site", "name"):
        name = need_text(raw["name"], path, f"{spath}.name")
        why = safetext.problem_word(name)
        if why:  # a site names a cluster's .sub lines, directories and batch job
            raise fail(path, f"{spath}.name", f"{name[:80]!r} {why}")
        site = Site(
            name=name,
            profiles=read_profiles(raw.get("profiles"), path, f"{spath}.profiles"),
            sysinfo=sysinfo.read(raw, path, spath),
        )
        for k, d in enumerate(
            need_list(raw.get("directories"), path, f"{spath}.directories", "of {type: ..., path: ...}")
        ):
            directory = _directory(d, path, f"{spath}.directories[{k}]", name)
            site.directories[directory.type] = directory
        grids = need_list(raw.get("grids"), path, f"{spath}.grids", "of {type, contact, scheduler, jobtype}")
        site.grids = [gateways.read_grid(g, path, f"{spath}.grids[{k}]") for k, g in enumerate(grids)]
        catalogs.sites[name] = site


DIRECTORY_TYPES = {t.value: t for t in DirectoryType}
OPERATIONS = ("all", "get", "put")


def _directory(raw: Any, path: str, ypath: str, site: str) -> Directory:
    raw = need_mapping(raw, path, ypath, "{type: sharedScratch, path: DIR, fileServers: [...]}")
    for key in ("type", "path"):
        if key not in raw:
            raise fail(path, ypath, f"a site directory needs a {key}")
    kind = need_text(raw["type"], path, f"{ypath}.type")
    dtype = DIRECTORY_TYPES.get(kind)
    if dtype is None:
        raise fail(path, f"{ypath}.type", f"{kind!r}: use one of {', '.join(DIRECTORY_TYPES)}")
    where = f"{path}: {ypath}"
    directory = Directory(
        type=dtype, path=expand(need_text(raw["path"], path, f"{ypath}.path"), f"{path}: {ypath}.path"), where=where
    )
    # sharedFileSystem (worker nodes see the directory) is checked, not kept: only PegasusLite (nonsharedfs) reads
    # it, and a sharedfs plan assumes it.
    flag(raw, "sharedFileSystem", False, path, ypath)
    if not directory.path.startswith("/"):
        raise fail(path, f"{ypath}.path", f"{directory.path!r} is not an absolute path")
    for k, fs in enumerate(need_list(raw.get("fileServers"), path, f"{ypath}.fileServers", "of {url, operation}")):
        fpath = f"{ypath}.fileServers[{k}]"
        fs = need_mapping(fs, path, fpath, "{url: URL, operation: all}")
        if "url" not in fs:
            raise fail(path, fpath, "a file server needs a url")
        if fs.get("profiles"):  # Pegasus' FileServerDeserializer refuses the key too: no planner step reads them
            raise fail(
                path,
                f"{fpath}.profiles",
                f"site {site}: Pegasus does not use a file server's profiles (its "
                "planner refuses them): remove them; set profiles on the site, or pegasus-transfer's "
                "credentials in ~/.pegasus/credentials.conf",
            )
        operation = need_text(fs.get("operation", "all"), path, f"{fpath}.operation").lower()
        if operation not in OPERATIONS:
            raise fail(path, f"{fpath}.operation", f"{operation!r}: use all, get or put")
        url = expand(need_text(fs["url"], path, f"{fpath}.url"), f"{path}: {fpath}.url")
        directory.servers.append((url, operation))
    return directory


def replica_attributes(raw: dict, path: str, ypath: str) -> dict[str, str]:
    """A replica's ``metadata``, and its ``checksum`` as Pegasus keeps it among them (``checksum.type``,
    ``checksum.value``): what the monitoring DB and the transfer and registration entries carry."""
    out = read_file_metadata(raw.get("metadata"), path, f"{ypath}.metadata")
    sha = read_checksum(raw.get("checksum"), path, f"{ypath}.checksum")
    if sha is not None:
        out.update({"checksum.type": "sha256", "checksum.value": sha})
    return out


def read_replica_catalog(data: Any, path: str, ypath: str, catalogs: Catalogs) -> None:
    """``replicas: [{lfn, pfns: [{site, pfn}], regex}]``, inline in a workflow or a file of its own
    (Pegasus' YAML replica catalog). A regex entry's lfn must match a whole file name."""
    for rpath, raw in _catalog_entries(data, path, ypath, "replicas", "replica", "lfn"):
        lfn = need_text(raw["lfn"], path, f"{rpath}.lfn")
        attributes = replica_attributes(raw, path, rpath)
        copies = []
        for k, p in enumerate(need_list(raw.get("pfns"), path, f"{rpath}.pfns", "of {site: SITE, pfn: URL}")):
            ppath = f"{rpath}.pfns[{k}]"
            p = need_mapping(p, path, ppath, "{site: SITE, pfn: URL}")
            if "pfn" not in p:
                raise fail(path, ppath, "a replica needs a pfn (its URL or path)")
            site = "local" if p.get("site") is None else need_text(p["site"], path, f"{ppath}.site")
            pfn = expand(need_text(p["pfn"], path, f"{ppath}.pfn"), f"{path}: {ppath}.pfn")
            copies.append(Replica(pfn=pfn, site=site, where=f"{path}: {ppath}", metadata=attributes))
        if not copies:
            raise fail(path, f"{rpath}.pfns", f"replica {lfn!r} names no pfn: give at least one {{site, pfn}}")
        if flag(raw, "regex", False, path, rpath):
            try:
                pattern = re.compile(lfn)
            except re.error as exc:
                raise fail(path, f"{rpath}.lfn", f"{lfn!r} is not a regular expression: {exc}") from None
            catalogs.regex_replicas.append((pattern, copies))
        else:
            catalogs.replicas.setdefault(lfn, []).extend(copies)
