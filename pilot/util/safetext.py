"""What a value a user wrote may hold for each reader it goes to: one function per reader.

pilot writes user values into files that other programs read line by line or
hand to a shell: a PMC DAG (TASK/EDGE records, ``#pilot`` notes), a ``.sub``
file, a batch script, pegasus-transfer's JSON input. Each reader has its own
rule, and a value that breaks it is refused at plan time with a reason that
names the character (``problem_*``), or quoted so that the reader gets it back
whole (``shell_word`` here; a DAG word is pilot.dag.lexer.quote_arg's, after
``problem_line``). Callers put the field's place in front
(``file: path: ...``) and raise ConfigError: one line, exit 2.

Everywhere: a newline or carriage return would start a record of its own, and
a NUL ends a C string (and cannot be an argument of exec at all):
``problem_record``, the rule of a PMC DAG, which carries any other byte as
it came. Elsewhere text that is not UTF-8 (read with ``surrogateescape``)
cannot be written to a UTF-8 file either: ``problem_line``. The others add to
it.

pegasus-transfer (``problem_transfer_url``) builds shell commands from the
URLs of its input: its file:// and symlink:// handlers (cp, ln, mkdir, rm) and
most others wrap a path in single quotes, which a ``'`` in the path ends, so
whatever follows it runs. Its scp:// mkdir and rm put the path unquoted into the
remote shell's command line, so there no shell character is safe.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable

from pilot.errors import ConfigError

_RECORD_BREAKERS = re.compile(r"[\n\r\0]")
_LINE_BREAKERS = re.compile(r"[\n\r\0\ud800-\udfff]")
# Characters a POSIX shell gives a meaning to (and whitespace, which splits words).
_SHELL_SPECIAL = re.compile(r"""[\s'"\\`$;&|<>(){}*?\[\]!#~]""")
# Schemes whose paths pegasus-transfer hands to a remote shell without quotes (ScpHandler's mkdir and rm).
REMOTE_SHELL_SCHEMES = frozenset({"scp", "gsiscp", "sshftp"})


def describe(char: str) -> str:
    """A character as an error names it: ``a newline``, ``"'"``, ``a byte that is not UTF-8``."""
    names = {"\n": "a newline", "\r": "a carriage return", "\0": "a NUL", "\t": "a tab", " ": "a space"}
    if char in names:
        return names[char]
    if "\ud800" <= char <= "\udfff":
        return "a byte that is not UTF-8"
    return repr(char)


def problem_record(text: str) -> str | None:
    """Why ``text`` cannot be one value of a PMC DAG record or note; None: it can. A DAG is written with
    ``surrogateescape``, so bytes that are not UTF-8 reach the task as they came (PMC passes any byte on)."""
    m = _RECORD_BREAKERS.search(text)
    return None if m is None else f"holds {describe(m.group())}, which no line of a DAG can hold"


def problem_line(text: str) -> str | None:
    """Why ``text`` cannot be one value of a line-based file (a DAG record, a .sub line, a script line); None: it
    can."""
    m = _LINE_BREAKERS.search(text)
    return None if m is None else f"holds {describe(m.group())}, which no line of a generated file can hold"


def problem_line_value(text: str) -> str | None:
    """Why ``text`` cannot be the rest of a DAG line after a key (``#pilot cwd=<dir>``): what problem_record
    says, or a blank at either end, which the line's reader strips; None: it can."""
    why = problem_record(text)
    if why:
        return why
    return None if text == text.strip() else "starts or ends with a blank, which a reader of its line would drop"


def problem_word(text: str) -> str | None:
    """Why ``text`` cannot be one plain word everywhere (a site name, a cluster name): nothing a shell, a DAG or a
    .sub file reads, no blank; None: it can."""
    why = problem_line(text)
    if why:
        return why
    if not text:
        return "is empty"
    m = _SHELL_SPECIAL.search(text)
    return None if m is None else f"holds {describe(m.group())}: use letters, digits and _.+- only"


def problem_transfer_url(url: str) -> str | None:
    """Why pegasus-transfer cannot be given ``url`` safely (see the module's notes); None: it can."""
    why = problem_line(url)
    if why:
        return why
    if "'" in url:
        return (
            "holds \"'\", which pegasus-transfer's commands (cp, ln, mkdir, rm) would read as the end of a "
            'quoted path: rename it without "\'"'
        )
    scheme = url.split(":", 1)[0] if ":" in url else "file"
    if scheme in REMOTE_SHELL_SCHEMES:
        path = url.split("://", 1)[-1]
        m = _SHELL_SPECIAL.search(path)
        if m:
            return (
                f"holds {describe(m.group())}, which pegasus-transfer passes unquoted to the remote shell of an "
                f"{scheme}:// URL: use letters, digits and _.+-/ only"
            )
    return None


# What pegasus-transfer replaces in a file:// or symlink:// path by an environment variable's value
# (transfer.py expand_env_vars): ``$NAME`` or ``${NAME}``, NAME two characters or more.
_ENV_REFERENCE = re.compile(r"\$\{?[a-zA-Z][a-zA-Z0-9_]+")


def problem_staged_path(text: str) -> str | None:
    """Why ``text`` cannot be a path that pilot's jobs use as written and pegasus-transfer also writes (an lfn, the
    workflow's directory): what problem_transfer_url says, and a ``$NAME`` that pegasus-transfer alone would
    replace by the variable's value, so that the file went where no job looks; None: it can be."""
    why = problem_transfer_url(text)
    if why:
        return why
    m = _ENV_REFERENCE.search(text)
    return (
        None
        if m is None
        else (
            f"holds {m.group()!r}, which pegasus-transfer replaces by an environment "
            "variable's value (the job would not find the file): rename it without '$'"
        )
    )


_PLAIN = re.compile(r"[A-Za-z0-9_.,:=@+/%-]+\Z")


def is_plain(value: str) -> bool:
    """A value that needs no quoting anywhere (shell words and batch directive lines, ``#SBATCH``/``#PBS``, which
    schedulers parse themselves, not a shell): the only kind a directive line may hold."""
    return bool(_PLAIN.match(value))


def shell_word(text: str, what: str = "a value") -> str:
    """``text`` as one word of a POSIX shell command line (a batch script), ``shlex.quote``'s; ConfigError naming
    ``what`` if no line can hold it."""
    why = problem_line(text)
    if why:
        raise ConfigError(f"{what} {text[:80]!r} {why}")
    return shlex.quote(text)


def shell_line(words: Iterable[str], what: str = "a command") -> str:
    """``words`` as one POSIX shell command line, each quoted by shell_word."""
    return " ".join(shell_word(w, f"a word of {what}") for w in words)
