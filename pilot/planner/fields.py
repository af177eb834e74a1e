"""Read what a Pegasus 5 workflow and its catalogs share: profiles, shell hooks and metadata.

The workflow, its jobs, transformations and sites each carry ``profiles``;
the workflow, jobs and transformations carry ``hooks`` and ``metadata``. One
reader each, so a value is checked the same wherever it is written, and an
error names the file and the YAML path.
"""

from __future__ import annotations

import re
from typing import Any

from pilot.dag.taskline import ENV_NAME
from pilot.planner import profilekeys, replaced
from pilot.planner.expand import expand
from pilot.planner.model import Profiles
from pilot.planner.profiles import canonical, check_value
from pilot.planner.yamlvalues import fail, need_list, need_mapping, need_text


def read_profiles(raw: Any, path: str, ypath: str, aggregator: bool = False) -> Profiles:
    """``{namespace: {key: value}}``, each key checked against Pegasus' (pilot.planner.profilekeys): a key pilot
    refuses, or one Pegasus does not know, is an error naming it; keys are stored under the names pilot reads
    them by, values checked. A pegasus key Pegasus does not know may be the label key the properties name
    (read later), so it is kept under profilekeys.UNKNOWN with its place, and refused by
    profilekeys.check_unknown at plan time if it is not. On the ``aggregator``'s entry (pegasus::mpiexec) the
    keys nodes and ppn (globus hostcount and xcount) are its PMC job's size, as in Pegasus, not a task's: any whole
    number of 1 or more (planner.batchopts sizes its batch job with them)."""
    where = "job" if ypath.startswith("jobs[") else "entry"
    per_site = ".sites[" in ypath or ypath.startswith("sites[")  # refused only where used (profilekeys.DEFERRED)
    in_container = ".containers[" in ypath or ypath.startswith("containers[")
    out: Profiles = {}
    for ns, values in need_mapping(raw, path, ypath, "namespace: {key: value}").items():
        npath = f"{ypath}.{ns}"
        ns = str(ns).lower()
        why = profilekeys.namespace_problem(ns)
        if why is None and in_container and ns != "env":
            why = f"a container's profiles set its environment (env) only: set {ns} profiles on the transformation"
        if why:
            raise fail(path, npath, why)
        if ns.startswith("x-"):
            continue  # a vendor extension: Pegasus ignores it too (Profiles.java createProfiles)
        got: dict[str, str] = {}
        spelled: dict[str, str] = {}  # stored key -> the name it was given under
        for key, value in need_mapping(values, path, npath, "key: value").items():
            key = str(key)
            kpath = f"{npath}.{key}"
            text = need_text("" if value is None else value, path, kpath)
            if "${" in text:
                text = expand(text, f"{path}: {kpath}")
            if ns == "env":
                check_env(key, text, path, kpath)
            name, why = profilekeys.problem(ns, key, text, where)
            if aggregator and (ns, name) in AGGREGATOR_SIZE:
                why = (
                    None
                    if check_value("clusters.size", text) is None
                    else f"{key} = {text!r} is not a whole number of 1 or more"
                )
                if why:
                    raise fail(path, kpath, why)
            elif why and ns == "pegasus" and profilekeys.lookup(ns, key)[1] is None:
                name = key  # kept as written: the label key is looked up under the name the properties give
                out.setdefault(profilekeys.UNKNOWN, {})[key] = f"{path}: {kpath}"
            elif why and per_site:
                out.setdefault(profilekeys.DEFERRED, {})[kpath] = str(fail(path, kpath, why))
                continue
            elif why:
                raise fail(path, kpath, why)
            else:
                instead = profilekeys.replacement(ns, key, text, where)
                if instead is not None:
                    said = f"{ns}::{key}"
                    if per_site:  # said when a job runs on the site (profilekeys.check_deferred)
                        out.setdefault(profilekeys.DEFERRED_NOTES, {}).setdefault(
                            said, replaced.line(said, f"{path}: {kpath}", instead)
                        )
                    else:
                        replaced.note(said, f"{path}: {kpath}", instead)
            if ns == "pegasus":
                why = check_value(canonical(name), text)
                if why:
                    raise fail(path, kpath, f"{text!r} {why}")
            other = spelled.setdefault(name, key)
            if other != key:
                raise fail(path, kpath, f"{key} and {other} name the same profile: keep one")
            got[name] = text
        out[ns] = got
    try:
        profilekeys.fold(out)
    except ValueError as exc:
        raise fail(path, ypath, str(exc)) from None
    runtime = out.get("pegasus", {}).get("runtime")
    why = None if runtime is None else check_value("runtime", runtime)
    if why:
        raise fail(path, ypath, f"runtime {runtime!r} (from maxwalltime) {why}")
    return out


# The keys that size the aggregator's PMC job (planner.batchopts), refused on a job's transformation (a task runs on
# one node): pegasus nodes and ppn, and the globus keys Pegasus reads as them (hostcount, xcount).
AGGREGATOR_SIZE = (("pegasus", "nodes"), ("pegasus", "ppn"), ("globus", "hostcount"), ("globus", "xcount"))


def check_env(name: str, value: str, path: str, kpath: str) -> None:
    """An env profile becomes a variable of the task's environment, written into a PMC DAG line."""
    if not ENV_NAME.match(name):
        raise fail(
            path,
            kpath,
            f"{name!r} is not an environment variable name: use letters, digits and '_', " "not starting with a digit",
        )
    if any(c in value for c in "\n\r\0"):
        raise fail(path, kpath, "an environment value cannot hold a newline or NUL: pass such data in a file")


# Pegasus.api's hook events and the conditions pegasus-monitord's notifications file names them by.
HOOK_CONDITIONS = {"start": "start", "error": "on_error", "success": "on_success", "end": "at_end", "all": "all"}


def read_hooks(raw: Any, path: str, ypath: str) -> list[tuple[str, str]]:
    """``hooks: {shell: [{_on: EVENT, cmd: COMMAND}]}``: (monitord condition, command) pairs, which
    pegasus-monitord runs at those events, as it does for a Pegasus run."""
    if raw is None:
        return []
    out = []
    for kind, entries in need_mapping(raw, path, ypath, "shell: [{_on: EVENT, cmd: COMMAND}]").items():
        if kind != "shell":
            raise fail(
                path, f"{ypath}.{kind}", f"{kind!r} hooks: only shell hooks exist (shell: [{{_on: ..., cmd: ...}}])"
            )
        for k, entry in enumerate(need_list(entries, path, f"{ypath}.shell", "of {_on: EVENT, cmd: COMMAND}")):
            epath = f"{ypath}.shell[{k}]"
            entry = need_mapping(entry, path, epath, "{_on: EVENT, cmd: COMMAND}")
            event = need_text(entry.get("_on", ""), path, f"{epath}._on")
            if event not in HOOK_CONDITIONS:
                raise fail(path, f"{epath}._on", f"{event!r}: use one of {', '.join(HOOK_CONDITIONS)}")
            cmd = need_text(entry.get("cmd", ""), path, f"{epath}.cmd")
            if not cmd.strip() or any(c in cmd for c in "\n\r\0"):
                raise fail(path, f"{epath}.cmd", "a hook is one command line: not empty, no newline or NUL")
            out.append((HOOK_CONDITIONS[event], cmd))
    return out


def read_metadata(raw: Any, path: str, ypath: str) -> dict[str, str]:
    """``metadata: {key: value}`` of a job or the workflow (pegasus-monitord stores it in the DB)."""
    if raw is None:
        return {}
    out = {}
    for key, value in need_mapping(raw, path, ypath, "key: value").items():
        text = need_text("" if value is None else value, path, f"{ypath}.{key}")
        if any(c in str(key) + text for c in "\n\r\0"):
            raise fail(path, f"{ypath}.{key}", "metadata cannot hold a newline or NUL")
        out[str(key)] = text
    return out


def read_file_metadata(raw: Any, path: str, ypath: str) -> dict[str, str]:
    """A file's metadata: as any metadata, with keys that also fit a ``key="value"`` word of the output replica
    catalog's map lines (no '=', quote or whitespace), where Pegasus registers them."""
    out = read_metadata(raw, path, ypath)
    for key in out:
        if not key or any(c in key for c in "=\"' \t"):
            raise fail(
                path,
                f"{ypath}.{key}",
                f"{key!r}: a file's metadata key is one word without '=' or quotes "
                '(it is registered as key="value")',
            )
    return out


SHA256 = re.compile(r"[0-9a-fA-F]{64}")


def read_checksum(raw: Any, path: str, ypath: str) -> str | None:
    """``checksum: {sha256: HEX}`` of a replica, an executable or a container image: the sha256 that pilot checks
    where the file is staged. Pegasus knows sha256 alone; any other type is refused rather than left unchecked."""
    if raw is None:
        return None
    out = None
    for kind, value in need_mapping(raw, path, ypath, "{sha256: HEX}").items():
        if str(kind).lower() != "sha256":
            raise fail(
                path,
                f"{ypath}.{kind}",
                f"{kind!r} checksums are not checked (Pegasus knows sha256 only): give "
                "the file's sha256 (sha256sum FILE), or leave the checksum out",
            )
        out = need_text(value, path, f"{ypath}.{kind}")
        if not SHA256.fullmatch(out):
            raise fail(path, f"{ypath}.{kind}", f"{out[:80]!r} is not a sha256 (64 hex digits, as sha256sum prints it)")
    return None if out is None else out.lower()
