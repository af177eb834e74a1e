"""PMC's argument splitting for TASK records.

Rules (what pegasus-mpi-cluster does): whitespace separates arguments; ``'``
and ``"`` both open a quote and either one closes it; a closing quote always
ends the argument (so ``''`` is an empty argument); a backslash escapes the
next character anywhere, inside quotes too. No variable expansion, no globbing.
As in PMC, a trailing backslash stands for itself. An unterminated quote
would end at the end of the line; the parser rejects such lines first
(``unterminated_quote``), since a lost quote usually means a mangled command.

Lines without quotes or backslashes (most of them) take ``str.split``; the
others a single regular expression per argument, which keeps a million-line
DAG well inside the parse budget.
"""

from __future__ import annotations

import re

SPECIAL = re.compile(r"['\"\\]")
# One argument: unquoted characters and escapes, then at most one quoted part
# (which ends the argument). findall also yields empty matches between
# arguments; those have neither text nor an opening quote.
_TOKEN = re.compile(r"""((?:[^\s'"\\]|\\.?)*)(?:(['"])((?:[^'"\\]|\\.?)*)['"]?)?""", re.S)
_ESCAPE = re.compile(r"\\(.)", re.S)
# A whole record whose every quote is closed: plain characters, escapes, a
# trailing backslash, or quoted parts (either quote character closes).
_BALANCED = re.compile(r"""(?:[^'"\\]|\\.|\\\Z|['"](?:[^'"\\]|\\.)*['"])*\Z""", re.S)


def unterminated_quote(text: str) -> bool:
    """Whether ``text`` has a quote that is never closed."""
    return _BALANCED.match(text) is None


def split_args(text: str) -> list[str]:
    """Split one record into arguments using PMC's quoting rules."""
    if SPECIAL.search(text) is None:
        return text.split()
    args: list[str] = []
    for plain, quote, quoted in _TOKEN.findall(text):
        if quote:
            arg = plain + quoted
        elif plain:
            arg = plain
        else:
            continue
        args.append(_ESCAPE.sub(r"\1", arg) if "\\" in arg else arg)
    return args


_NEEDS_QUOTING = re.compile(r"[\s'\"\\]")


def quote_arg(arg: str) -> str:
    """Quote one argument so that split_args gives it back unchanged."""
    if arg.isidentifier():  # letters, digits and "_": most task ids, a test quicker than the search below
        return arg
    if not _NEEDS_QUOTING.search(arg):
        return arg if arg else "''"
    if SPECIAL.search(arg) is None:
        return '"' + arg + '"'
    if not any(c.isspace() for c in arg):
        return "".join("\\" + c if c in "'\"\\" else c for c in arg)
    # In double quotes (a quote ends the argument, and a backslash escapes inside it too): an escaped space at the
    # end would be lost, as a line's reader strips trailing whitespace.
    return '"' + "".join("\\" + c if c in "'\"\\" else c for c in arg) + '"'
