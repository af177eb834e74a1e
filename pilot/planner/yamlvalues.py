"""Typed reading of one YAML value, with errors that name the file and the YAML path.

Every value a Pegasus YAML file holds is checked for its type where it is read
(pilot.planner.reader): a string where a list belongs is never read letter by
letter, and a list where a name belongs is never turned into its printed form.
"""

from __future__ import annotations

import re
from typing import Any

from pilot.errors import ConfigError

# Job ids and transformation names become task ids, file and directory names
# and words in batch scripts: plain characters only, nothing a shell reads.
SAFE_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*\Z")


def fail(path: str, ypath: str, message: str) -> ConfigError:
    return ConfigError(f"{path}: {ypath}: {message}")


MAX_SHOWN = 80  # characters of a wrong value quoted in an error line


def kind_of(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "empty"
    text = repr(value)  # a whole non-YAML file parses as one string: quote only its start
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 3] + "..."


def need_mapping(value: Any, path: str, ypath: str, hint: str) -> dict:
    """``value`` if it is a mapping; None is an empty one."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise fail(path, ypath, f"must be a mapping ({hint}), not {kind_of(value)}")
    return value


def need_list(value: Any, path: str, ypath: str, hint: str) -> list:
    """``value`` if it is a list; None is an empty one."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise fail(path, ypath, f"must be a list ({hint}), not {kind_of(value)}")
    return value


def need_text(value: Any, path: str, ypath: str) -> str:
    """A scalar (every scalar is read as a string); a mapping, list or nothing is an error."""
    if not isinstance(value, str):
        raise fail(path, ypath, f"must be a single value, not {kind_of(value)}")
    return value


def identifier(raw: dict, key: str, path: str, ypath: str) -> str | None:
    """A transformation's namespace or version: it names the job in the DAG's ``#@`` line, the monitoring
    files and the batch job, so it is a plain word (nothing there can start a line or a record)."""
    value = optional_text(raw, key, path, ypath)
    if value is not None and not SAFE_ID.match(value):
        raise fail(path, f"{ypath}.{key}", f"{value[:80]!r}: a {key} may use letters, digits, '_', '.', '+', '-' only")
    return value


def optional_text(raw: dict, key: str, path: str, ypath: str) -> str | None:
    value = raw.get(key)
    return None if value is None else need_text(value, path, f"{ypath}.{key}")


def flag(raw: dict, key: str, default: bool, path: str, ypath: str) -> bool:
    """A YAML boolean (``true``/``false``, as Pegasus.api writes them); absent: ``default``."""
    value = raw.get(key)
    if value is None:
        return default
    text = need_text(value, path, f"{ypath}.{key}").lower()
    if text in ("true", "yes", "on"):
        return True
    if text in ("false", "no", "off"):
        return False
    raise fail(path, f"{ypath}.{key}", f"{text!r} is not true or false")
