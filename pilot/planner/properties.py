"""Pegasus properties files and the other line-numbered text files the planner reads.

A value pilot uses is checked where the file is read, so that an error names
its line.
"""

from __future__ import annotations

import re

from pilot.dag.taskline import ENV_NAME
from pilot.errors import ConfigError
from pilot.planner import keytable, profilekeys, replaced
from pilot.planner.expand import expand
from pilot.planner.profiles import canonical, check_value
from pilot.util.safeopen import open_regular_fd

CLUSTERER_PREFERENCES = ("runtime",)


def numbered_lines(path: str, what: str) -> list[tuple[int, str]]:
    """(line number, line) of a text file; one-line errors for a file that cannot be read or is not text."""
    try:
        with open(open_regular_fd(path), encoding="utf-8") as fh:  # a FIFO or device: refused, not waited on
            return list(enumerate(fh, 1))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read {what}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}): is this {what}?") from None


def read_properties(path: str) -> dict[str, str]:
    """Java-style properties (``key = value``, ``key: value`` or ``key value``; # and ! comments).

    The values pilot uses are checked here, so that an error names the line.
    """
    props: dict[str, str] = {}
    for lineno, raw in numbered_lines(path, "a properties file"):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        m = re.match(r"([^\s=:]+)\s*[=:\s]\s*(.*)$", line)
        if not m:
            raise ConfigError(f"{path}:{lineno}: expected 'key = value'")
        _take(props, m.group(1), m.group(2).strip(), f"{path}:{lineno}")
    return props


def with_overrides(props: dict[str, str], pairs: list[str]) -> dict[str, str]:
    """``props`` with pegasus-plan's ``-D key=value`` pairs on top: given later, they win, as in Pegasus."""
    if not pairs:
        return props
    props = dict(props)
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"-D {pair}: expected -D key=value, e.g. -D pegasus.data.configuration=sharedfs")
        _take(props, key.strip(), value.strip(), f"-D {pair}")
    return props


def _take(props: dict[str, str], key: str, value: str, where: str) -> None:
    """One property, its ${VARS} expanded and its value checked, an error naming ``where``."""
    value = expand(value, where)
    why = _property_problem(key, value)
    if why:
        raise ConfigError(f"{where}: {key} = {value!r} {why}")
    _note_replaced(key, value, where)
    props[key] = value


def _property_problem(key: str, value: str) -> str | None:
    if key == "pegasus.clusterer.preference":
        if value and value.lower() not in CLUSTERER_PREFERENCES:
            return "is not a preference: use Runtime, or leave it out to cluster by clusters.size and clusters.num"
        return None
    if key == "pegasus.data.configuration":
        from pilot.planner.datalayout import unsupported_configuration

        return unsupported_configuration(value)
    if key == "pegasus.clusterer.label.key":
        return None if value else "is empty: name the profile key that holds the label, e.g. label"
    if key.lower() in ("dagman.maxjobs", "dagman.maxidle") and not re.fullmatch(r"[0-9]+", value):
        return "is not a whole number of jobs: give the most at once, or 0 for no limit"
    ns, _, name = key.partition(".")
    if ns in keytable.TABLE and name:
        why = _profile_problem(ns, name, value)
        if why:
            return why
    if key.startswith("pegasus."):
        return check_value(canonical(key[len("pegasus.") :]), value)
    if key.startswith("env.") and not ENV_NAME.match(key[len("env.") :]):
        return (
            "names no environment variable: env.NAME, NAME made of letters, digits and '_', not starting with a digit"
        )
    return None


def _note_replaced(key: str, value: str, where: str) -> None:
    """Say (once per plan) a property that carries a profile pilot replaces (planner.replaced)."""
    ns, _, name = key.partition(".")
    if ns not in keytable.TABLE or not name:
        return
    if ns == "pegasus" and profilekeys.lookup(ns, name, "properties")[1] is None:
        return
    instead = profilekeys.replacement(ns, name, value, "properties")
    if instead is not None:
        replaced.note(key, where, instead)


def _profile_problem(ns: str, name: str, value: str) -> str | None:
    """A property that carries a profile (``condor.<key>``, ``globus.<key>``, ``dagman.<key>``, ``pegasus.<key>``
    of a key Pegasus' pegasus namespace knows) is ruled on as that profile is (pilot.planner.profilekeys); other
    ``pegasus.*`` properties are properties, not profiles."""
    if ns == "pegasus" and profilekeys.lookup(ns, name, "properties")[1] is None:
        return None
    stored, why = profilekeys.problem(ns, name, value, "properties")
    if why:
        return f"is refused: {why}"
    if (ns, stored) in profilekeys.FOLDED:
        try:
            float(value)
        except ValueError:
            return "is not a number"
    return None
