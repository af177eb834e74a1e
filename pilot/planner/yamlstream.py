"""Read a big YAML document from libyaml's event stream, one list item at a time.

PyYAML's loader first builds a node graph of the whole file (about 25 Python
objects per Pegasus job, with their source marks) and only then constructs
values; for a workflow of a million jobs that is many gigabytes and minutes,
most of it in the cyclic garbage collector. Here the C parser's events are
turned straight into plain values, and the items of chosen top-level lists
(``jobs``, ``jobDependencies``) are handed to a callback as soon as each is
complete, so only one job is ever held as a dict.

Scalars stay strings (Pegasus values are read as strings anyway), except that
an empty, ``~`` or ``null`` plain scalar is None. Anchors and aliases work.
"""

from __future__ import annotations

import gc
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
from pilot.yamlerrors import yaml_error

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_NULLS = frozenset(("", "~", "null", "Null", "NULL"))


class _Events:
    """Events straight from the parser's get_event (no generator frame per event)."""

    def __init__(self, loader: Any) -> None:
        self.__next__ = loader.get_event

    def __iter__(self) -> "_Events":
        return self


class _Reader:
    def __init__(self, events: Any) -> None:
        self.events = events
        self.anchors: dict[str, Any] = {}

    def value(self, ev: Any) -> Any:
        if type(ev) is ScalarEvent:
            v = ev.value
            if ev.implicit[0] and ev.style is None and v in _NULLS:
                v = None
        elif type(ev) is MappingStartEvent:
            v = {}
            nxt = self.events.__next__
            while True:
                k = nxt()
                if type(k) is MappingEndEvent:
                    break
                key = self.value(k)
                v[key] = self.value(nxt())
        elif type(ev) is SequenceStartEvent:
            v = []
            nxt = self.events.__next__
            while True:
                item = nxt()
                if type(item) is SequenceEndEvent:
                    break
                v.append(self.value(item))
        elif type(ev) is AliasEvent:
            try:
                return self.anchors[ev.anchor]
            except KeyError:
                raise yaml.YAMLError(f"unknown alias *{ev.anchor}") from None
        else:
            raise yaml.YAMLError(f"unexpected {type(ev).__name__}")
        anchor = getattr(ev, "anchor", None)
        if anchor:
            self.anchors[anchor] = v
        return v


def load_streaming(path: str, stream: dict[str, Callable[[Any, int], None]]) -> dict[str, Any]:
    """Top-level mapping of ``path``; list values of the keys in ``stream`` go item by item to their callback.

    Streamed keys appear in the result with the number of items seen.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        with open(path, "rb") as fh:
            return _load(fh, stream)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise yaml_error(path, exc) from None
    finally:
        if was_enabled:
            gc.enable()


def _load(fh, stream: dict[str, Callable[[Any, int], None]]) -> dict[str, Any]:
    loader = _Loader(fh)
    try:
        return _document(_Events(loader), stream)
    finally:
        loader.dispose()


def _document(events: _Events, stream: dict[str, Callable[[Any, int], None]]) -> dict[str, Any]:
    next_event = events.__next__
    reader = _Reader(events)
    out: dict[str, Any] = {}
    while True:
        ev = next_event()
        if ev is None or type(ev) is MappingStartEvent:
            break
        if type(ev) in (ScalarEvent, SequenceStartEvent):
            return {"": reader.value(ev)}  # not a mapping: the caller reports it
    if ev is None:
        return out
    while True:
        ev = next_event()
        if type(ev) is MappingEndEvent:
            break
        key = reader.value(ev)
        first = next_event()
        handler = stream.get(key)
        if handler is not None and type(first) is SequenceStartEvent:
            n = 0
            while True:
                item = next_event()
                if type(item) is SequenceEndEvent:
                    break
                handler(reader.value(item), n)
                n += 1
            out[key] = n
        else:
            out[key] = reader.value(first)
    return out
