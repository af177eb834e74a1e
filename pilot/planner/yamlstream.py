"""Read YAML from libyaml's event stream into plain values, bounded, big lists one item at a time.

PyYAML's loader first builds a node graph of the whole file (about 25 Python
objects per Pegasus job, with their source marks) and only then constructs
values; for a workflow of a million jobs that is many gigabytes and minutes,
most of it in the cyclic garbage collector. Here the C parser's events are
turned straight into plain values, and the items of chosen top-level lists
(``jobs``, ``jobDependencies``) are handed to a callback as soon as each is
complete, so only one job is ever held as a dict.

Scalars stay strings (Pegasus values are read as strings anyway), except that
an empty, ``~`` or ``null`` plain scalar is None. Mapping keys must be scalars,
and unique.

Input is bounded, because a planner runs on a login node that others share and
a few kilobytes of YAML can otherwise ask for gigabytes:

- nesting: at most ``MAX_DEPTH`` levels of mappings and lists (a Pegasus
  workflow needs about six);
- aliases: an alias (``*name``) stands for everything its anchor holds, and
  whatever reads the value later (a profile written into every task line, a
  string made of a list) pays for all of it. What aliases repeat, counted as
  one per node plus the characters of every scalar, may total at most
  ``ALIAS_RATIO`` times the file's size, or ``ALIAS_FLOOR`` for a small file.
  A "billion laughs" file of nested aliases fails at the first alias past the
  limit, having built nothing larger than the file itself.

Either limit is a one-line error naming the file and line.
"""

from __future__ import annotations

import os
from typing import Any, Callable

import yaml
from yaml.events import (
    AliasEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
)

from pilot.errors import ConfigError
from pilot.util.gcpause import gc_paused
from pilot.yamlerrors import yaml_error

MAX_DEPTH = 100
TOO_DEEP = f"nested deeper than {MAX_DEPTH} levels (a Pegasus workflow needs about 6): is this the right file?"
# libyaml (PyYAML 6.0.4 and later) has a depth limit of its own, met while it scans ahead of the events.
LIBYAML_TOO_DEEP = "maximum nesting depth"
ALIAS_RATIO = 10
ALIAS_FLOOR = 10_000_000

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_NULLS = frozenset(("", "~", "null", "Null", "NULL"))
_COLLECTIONS = (MappingStartEvent, SequenceStartEvent)

Handler = Callable[[Any, int], None]


class _Invalid(Exception):
    """Input past a bound, or not plain values, at ``line`` (0-based); _run() makes it a ConfigError naming the file."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.message = message


def _duplicate(ev: Any, key: Any) -> _Invalid:
    """YAML keys are unique; a second one would silently replace the first (two jobs lists, two profiles)."""
    return _Invalid(ev.start_mark.line, f"{key!r} appears twice in one mapping: merge the two or keep one")


class _Reader:
    """Plain values from an event source, counting nesting and what aliases repeat.

    Sizes (one per node plus scalar characters) are worked out only for anchored
    values, when the anchor is defined: a walk that stops at values already
    sized (earlier anchors, which is all an alias can name), so it costs the
    anchored text once, and files without anchors pay nothing for it.
    """

    def __init__(self, next_event: Callable[[], Any], alias_budget: int) -> None:
        self.next_event = next_event
        self.anchors: dict[str, Any] = {}
        self.sizes: dict[int, int] = {}  # id(anchored value) -> its size with aliases expanded
        self.kept: list[Any] = []  # every anchored value stays alive, so that its id is never reused
        self.depth = 0
        self.aliased = 0
        self.alias_budget = alias_budget

    def value(self, ev: Any) -> Any:
        kind = type(ev)
        if kind is ScalarEvent:
            v = ev.value
            if len(v) < 5 and v in _NULLS and ev.implicit[0] and ev.style is None:
                v = None
            if ev.anchor:
                self._anchor(ev.anchor, v)
            return v
        if kind is AliasEvent:
            return self._alias(ev)
        if kind not in _COLLECTIONS:
            raise yaml.YAMLError(f"unexpected {kind.__name__}")
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise _Invalid(ev.start_mark.line, TOO_DEEP)
        nxt = self.next_event
        value = self.value
        if kind is MappingStartEvent:
            v: Any = {}
            while True:
                k = nxt()
                tk = type(k)
                if tk is MappingEndEvent:
                    break
                if tk is ScalarEvent and not k.anchor:
                    key = k.value  # the common case, inline
                    if len(key) < 5 and key in _NULLS and k.implicit[0] and k.style is None:
                        key = None
                else:
                    key = value(k)
                    if isinstance(key, (dict, list)):
                        raise _Invalid(k.start_mark.line, "a mapping key must be plain text, not a mapping or list")
                if key in v:
                    raise _duplicate(k, key)
                item = nxt()
                if type(item) is ScalarEvent and not item.anchor:
                    x = item.value  # the common case, inline
                    if len(x) < 5 and x in _NULLS and item.implicit[0] and item.style is None:
                        x = None
                    v[key] = x
                else:
                    v[key] = value(item)
        else:
            v = []
            append = v.append
            while True:
                item = nxt()
                ti = type(item)
                if ti is SequenceEndEvent:
                    break
                if ti is ScalarEvent and not item.anchor:
                    x = item.value  # the common case, inline
                    if len(x) < 5 and x in _NULLS and item.implicit[0] and item.style is None:
                        x = None
                    append(x)
                else:
                    append(value(item))
        self.depth -= 1
        if ev.anchor:
            self._anchor(ev.anchor, v)
        return v

    def _anchor(self, name: str, v: Any) -> None:
        self.anchors[name] = v
        self.kept.append(v)
        self.sizes[id(v)] = self._size(v)

    def _size(self, v: Any) -> int:
        known = self.sizes.get(id(v))
        if known is not None:
            return known
        if isinstance(v, dict):
            return 1 + sum(self._size(k) + self._size(x) for k, x in v.items())
        if isinstance(v, list):
            return 1 + sum(self._size(x) for x in v)
        return 1 + (0 if v is None else len(v))

    def _alias(self, ev: Any) -> Any:
        try:
            v = self.anchors[ev.anchor]
        except KeyError:
            raise _Invalid(ev.start_mark.line, f"alias *{ev.anchor} names no anchor (&{ev.anchor}) before it") from None
        self.aliased += self.sizes[id(v)]
        if self.aliased > self.alias_budget:
            raise _Invalid(ev.start_mark.line, f"aliases (*{ev.anchor} and those before it) repeat more than "
                           f"{self.alias_budget:,} nodes and characters ({ALIAS_RATIO} times the file's size, at least "
                           f"{ALIAS_FLOOR:,}): write the values out, or nest fewer aliases")
        return v


def load(path: str) -> Any:
    """The first document of ``path`` as plain values (None for an empty file)."""
    return _run(path, _whole)


def load_streaming(path: str, stream: dict[str, Handler]) -> dict[str, Any]:
    """Top-level mapping of ``path``; list values of the keys in ``stream`` go item by item to their callback.

    Streamed keys appear in the result with the number of items seen. A file
    whose top level is not a mapping gives ``{"": value}`` for the caller to report.
    """
    return _run(path, lambda reader: _document(reader, stream))


def _run(path: str, body: Callable[[_Reader], Any]) -> Any:
    """Open, parse with the cyclic GC paused (everything built here lives on), map errors to one line."""
    with gc_paused():
        try:
            with open(path, "rb") as fh:
                budget = max(ALIAS_FLOOR, ALIAS_RATIO * os.fstat(fh.fileno()).st_size)
                loader = _Loader(fh)
                try:
                    return body(_Reader(loader.get_event, budget))
                finally:
                    loader.dispose()
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
        except _Invalid as exc:
            raise ConfigError(f"{path}:{exc.line + 1}: {exc.message}") from None
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            if mark is not None and LIBYAML_TOO_DEEP in str(getattr(exc, "problem", "")):
                raise ConfigError(f"{path}:{mark.line + 1}: {TOO_DEEP}") from None
            raise yaml_error(path, exc) from None


def _first(reader: _Reader) -> Any:
    """The first node event of the first document, or None when there is none."""
    while True:
        ev = reader.next_event()
        if ev is None or type(ev) in _COLLECTIONS or type(ev) in (ScalarEvent, AliasEvent):
            return ev


def _whole(reader: _Reader) -> Any:
    ev = _first(reader)
    return None if ev is None else reader.value(ev)


def _document(reader: _Reader, stream: dict[str, Handler]) -> dict[str, Any]:
    ev = _first(reader)
    if ev is None:
        return {}
    if type(ev) is not MappingStartEvent:
        return {"": reader.value(ev)}
    next_event = reader.next_event
    value = reader.value
    out: dict[str, Any] = {}
    reader.depth = 1
    while True:
        ev = next_event()
        if type(ev) is MappingEndEvent:
            break
        key = value(ev)
        if isinstance(key, (dict, list)):
            raise _Invalid(ev.start_mark.line, "a mapping key must be plain text, not a mapping or list")
        if key in out:
            raise _duplicate(ev, key)
        first = next_event()
        handler = stream.get(key)
        if handler is not None and type(first) is SequenceStartEvent:
            reader.depth = 2
            n = 0
            while True:
                item = next_event()
                if type(item) is SequenceEndEvent:
                    break
                handler(value(item), n)
                n += 1
            reader.depth = 1
            out[key] = n
        else:
            out[key] = value(first)
    return out
