"""Rules on a profile key: whether pilot accepts ``namespace::key = value`` where it is written, and what it says.

The verdict on each key Pegasus knows is a table (pilot.planner.keytable); this module reads a key as pilot
stores it (its aliases, case, the patterns of dagman's and condor's keys, the properties' own meaning of a few
pegasus keys) and answers for it: refused, in one line naming ``namespace::key``, why and the fix (``problem``);
accepted with a warning saying what pilot does instead (``replacement``, planner.replaced); or honoured. A key
Pegasus does not know is refused with the nearest known one, so a typo is never dropped in silence. What an
entry's reader leaves for plan time goes through here too: the globus keys folded into the pegasus ones they
stand for (``fold``), and the refusals and warnings of a site's entry, said only when a job runs there
(``check_deferred``).
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Iterable, Mapping

from pilot.errors import ConfigError
from pilot.planner import replaced
from pilot.planner.keytable import (
    CLASSAD,
    CONDOR,
    DAGMAN,
    DAGMAN_CATEGORIES,
    DATA_JOB_KEYS,
    HONOURED,
    NO_EFFECT,
    PROPERTIES,
    REFUSED,
    REPLACED,
    SELECTOR,
    TABLE,
    THROTTLES,
    Key,
)

NAMESPACES = ("pegasus", "condor", "globus", "dagman", "env", "hints", "selector")

# Names pilot reads besides Pegasus' (Pegasus.api keyword spellings and old pilot names), stored as the key.
ALIASES = {
    "clusters_size": "clusters.size",
    "clusters_num": "clusters.num",
    "clusters_maxruntime": "clusters.maxruntime",
    "maxruntime": "clusters.maxruntime",
    "job_aggregator": "job.aggregator",
    "job.runtime": "runtime",
    "pmc_arguments": "pmc_task_arguments",
    "glite_arguments": "glite.arguments",
    "selector.execution.site": "selector.execution.site",
    "hints.execution.site": "hints.execution.site",
}

# The pegasus keys whose value may be an HTCondor expression, written as <key>.expr: refused with _EXPR.
_EXPR = "pilot evaluates no HTCondor expressions: give the value itself under {base}"
_EXPRESSIONS = ("glite.arguments", "runtime", "cores", "gpus", "memory", "diskspace", "queue", "project")
# Why a key that picks a job's site (jobs_only) is refused on any other entry.
_WHERE = "picks the site of a job: set it on the job, or plan with --site"


@functools.lru_cache(maxsize=4096)
def lookup(ns: str, key: str, where: str = "job") -> tuple[str, Key | None]:
    """(the stored name, its entry) of ``key`` in namespace ``ns`` written on ``where`` (job, entry or
    properties); None: Pegasus does not know the key. Remembered: a million jobs repeat a few keys."""
    if ns == "dagman":
        return _dagman(key.upper(), where)
    name = key.lower()
    if ns == "pegasus":
        name = ALIASES.get(name, name)
        if name.endswith(".expr") and name[:-5] in _EXPRESSIONS:
            return name, Key(REFUSED, _EXPR.format(base=name[:-5]))
        if name in ("selector.execution.site", "hints.execution.site"):
            return name, SELECTOR["execution.site"]
        if where == "properties" and name in PROPERTIES:
            return name, PROPERTIES[name]
    if ns == "condor" and name.startswith("+"):  # a ClassAd attribute for HTCondor's matchmaking or accounting
        if any(word in name for word in ("singularity", "docker", "container", "apptainer")):
            return name, CONDOR["container_image"]
        return name, CLASSAD
    if ns == "hints" and name == "executionpool":
        name = "execution.site"
    return name, TABLE[ns].get(name)


def _dagman(name: str, where: str) -> tuple[str, Key | None]:
    if name.startswith("POST.PATH."):
        return name, DAGMAN["POST.PATH.*"]
    if name in THROTTLES and where == "properties":
        return name, THROTTLES[name]
    if name in ("MAXPRE", "MAXPOST"):
        return name, Key(REPLACED, "pilot runs no PRE or POST scripts to throttle: ignored")
    for prefix in ("MAX", "NOOP"):
        if name.startswith(prefix):
            return name, DAGMAN[prefix + "*"]
    category, dot, rest = name.partition(".")
    if dot and name not in DAGMAN:  # <category>.MAXJOBS: a DAG-wide throttle (Dagman.java categoryRelatedKey)
        if where != "properties":
            return name, Key(
                NO_EFFECT, "NO_EFFECT on a job: Pegasus ignores category keys there (Dagman.java checkKeyInNS)"
            )
        if rest == "MAXJOBS" and category.lower() in DAGMAN_CATEGORIES:
            return name, Key(HONOURED, "the most data jobs of the category active at once (pilot submit)")
        return name, Key(
            REPLACED,
            f"pilot throttles the categories {', '.join(DAGMAN_CATEGORIES)} only; other "
            "jobs run as the site config's max_queued allows",
        )
    return name, DAGMAN.get(name)


def problem(ns: str, key: str, value: str, where: str = "job", label_key: str = "label") -> tuple[str, str | None]:
    """(the name pilot stores ``ns::key`` under, why it is refused or None). ``where``: job, entry (the
    workflow, a transformation, a site) or properties."""
    if ns == "env" or key.startswith("x-"):
        return key, None  # every variable; x- keys are vendor extensions, which the schema lets through
    name, entry = lookup(ns, key, where)
    if entry is None:
        if ns == "pegasus" and key == label_key:
            return key, None
        near = difflib.get_close_matches(name, [k for k in TABLE[ns] if "*" not in k], n=1, cutoff=0.75)
        hint = f"did you mean {near[0]}?" if near else 'see docs/pegasus-fields.md, "Profile keys"'
        return name, f"{ns}::{key} is not a key of Pegasus' {ns} namespace: {hint}"
    if entry.verdict == REFUSED:
        return name, f"{ns}::{key}: {entry.why}"
    if entry.jobs_only and where != "job":
        return name, f"{ns}::{key} {_WHERE}"
    if entry.values and value.strip().lower() not in entry.values + entry.replaced:
        return name, f"{ns}::{key} = {value[:40]!r}: {entry.why}"
    return name, None


def replacement(ns: str, key: str, value: str, where: str = "job") -> str | None:
    """What pilot does instead of ``ns::key = value``, a key ``problem`` accepts, where pilot reaches its result
    its own way (REPLACED, or a replaced value) or Pegasus itself gives it no effect (NO_EFFECT): the text of
    its warning (planner.replaced); None: pilot honours it."""
    if ns == "env" or key.startswith("x-"):
        return None
    name, entry = lookup(ns, key, where)
    if entry is None:
        return None
    if where == "job" and ns == "pegasus" and name in DATA_JOB_KEYS:
        return DATA_JOB_KEYS[name]
    if entry.verdict == REPLACED:
        return entry.why
    if entry.verdict == NO_EFFECT:
        return entry.why.replace("NO_EFFECT", "no effect", 1)
    if entry.replaced and value.strip().lower() in entry.replaced:
        return entry.instead
    return None


def namespace_problem(ns: str) -> str | None:
    """Why ``ns`` is not a profile namespace (None: it is one). ``x-`` namespaces are vendor extensions."""
    if ns in NAMESPACES or ns.startswith("x-"):
        return None
    if ns == "metadata":
        return "metadata is not a profile namespace in Pegasus 5 YAML: write it under the entry's metadata"
    near = difflib.get_close_matches(ns, NAMESPACES, n=1, cutoff=0.6)
    hint = f": did you mean {near[0]}?" if near else ""
    return f"{ns!r} is not a profile namespace ({', '.join(NAMESPACES)}){hint}"


# What a globus (and the pegasus maxwalltime) key stands for among the pegasus keys pilot reads, and the factor.
FOLDED = {
    ("globus", "maxwalltime"): ("runtime", 60.0),
    ("pegasus", "maxwalltime"): ("runtime", 60.0),
    ("globus", "count"): ("cores", 1.0),
    ("globus", "totalmemory"): ("memory", 1.0),
    ("globus", "hostcount"): ("nodes", 1.0),
    ("globus", "xcount"): ("ppn", 1.0),
}


def fold(profiles: dict[str, dict[str, str]]) -> None:
    """Give one entry's pegasus keys the values its globus (and pegasus maxwalltime) keys stand for, where the
    pegasus key is unset, as Pegasus' Globus.java maps the two namespaces; hints::execution.site becomes
    selector::execution.site, which Hints.java aliases."""
    for (ns, key), (target, factor) in FOLDED.items():
        raw = profiles.get(ns, {}).get(key)
        if raw and not profiles.get("pegasus", {}).get(target):
            try:
                value = float(raw) * factor
            except ValueError:
                raise ValueError(f"{ns}::{key} {raw!r} is not a number") from None
            profiles.setdefault("pegasus", {})[target] = f"{value:g}" if factor != 1.0 else raw
    site = profiles.get("hints", {}).get("execution.site")
    if site and not profiles.get("selector", {}).get("execution.site"):
        profiles.setdefault("selector", {})["execution.site"] = site


# Where read_profiles keeps the pegasus keys Pegasus does not know: key -> "file: YAML path".
UNKNOWN = "x-pilot-unknown"
# The refused keys of a site's entry (site catalog or transformation site entry), "file: path: why" by key path:
# refused only when a job runs on that site, so a catalog that also describes sites the plan does not use (a
# tutorial's condorpool with style condor) plans as it does with Pegasus.
DEFERRED = "x-pilot-refused"


# The replaced keys of a site's entry, "namespace::key" -> its warning line: said only when a job runs there.
DEFERRED_NOTES = "x-pilot-replaced"


def check_deferred(profiles: dict[str, dict[str, str]] | None) -> None:
    """Raise the first refusal a site entry's profiles carry (the entry is in use), else say its replaced keys."""
    for line in (profiles or {}).get(DEFERRED, {}).values():
        raise ConfigError(line)
    for key, line in (profiles or {}).get(DEFERRED_NOTES, {}).items():
        replaced.note_line(key, line)


def check_unknown(profiles: Iterable[Mapping[str, Mapping[str, str]]], label_key: str) -> None:
    """Refuse a pegasus key Pegasus does not know, unless it is the label key (``pegasus.clusterer.label.key``),
    which pilot reads as Pegasus does; the error suggests the nearest known key."""
    for entry in profiles:
        for key, where in entry.get(UNKNOWN, {}).items():
            if key != label_key:
                raise ConfigError(f"{where}: {problem('pegasus', key, '', label_key=label_key)[1]}")
