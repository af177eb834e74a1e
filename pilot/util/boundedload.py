"""Read the YAML and JSON files pilot reads, bounded: the one way any of them is parsed.

A file that a user hands pilot, edits by hand, or that a full disk or a crash
left half-written is read here, so that whatever it holds ends in one line
naming the file (and the line, where there is one) and exit status 2, in
bounded time and memory, never in a hang, a MemoryError or "internal error":

- only a regular file is read, opened without blocking: a FIFO would wait for
  a writer forever, ``/dev/zero`` would fill memory, a directory says nothing;
- at most ``max_bytes`` are read, and a larger file is an error, never cut short;
- text is UTF-8 without NUL bytes ("is this the right file?" otherwise);
- YAML goes through the event reader of pilot.util.yamlstream, which bounds
  nesting and what aliases repeat, and types scalars as ``yaml.safe_load``
  does but refuses every other tag (``!!python/...``). A Pegasus file (a
  workflow, a catalog) is first read by the quick line reader of
  pilot.util.yamllines, which gives the same values for the block YAML that
  Pegasus.api writes; at the first line it does not read, or the first error
  a callback raises, the event reader reads the whole file again from the
  start, so errors are always the event reader's;
- JSON refuses NaN, Infinity and numbers too large for a float, and nesting
  deeper than ``MAX_DEPTH``.

A missing file raises FileNotFoundError, as open() does: what a missing file
means (no run yet, a job that vanished) is the caller's to say. Everything else
is a ConfigError whose line ends with the caller's ``hint``, what to do about it.
"""

from __future__ import annotations

import gc
import json
import os
from collections.abc import Callable
from typing import Any

import yaml

from pilot.errors import ConfigError, PilotError
from pilot.util import yamllines, yamlstream
from pilot.util.gcpause import gc_paused
from pilot.util.safeopen import NotAFile, open_regular_fd, read_at_most
from pilot.util.yamlstream import MAX_DEPTH, Handler, Invalid
from pilot.yamlerrors import yaml_error

CONFIG_BYTES = 1 << 20  # a site config or a braindump is a few kilobytes
CONFIG_ALIAS_FLOOR = 1_000_000  # what aliases may repeat in a small file pilot reads (a workflow: ALIAS_FLOOR)
TOO_DEEP_JSON = f"nested deeper than {MAX_DEPTH} levels (pilot's files need about 4): is this the right file?"


def _line(where: str, what: str, hint: str) -> str:
    return f"{where}: {what}; {hint}" if hint else f"{where}: {what}"


def _unreadable(path: str, exc: OSError, hint: str) -> ConfigError:
    what = exc.strerror if isinstance(exc, NotAFile) else f"cannot read: {exc.strerror}"
    return ConfigError(_line(path, what, hint))


def open_regular(path: str, hint: str = "") -> int:
    """``open_regular_fd``, every error but FileNotFoundError a one-line ConfigError."""
    try:
        return open_regular_fd(path)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise _unreadable(path, exc, hint) from None


def read_bytes(path: str, max_bytes: int, hint: str = "") -> bytes:
    """All of a regular file of at most ``max_bytes``."""
    try:
        data = read_at_most(path, max_bytes + 1)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise _unreadable(path, exc, hint) from None
    if len(data) > max_bytes:
        raise ConfigError(_line(path, f"larger than {max_bytes:,} bytes: is this the right file?", hint))
    return data


def decode(data: bytes, where: str, hint: str = "") -> str:
    """UTF-8 text without NUL bytes; the first offending byte's line in the error."""
    nul = data.find(b"\0")
    if nul >= 0:
        raise ConfigError(
            _line(
                f"{where}:{_line_of(data, nul)}", "binary data (a NUL byte), not text: " "is this the right file?", hint
            )
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            _line(
                f"{where}:{_line_of(data, exc.start)}",
                f"not UTF-8 text (byte {exc.start}): is this the right file?",
                hint,
            )
        ) from None


def _line_of(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


def read_text(path: str, max_bytes: int, hint: str = "") -> str:
    return decode(read_bytes(path, max_bytes, hint), path, hint)


# -- YAML -----------------------------------------------------------------------------------------------


def load_yaml(path: str, max_bytes: int = CONFIG_BYTES, hint: str = "") -> Any:
    """The first document of a YAML file of pilot's or a user's config, typed as yaml.safe_load types it
    (None for an empty file)."""
    return load_yaml_lines(path, max_bytes, hint)[0]


def load_yaml_lines(path: str, max_bytes: int = CONFIG_BYTES, hint: str = "") -> tuple[Any, dict[Any, int]]:
    """``load_yaml`` and the line of each key of the top-level mapping, for errors that name a key's line."""
    text = read_text(path, max_bytes, hint)
    budget = max(CONFIG_ALIAS_FLOOR, yamlstream.ALIAS_RATIO * len(text))
    readers: list[yamlstream.TypedReader] = []

    def body(next_event: Callable[[], Any]) -> Any:
        readers.append(yamlstream.TypedReader(next_event, budget, CONFIG_ALIAS_FLOOR))
        return yamlstream.whole(readers[0])

    value = _parse(path, text, body, hint)
    return value, readers[0].key_lines


def load_pegasus(path: str) -> Any:
    """A Pegasus YAML file (catalog) as plain values: scalars stay text; any size, bounded otherwise."""
    return _pegasus(path, dict, lambda reader, _: yamlstream.whole(reader))


def load_pegasus_streaming(path: str, start: Callable[[], dict[str, Handler]]) -> dict[str, Any]:
    """Top-level mapping of a Pegasus workflow; list values of the keys in the callbacks ``start()`` gives go
    item by item to their callback (see yamlstream.document). ``start`` is called again, for callbacks with fresh
    state, when the quick reader gives up part way and the event reader reads the file from its start. A workflow
    has no size limit: a million jobs are hundreds of megabytes."""
    return _pegasus(path, start, yamlstream.document)


def _pegasus(
    path: str, start: Callable[[], dict[str, Handler]], body: Callable[[yamlstream.Reader, dict[str, Handler]], Any]
) -> Any:
    with os.fdopen(open_regular(path), "rb") as fh:
        try:
            with gc_paused():
                return yamllines.read(fh, start())
        except (yamllines.NotPlain, PilotError, OSError):
            pass  # the event reader reads it all again, and says what is wrong, if anything
        stream = start()  # drops the callbacks of the quick read, and what they built
        gc.collect()  # ... which may hold cycles (a job's parents and children), while the collector was paused
        try:
            fh.seek(0)
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
        budget = max(yamlstream.ALIAS_FLOOR, yamlstream.ALIAS_RATIO * os.fstat(fh.fileno()).st_size)
        return _parse(
            path, fh, lambda next_event: body(yamlstream.Reader(next_event, budget, yamlstream.ALIAS_FLOOR), stream)
        )


def _parse(path: str, source: Any, body: Callable[[Callable[[], Any]], Any], hint: str = "") -> Any:
    """Run ``body`` on the parser's events with the cyclic GC paused (everything built here lives on);
    every error one line."""
    with gc_paused():
        try:
            loader = yamlstream.Loader(source)
            try:
                return body(loader.get_event)
            finally:
                loader.dispose()
        except OSError as exc:
            raise ConfigError(_line(path, f"cannot read: {exc.strerror}", hint)) from None
        except Invalid as exc:
            raise ConfigError(_line(f"{path}:{exc.line + 1}", exc.message, hint)) from None
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            if mark is not None and yamlstream.LIBYAML_TOO_DEEP in str(getattr(exc, "problem", "")):
                raise ConfigError(_line(f"{path}:{mark.line + 1}", yamlstream.TOO_DEEP, hint)) from None
            said = str(yaml_error(path, exc))
            raise ConfigError(f"{said}; {hint}" if hint else said) from None


# -- JSON -----------------------------------------------------------------------------------------------


def load_json(path: str, max_bytes: int, hint: str = "") -> Any:
    """A JSON file of pilot's (submit.state.json, ``<dag>.result``)."""
    return parse_json(read_text(path, max_bytes, hint), path, hint)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number pilot reads: write a finite number")


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"{text[:40]} is too large for a number pilot reads")
    return value


def parse_json(text: str, where: str, hint: str = "") -> Any:
    """JSON text (a file's, or a command's output) as values, bounded in nesting and without non-finite numbers."""
    try:
        value = json.loads(text, parse_constant=_no_constant, parse_float=_finite)
    except json.JSONDecodeError as exc:
        raise ConfigError(_line(f"{where}:{exc.lineno}", f"not valid JSON: {exc.msg}", hint)) from None
    except RecursionError:
        raise ConfigError(_line(where, TOO_DEEP_JSON, hint)) from None
    except ValueError as exc:  # NaN, Infinity, 1e400; an integer of more digits than int() reads
        raise ConfigError(_line(where, f"not valid JSON: {exc}", hint)) from None
    stack = [(value, 1)] if isinstance(value, (dict, list)) else []
    while stack:  # json.loads nests as deep as the recursion limit; whoever reads the values may not
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ConfigError(_line(where, TOO_DEEP_JSON, hint))
        children = item.values() if isinstance(item, dict) else item
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return value
