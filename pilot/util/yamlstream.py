"""YAML from libyaml's event stream into plain values, bounded: the event reader behind pilot.util.boundedload.

PyYAML's loader first builds a node graph of the whole file (about 25 Python
objects per Pegasus job, with their source marks) and only then constructs
values; for a workflow of a million jobs that is many gigabytes and minutes,
most of it in the cyclic garbage collector. Here the C parser's events are
turned straight into plain values, and the items of chosen top-level lists
(``jobs``, ``jobDependencies``) are handed to a callback as soon as each is
complete, so only one job is ever held as a dict. (The block YAML that
Pegasus.api writes is read faster still by pilot.util.yamllines, line by line,
into the same values; this reader reads every file that one gives up on.)

Two readers share the bounds. ``Reader`` (Pegasus files) keeps scalars as
strings (Pegasus values are read as strings anyway), except that an empty,
``~`` or ``null`` plain scalar is None: plain and untagged is what
``implicit[0]`` says (libyaml's C parser marks a plain scalar's style '',
PyYAML's own parser None). ``TypedReader`` (pilot's own files and
site configs) types plain scalars as ``yaml.safe_load`` does (int, float, bool,
None, str; a timestamp stays text) and refuses any other tag (``!!python/...``,
``!!binary``, ``!!set``) and a number that is infinite, NaN or too long. For
both, mapping keys must be scalars, and unique.

Input is bounded, because pilot runs on a login node that others share and a
few kilobytes of YAML can otherwise ask for gigabytes:

- nesting: at most ``MAX_DEPTH`` levels of mappings and lists (a Pegasus
  workflow needs about six);
- aliases: an alias (``*name``) stands for everything its anchor holds, and
  whatever reads the value later (a profile written into every task line, a
  string made of a list) pays for all of it. What aliases repeat, counted as
  one per node plus the characters of every scalar, may total at most
  ``ALIAS_RATIO`` times the file's size, or a floor for a small file
  (``ALIAS_FLOOR`` for a workflow). A "billion laughs" file of nested aliases
  fails at the first alias past the limit, having built nothing larger than
  the file itself.

A bound crossed is ``Invalid`` with its line; pilot.util.boundedload names the file.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import yaml
from yaml.events import (
    AliasEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
)

MAX_DEPTH = 100
TOO_DEEP = f"nested deeper than {MAX_DEPTH} levels (pilot's files and a Pegasus workflow need about 6): is this the right file?"
# libyaml (PyYAML 6.0.4 and later) has a depth limit of its own, met while it scans ahead of the events.
LIBYAML_TOO_DEEP = "maximum nesting depth"
ALIAS_RATIO = 10
ALIAS_FLOOR = 10_000_000

Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
NULLS = frozenset(("", "~", "null", "Null", "NULL"))  # the plain scalars YAML 1.1 reads as null
_COLLECTIONS = (MappingStartEvent, SequenceStartEvent)

Handler = Callable[[Any, int], None]


class Invalid(Exception):
    """Input past a bound, or not plain values, at ``line`` (0-based); boundedload makes it a ConfigError naming the file."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.message = message


def _duplicate(ev: Any, key: Any) -> Invalid:
    """YAML keys are unique; a second one would silently replace the first (two jobs lists, two profiles)."""
    return Invalid(ev.start_mark.line, f"{key!r} appears twice in one mapping: merge the two or keep one")


class Reader:
    """Plain values from an event source, counting nesting and what aliases repeat.

    Sizes (one per node plus scalar characters) are worked out only for anchored
    values, when the anchor is defined: a walk that stops at values already
    sized (earlier anchors, which is all an alias can name), so it costs the
    anchored text once, and files without anchors pay nothing for it.
    """

    def __init__(self, next_event: Callable[[], Any], alias_budget: int, alias_floor: int) -> None:
        self.next_event = next_event
        self.anchors: dict[str, Any] = {}
        self.sizes: dict[int, int] = {}  # id(anchored value) -> its size with aliases expanded
        self.kept: list[Any] = []  # every anchored value stays alive, so that its id is never reused
        self.depth = 0
        self.aliased = 0
        self.alias_budget = alias_budget
        self.alias_floor = alias_floor

    def value(self, ev: Any) -> Any:
        kind = type(ev)
        if kind is ScalarEvent:
            v: Any = ev.value
            if len(v) < 5 and v in NULLS and ev.implicit[0]:
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
            raise Invalid(ev.start_mark.line, TOO_DEEP)
        nxt = self.next_event
        value = self.value
        if kind is MappingStartEvent:
            v = {}
            while True:
                k = nxt()
                tk = type(k)
                if tk is MappingEndEvent:
                    break
                if tk is ScalarEvent and not k.anchor:
                    key = k.value  # the common case, inline
                    if len(key) < 5 and key in NULLS and k.implicit[0]:
                        key = None
                else:
                    key = value(k)
                    if isinstance(key, (dict, list)):
                        raise Invalid(k.start_mark.line, "a mapping key must be plain text, not a mapping or list")
                if key in v:
                    raise _duplicate(k, key)
                item = nxt()
                if type(item) is ScalarEvent and not item.anchor:
                    x = item.value  # the common case, inline
                    if len(x) < 5 and x in NULLS and item.implicit[0]:
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
                    if len(x) < 5 and x in NULLS and item.implicit[0]:
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
        return 1 + (len(v) if isinstance(v, str) else 0)

    def _alias(self, ev: Any) -> Any:
        try:
            v = self.anchors[ev.anchor]
        except KeyError:
            raise Invalid(ev.start_mark.line, f"alias *{ev.anchor} names no anchor (&{ev.anchor}) before it") from None
        self.aliased += self.sizes[id(v)]
        if self.aliased > self.alias_budget:
            raise Invalid(
                ev.start_mark.line,
                f"aliases (*{ev.anchor} and those before it) repeat more than "
                f"{self.alias_budget:,} nodes and characters ({ALIAS_RATIO} times the file's size, at least "
                f"{self.alias_floor:,}): write the values out, or nest fewer aliases",
            )
        return v


def first_event(reader: Reader) -> Any:
    """The first node event of the first document, or None when there is none."""
    while True:
        ev = reader.next_event()
        if ev is None or type(ev) in _COLLECTIONS or type(ev) in (ScalarEvent, AliasEvent):
            return ev


def whole(reader: Reader) -> Any:
    ev = first_event(reader)
    return None if ev is None else reader.value(ev)


def document(reader: Reader, stream: dict[str, Handler]) -> dict[str, Any]:
    ev = first_event(reader)
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
            raise Invalid(ev.start_mark.line, "a mapping key must be plain text, not a mapping or list")
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


_TAG = "tag:yaml.org,2002:"
_RESOLVER = yaml.resolver.Resolver()
_CONSTRUCTOR = yaml.constructor.SafeConstructor()
_SCALARS: dict[str, Callable[[Any], Any]] = {
    _TAG + "str": _CONSTRUCTOR.construct_scalar,
    _TAG + "int": _CONSTRUCTOR.construct_yaml_int,
    _TAG + "float": _CONSTRUCTOR.construct_yaml_float,
    _TAG + "bool": _CONSTRUCTOR.construct_yaml_bool,
    _TAG + "null": _CONSTRUCTOR.construct_yaml_null,
    _TAG + "timestamp": _CONSTRUCTOR.construct_scalar,  # as text: no file of pilot's holds a date
}
_KIND_NAMES = {_TAG + "int": "an integer", _TAG + "float": "a number", _TAG + "bool": "true or false"}
_COLLECTION_TAGS = (None, "!", _TAG + "map", _TAG + "seq")


def _tag_refused(ev: Any, tag: str) -> Invalid:
    shown = "!!" + tag[len(_TAG) :] if tag.startswith(_TAG) else tag
    return Invalid(
        ev.start_mark.line, f"tag {shown[:80]} is not allowed: pilot reads plain values only (remove the tag)"
    )


def typed_scalar(ev: Any) -> Any:
    """A scalar event as yaml.safe_load types it, or Invalid: another tag, a number too long, infinite or NaN."""
    tag = ev.tag
    if tag is None or tag == "!":
        tag = _RESOLVER.resolve(yaml.ScalarNode, ev.value, ev.implicit)
    construct = _SCALARS.get(tag)
    if construct is None:
        raise _tag_refused(ev, tag)
    try:
        value = construct(yaml.ScalarNode(tag, ev.value))
    except (ValueError, KeyError, yaml.YAMLError):  # !!int abc, !!bool maybe; more digits than int() reads
        what = (
            f"a number of {len(ev.value):,} characters, too long to read"
            if len(ev.value) > 1000
            else f"{ev.value!r} is not {_KIND_NAMES.get(tag, tag)}"
        )
        raise Invalid(ev.start_mark.line, what) from None
    if isinstance(value, float) and not math.isfinite(value):
        raise Invalid(ev.start_mark.line, f"{ev.value!r} is not a finite number: write one (quote it if it is text)")
    return value


class TypedReader(Reader):
    """Values typed as yaml.safe_load types them, under the same bounds; ``key_lines``: the line of each top-level key."""

    def __init__(self, next_event: Callable[[], Any], alias_budget: int, alias_floor: int) -> None:
        super().__init__(next_event, alias_budget, alias_floor)
        self.key_lines: dict[Any, int] = {}

    def value(self, ev: Any) -> Any:
        kind = type(ev)
        if kind is AliasEvent:
            return self._alias(ev)
        if kind is ScalarEvent:
            v: Any = typed_scalar(ev)
        elif kind not in _COLLECTIONS:
            raise yaml.YAMLError(f"unexpected {kind.__name__}")
        elif ev.tag not in _COLLECTION_TAGS:
            raise _tag_refused(ev, ev.tag)
        else:
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise Invalid(ev.start_mark.line, TOO_DEEP)
            v = self._mapping() if kind is MappingStartEvent else self._list()
            self.depth -= 1
        if ev.anchor:
            self._anchor(ev.anchor, v)
        return v

    def _mapping(self) -> dict:
        v: dict = {}
        while True:
            k = self.next_event()
            if type(k) is MappingEndEvent:
                return v
            key = self.value(k)
            if isinstance(key, (dict, list)):
                raise Invalid(k.start_mark.line, "a mapping key must be plain text, not a mapping or list")
            if key in v:
                raise _duplicate(k, key)
            if self.depth == 1:
                self.key_lines[key] = k.start_mark.line + 1
            v[key] = self.value(self.next_event())

    def _list(self) -> list:
        v: list = []
        while True:
            item = self.next_event()
            if type(item) is SequenceEndEvent:
                return v
            v.append(self.value(item))
