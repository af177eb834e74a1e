"""PMC's argument splitting for TASK records.

Rules (what pegasus-mpi-cluster does): whitespace separates arguments; ``'``
and ``"`` both open a quote and either one closes it; a closing quote always
ends the argument (so ``''`` is an empty argument); a backslash escapes the
next character anywhere, inside quotes too. No variable expansion, no globbing.
As in PMC, a trailing backslash stands for itself and an unterminated quote
ends at the end of the line, so every DAG that PMC accepts splits the same.
"""

from __future__ import annotations

_SPECIAL = frozenset("'\"\\")


def split_args(text: str) -> list[str]:
    """Split one record into arguments using PMC's quoting rules."""
    if not any(c in _SPECIAL for c in text):
        return text.split()
    args: list[str] = []
    cur: list[str] = []
    have = False
    quoted = False
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            i += 1
            cur.append(text[i] if i < n else "\\")
            have = True
        elif quoted:
            if c == "'" or c == '"':
                quoted = False
                args.append("".join(cur))
                cur = []
                have = False
            else:
                cur.append(c)
        elif c == "'" or c == '"':
            quoted = True
            have = True
        elif c.isspace():
            if have:
                args.append("".join(cur))
                cur = []
                have = False
        else:
            cur.append(c)
            have = True
        i += 1
    if have:
        args.append("".join(cur))
    return args


def quote_arg(arg: str) -> str:
    """Quote one argument so that split_args gives it back unchanged."""
    if arg == "":
        return "''"
    if not any(c in _SPECIAL or c.isspace() for c in arg):
        return arg
    if not any(c in _SPECIAL for c in arg):
        return '"' + arg + '"'
    return "".join("\\" + c if c in _SPECIAL or c.isspace() else c for c in arg)
