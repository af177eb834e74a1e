"""Read what a Pegasus 5 workflow and its catalogs share: profiles, shell hooks and metadata.

The workflow, its jobs, transformations and sites each carry ``profiles``;
the workflow, jobs and transformations carry ``hooks`` and ``metadata``. One
reader each, so a value is checked the same wherever it is written, and an
error names the file and the YAML path.
"""

from __future__ import annotations

import re
from typing import Any

from pilot.dag.parser import ENV_NAME
from pilot.planner.model import Profiles
from pilot.planner.profiles import canonical, check_value
from pilot.planner.yamlvalues import fail, need_list, need_mapping, need_text


def read_profiles(raw: Any, path: str, ypath: str) -> Profiles:
    """``{namespace: {key: value}}``; pegasus keys under their canonical names, their values checked."""
    out: Profiles = {}
    for ns, values in need_mapping(raw, path, ypath, "namespace: {key: value}").items():
        npath = f"{ypath}.{ns}"
        ns = str(ns).lower()
        pegasus = ns == "pegasus"
        got: dict[str, str] = {}
        spelled: dict[str, str] = {}  # canonical key -> the name it was given under
        for key, value in need_mapping(values, path, npath, "key: value").items():
            key = str(key)
            kpath = f"{npath}.{key}"
            if value is None:
                value = ""
            text = need_text(value, path, kpath)
            if ns == "env":
                check_env(key, text, path, kpath)
            if pegasus:
                name, key = key, canonical(key)
                why = check_value(key, text)
                if why:
                    raise fail(path, kpath, f"{text!r} {why}")
                other = spelled.setdefault(key, name)
                if other != name:
                    raise fail(path, kpath, f"{name} and {other} name the same profile: keep one")
            got[key] = text
        out[ns] = got
    return out


def check_env(name: str, value: str, path: str, kpath: str) -> None:
    """An env profile becomes a variable of the task's environment, written into a PMC DAG line."""
    if not ENV_NAME.match(name):
        raise fail(path, kpath, f"{name!r} is not an environment variable name: use letters, digits and '_', "
                   "not starting with a digit")
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
            raise fail(path, f"{ypath}.{kind}", f"{kind!r} hooks: only shell hooks exist (shell: [{{_on: ..., cmd: ...}}])")
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
            raise fail(path, f"{ypath}.{key}", f"{key!r}: a file's metadata key is one word without '=' or quotes "
                       "(it is registered as key=\"value\")")
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
            raise fail(path, f"{ypath}.{kind}", f"{kind!r} checksums are not checked (Pegasus knows sha256 only): give "
                       "the file's sha256 (sha256sum FILE), or leave the checksum out")
        out = need_text(value, path, f"{ypath}.{kind}")
        if not SHA256.fullmatch(out):
            raise fail(path, f"{ypath}.{kind}", f"{out[:80]!r} is not a sha256 (64 hex digits, as sha256sum prints it)")
    return None if out is None else out.lower()
