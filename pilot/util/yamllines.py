"""A quick line reader for block YAML as Pegasus.api writes it; anything else is the event reader's to read.

The event reader (pilot.util.yamlstream) makes about twenty Python objects of
libyaml's events per Pegasus job before it builds a value; for a workflow of a
million jobs that costs more than libyaml's whole parse. But what Pegasus.api
(PyYAML's dumper) and most generators write is a small part of YAML: block
mappings and lists, one entry a line, every scalar on its line (plain, or quoted
without escapes), short lists of plain words in brackets. Those lines are read
here with str methods, a line at a time, into exactly the values the event
reader gives (``yamlstream.document`` with its ``Reader``): scalars are text, a
plain empty, ``~`` or ``null`` scalar is None, keys are unique, and the items of
the streamed top-level lists go to their callbacks one by one.

Every other line raises ``NotPlain``: anchors, aliases, tags, comments, block
and multi-line scalars, escapes, flow mappings, tabs, carriage returns, control
characters, a duplicate key, nesting past ``MAX_DEPTH``... The caller then reads
the whole file with the event reader, so that errors, their lines and the bounds
on input stay the event reader's. Every rule here accepts less than YAML does:
a line this reader is not sure of is never read by it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from itertools import chain
from typing import Any, BinaryIO

from pilot.util.yamlstream import NULLS, Handler

BLOCK = 1 << 20  # bytes read at a time: whole lines of it are checked and split at C speed
MAX_LINE = 1 << 26  # a longer line is no Pegasus.api output
MAX_DEPTH = 20  # deeper nesting is read by the event reader, which bounds it
MAX_INDENT = 64  # a line more indented is read by the event reader
MAX_KEY = 1000  # libyaml looks for a key's ':' only within 1024 characters of its start
CACHE = 4096  # keys and lines remembered per indent: a workflow repeats a few dozen keys
END = "\n"  # what comes after the last line: no line read holds a newline
_OUT = object()  # in a key cache: a line that starts so is no entry of a mapping at that indent
_EMPTY = object()  # in a line cache: the value is an empty list (``key: []``), a new one each time


class NotPlain(Exception):
    """The file holds a line outside what is read here: the event reader must read the file."""


# The ASCII characters a plain scalar may start with: YAML's indicators and a space start something else, and
# "-", "?" and ":" are a plain scalar's first character only before a non-space (see _plain).
_START = frozenset(map(chr, range(0x21, 0x7F))) - frozenset("-?:,[]{}#&*!|>'\"%@`")
_ASCII_TEXT = bytes(range(0x20, 0x7F)) + b"\n"
# Characters outside these libyaml refuses or reads as line breaks (NEL, U+2028, U+2029), or may skip (U+FEFF).
_NOT_TEXT = re.compile("[^\n\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]")
_WORD = r"-*[A-Za-z0-9_./+=~][A-Za-z0-9_./+=~-]*"  # a plain scalar in a flow list, whatever the YAML version
try:  # the same list with possessive repeats (Python 3.11 on): what follows each never starts one, so nothing
    # is given back; without the positions kept for that, matching takes half the time
    _FLOW_LIST = re.compile(r"\[{w}(?:, {w})*+\]".format(w=_WORD.replace("*", "*+")))
except re.error:
    _FLOW_LIST = re.compile(rf"\[{_WORD}(?:, {_WORD})*\]")


def lines(fh: BinaryIO) -> Iterator[str]:
    """The lines of a binary file without their newlines, empty ones left out, then END; NotPlain where the text
    is not UTF-8 that libyaml reads as it is written (a control character, a line break other than a newline)."""
    return chain.from_iterable(_blocks(fh))


def _blocks(fh: BinaryIO) -> Iterator[Iterable[str]]:
    rest = b""
    while True:
        data = fh.read(BLOCK)
        if not data:
            break
        if rest:
            data = rest + data
        cut = data.rfind(b"\n") + 1
        rest = data[cut:]
        if len(rest) > MAX_LINE:
            raise NotPlain
        if cut:
            yield _split(data[:cut] if rest else data)
    if rest:
        yield _split(rest + b"\n")
    yield (END,)


def _split(data: bytes) -> list[str]:
    """The lines of ``data``, whole lines of the file."""
    if data.isascii():
        if data.translate(None, _ASCII_TEXT):  # a control character: a tab, a carriage return, NUL...
            raise NotPlain
        text = data.decode("ascii")
    else:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise NotPlain from None
        if _NOT_TEXT.search(text):
            raise NotPlain
    out = text.split("\n")
    out.pop()  # after the last newline
    if "" in out:
        out = [line for line in out if line]  # an empty line is no node: YAML skips it
    return out


# Trailing spaces are not YAML's, but they stay in a line here: every test of a value's end below refuses a
# space (and an empty value), where a plain scalar would end before it.


def _plain(text: str) -> bool:
    """Whether ``text`` (after ``key: `` or ``- ``, or a key) is one plain scalar, all of it."""
    if text[-1:] in ": ":  # also empty: the end of a key, a trailing space
        return False
    c = text[0]
    if c not in _START:
        if c in "-?:":
            if text[1:2] in " ":  # alone, or before a space: a list item, a key, a value
                return False
        elif c < "\x80":  # an indicator or a space
            return False
    return ": " not in text and " #" not in text


def _plain_key(k: str) -> Any:
    """A plain key's value; not one that starts with "-" (which a mapping at the key's indent takes for a list
    item), "..." (at the start of a line, the end of a document) or is longer than libyaml looks for a key."""
    if len(k) > MAX_KEY or not _plain(k) or k[0] == "-" or k.startswith("..."):
        raise NotPlain
    return None if k in NULLS else k


def _quoted(text: str) -> tuple[str, str]:
    """The quoted scalar ``text`` starts with, and what follows it on the line: single quotes with ''
    for a quote, or double quotes without a backslash (no escape)."""
    if text[0] == "'":
        i = 1
        while True:
            j = text.find("'", i)
            if j < 0:
                raise NotPlain
            if text[j + 1 : j + 2] != "'":
                return text[1:j].replace("''", "'"), text[j + 1 :]
            i = j + 2
    j = text.find('"', 1)
    if j < 0 or "\\" in text[1:j]:
        raise NotPlain
    return text[1:j], text[j + 1 :]


def _flow_list(v: str) -> list[Any]:
    """``[a, b]``: plain words only, one space after each comma."""
    if v == "[]":
        return []
    if _FLOW_LIST.fullmatch(v) is None:
        raise NotPlain
    items: list[Any] = v[1:-1].split(", ")
    if "~" not in v and "ull" not in v and "ULL" not in v:  # no null's text (NULLS), found without hashing each item
        return items
    return items if NULLS.isdisjoint(items) else [None if x in NULLS else x for x in items]


def _scalar(v: str) -> Any:
    """The value written after ``key: `` or ``- ``, when it is no plain scalar of the quick test."""
    c = v[:1]
    if c == "'" or c == '"':
        text, after = _quoted(v)
        if after:
            raise NotPlain
        return text
    if c == "[":
        return _flow_list(v)
    if v == "{}":
        return {}
    if c == " ":
        return _scalar(v.lstrip(" "))  # "key:   value", aligned by hand
    if _plain(v):
        return None if v in NULLS else v
    raise NotPlain


def _split_entry(body: str) -> tuple[Any, str, str, str | None]:
    """A mapping entry written from its key on: (key, ": " or "" when the value is on the lines below, the
    value's text, the key's text when it is plain)."""
    if body[:1] in ("'", '"'):
        key, after = _quoted(body)
        if len(body) - len(after) > MAX_KEY:
            raise NotPlain
        if after == ":":
            return key, "", "", None
        if after[:2] != ": ":
            raise NotPlain
        return key, ": ", after[2:], None
    k, sep, v = body.partition(": ")
    if not sep:
        if body[-1:] != ":":
            raise NotPlain
        k = body[:-1]
    return _plain_key(k), sep, v, k


def _reader(source: Iterator[str]) -> Callable[[dict[str, Handler]], dict[str, Any]]:
    """The reader of one file, as closures (what they share is read as fast as their locals).

    A line is taken only by the mapping or list at exactly its indent, and only in its form (``key: ...`` or
    ``- ...``); a line that no open mapping or list takes is NotPlain, which also catches any line that would
    continue a scalar of the line above it. A known key is one dict look-up of the text before ": ", per
    indent: ``inline[n]`` holds the ``"  key"`` of lines ``  key: value`` (or _OUT), ``block[n]`` the lines
    ``  key:``, ``firsts[n]`` the ``"  - key"`` of list items ``  - key: value``."""
    nxt = source.__next__
    pads = [" " * n for n in range(MAX_INDENT + 1)]
    dashes = [pad + "- " for pad in pads]
    inline: list[dict[str, Any]] = [{} for _ in pads]
    block: list[dict[str, Any]] = [{} for _ in pads]
    firsts: list[dict[str, Any]] = [{} for _ in pads]
    lines_seen: list[dict[str, tuple[Any, Any]]] = [{} for _ in pads]

    def document(stream: dict[str, Handler]) -> dict[str, Any]:
        """The top-level mapping; a list value of a key in ``stream`` goes item by item to its callback and
        counts as its length (as ``yamlstream.document``)."""
        out: dict[str, Any] = {}
        line = nxt()
        if line is END:
            raise NotPlain  # an empty file: what it holds is the event reader's to say
        while line is not END:
            got = entry(0, line)
            if got is None:
                raise NotPlain
            key, sep, v = got
            if key in out:
                raise NotPlain
            handler = stream.get(key)
            if sep:
                value = _scalar(v)
                line = nxt()
                if handler is not None and type(value) is list:
                    for i, item_value in enumerate(value):
                        handler(item_value, i)
                    value = len(value)
            else:
                line = nxt()
                body = line.lstrip(" ")
                if handler is not None and body[:2] == "- ":
                    value, line = sequence(len(line) - len(body), line, 2, handler)
                else:
                    value, line = nested(0, line, 2)
            out[key] = value
        return out

    def entry(n: int, line: str) -> tuple[Any, str, str] | None:
        """The key, ``": "`` or ``""`` and value text of ``line``, an entry of a mapping at indent n; None when
        the line is none (less or more indented, a list item, END). Plain keys are remembered."""
        if n > MAX_INDENT:
            raise NotPlain
        if not line.startswith(pads[n]) or line[n : n + 1] in " -\n":
            k, sep, _ = line.partition(": ")
            if sep and len(inline[n]) < CACHE:
                inline[n][k] = _OUT  # whatever follows "k: ", such a line is no entry at n (the next list item)
            return None
        key, sep, v, raw = _split_entry(line[n:])
        if raw is not None and key is not None:
            if sep:
                if len(inline[n]) < CACHE:
                    inline[n][pads[n] + raw] = key
            elif len(block[n]) < CACHE:
                block[n][line] = key
        return key, sep, v

    def mapping(n: int, key: Any, sep: str, v: str, depth: int) -> tuple[dict[str, Any], str]:
        """The mapping at indent n whose first entry is split already, and the line after it."""
        if depth > MAX_DEPTH or n > MAX_INDENT:
            raise NotPlain
        known, known_block, seen = inline[n], block[n], lines_seen[n]
        out: dict[Any, Any] = {}
        value: Any
        line = ""  # the first entry's line may be a list item's: it is not remembered here (no line is "")
        while True:
            if sep:
                # The common value, a plain scalar starting with a letter or digit, is told in line: a sufficient
                # test of what _plain accepts (a call per value would cost a tenth of a 10^6-job plan); any other
                # value is read by _scalar, whose _plain is the whole rule.
                if v[-1:] not in ": " and v[0] in _START and ": " not in v and " #" not in v:
                    value = None if v in NULLS else v
                    if line and len(seen) < CACHE:
                        seen[line] = (key, value)
                elif v == "[]":
                    value = []
                    if line and len(seen) < CACHE:
                        seen[line] = (key, _EMPTY)  # each hit makes a list of its own
                elif v[:1] == "[":  # a list of words (Pegasus.api writes each job's children so)
                    value = _flow_list(v)
                else:
                    value = _scalar(v)
                line = nxt()
            else:
                line = nxt()
                if line.startswith(dashes[n]):  # a list at the key's indent, as PyYAML writes one
                    value, line = sequence(n, line, depth + 1, None)
                else:
                    value, line = nested(n, line, depth + 1)
            if key in out:
                raise NotPlain  # the event reader names both
            out[key] = value
            got = seen.get(line)
            while got is not None:
                key, value = got
                if key in out:
                    raise NotPlain
                out[key] = [] if value is _EMPTY else value
                line = nxt()
                got = seen.get(line)
            k, sep, v = line.partition(": ")
            key = known.get(k) if sep else known_block.get(line)
            if key is None:
                split = entry(n, line)
                if split is None:
                    return out, line
                key, sep, v = split
            elif key is _OUT:
                return out, line

    def nested(n: int, line: str, depth: int) -> tuple[Any, str]:
        """The value of a ``key:`` at indent n that ends its line: the mapping or list below it (more indented,
        or a list at the key's indent), else None; and the line after it."""
        body = line.lstrip(" ")
        m = len(line) - len(body)
        if body[:2] == "- " and m >= n:
            return sequence(m, line, depth, None)
        if m > n:
            got = entry(m, line)
            if got is None:
                raise NotPlain
            return mapping(m, got[0], got[1], got[2], depth)
        return None, line

    def sequence(m: int, line: str, depth: int, handler: Handler | None) -> tuple[Any, str]:
        """The list whose items are the lines ``- ...`` at indent m, and the line after it; with a ``handler``,
        each item goes to it instead, and the list is their count."""
        if depth > MAX_DEPTH or m > MAX_INDENT:
            raise NotPlain
        dash, first, cut = dashes[m], firsts[m], m + 2
        out: list[Any] = []
        append = out.append if handler is None else None
        value: Any
        n = 0
        while True:
            k, sep, v = line.partition(": ")
            if sep and (key := first.get(k)) is not None:  # "- key: value", the key known
                value, line = mapping(cut, key, sep, v, depth + 1)
            elif line.startswith(dash):
                body = line[cut:]
                # "- word": in line as above (no ": " in the line when sep is empty), the rest through item()
                if not sep and body[-1:] not in ": " and body[:1] in _START and " #" not in body:
                    value = None if body in NULLS else body
                    line = nxt()
                else:
                    value, line = item(m, body, depth)
            else:
                return (out if handler is None else n), line
            if append is not None:
                append(value)
            else:
                handler(value, n)  # type: ignore[misc]  # handler is set whenever append is None
                n += 1

    def item(m: int, body: str, depth: int) -> tuple[Any, str]:
        """The list item at indent m written ``- body``: a scalar, or a mapping whose first entry ``body`` is;
        and the line after it."""
        c = body[:1]
        if c == "'" or c == '"':
            text, after = _quoted(body)
            if not after:
                return text, nxt()
        elif c == " " or c == "":
            raise NotPlain  # "-   key: value" (its mapping's indent is not m + 2), or a trailing space
        elif ": " not in body and body[-1] != ":":
            return _scalar(body), nxt()
        key, sep, v, raw = _split_entry(body)
        if raw is not None and key is not None and sep and len(firsts[m]) < CACHE:
            firsts[m][dashes[m] + raw] = key
        return mapping(m + 2, key, sep, v, depth + 1)

    return document


def read(fh: BinaryIO, stream: dict[str, Handler]) -> dict[str, Any]:
    """The top-level mapping of the YAML file ``fh`` (binary, at its start), the lists of the keys in ``stream``
    handed item by item to their callbacks; NotPlain when the file holds anything this reader does not read."""
    return _reader(lines(fh))(stream)
