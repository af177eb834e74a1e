"""The kinds of value a site config key can hold, and how each is checked.

Every key of ``SiteConfig`` declares its kind in its field metadata
(``spec(KIND)``). A kind checks a value from a YAML file (already typed) or
from ``--set`` (text) and returns it normalised, or raises one ConfigError
line ``where: key: what is wrong``. Lists from ``--set`` are comma-separated.
A duration is what ``parse_walltime`` reads; a single word what a batch
directive can hold (``pilot.util.safetext.is_plain``).
"""

from __future__ import annotations

import difflib
import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pilot.errors import ConfigError, shown
from pilot.util.safetext import is_plain

MAX_INTEGER = 2**31 - 1  # nodes, cores, memory in MB, queue sizes: a scheduler reads no more
_TRUE, _FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")
MAX_WALLTIME_MINUTES = 366 * 24 * 60


def parse_walltime(text: str, where: str = "walltime") -> float:
    """``[[D-]HH:]MM[:SS]`` or minutes -> minutes (positive)."""
    value = str(text).strip()
    m = re.fullmatch(r"(?:(\d+)-)?(\d+):(\d{1,2})(?::(\d{1,2}))?", value)
    if m:
        days, h, mi, s = (int(g or 0) for g in m.groups())
        minutes = days * 1440 + h * 60 + mi + s / 60
    else:
        try:
            minutes = float(value)
        except ValueError:
            raise ConfigError(f"{where}: walltime {text!r} is not HH:MM:SS, D-HH:MM:SS or minutes") from None
    if not minutes > 0:
        raise ConfigError(f"{where}: walltime {text!r} must be longer than zero")
    if not minutes <= MAX_WALLTIME_MINUTES:  # inf, 1e400, a typo of many digits
        raise ConfigError(f"{where}: walltime {text!r} is longer than a year: write HH:MM:SS, D-HH:MM:SS or minutes")
    return minutes


def format_walltime(minutes: float) -> str:
    seconds = int(round(minutes * 60))
    return f"{seconds // 3600:02d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


@dataclass(frozen=True)
class Kind:
    """``name`` is how errors describe the expected value; ``convert`` returns the value or raises ValueError."""

    name: str
    convert: Callable[[Any, bool], Any]

    def check(self, value: Any, where: str, from_text: bool) -> Any:
        if value is None:
            return None
        try:
            return self.convert(value, from_text)
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}") from None


def spec(kind: Kind) -> dict[str, Kind]:
    return {"kind": kind}


def _one_line(value: Any, what: str) -> str:
    if isinstance(value, (list, dict)):
        raise ValueError(f"expected {what}, got a {'list' if isinstance(value, list) else 'mapping'}")
    if isinstance(value, bool):
        raise ValueError(f"expected {what}, got {str(value).lower()}")
    text = str(value)
    if "\n" in text.rstrip("\n") or "\r" in text:
        raise ValueError(f"{text!r} spans several lines: expected {what}")
    return text.rstrip("\n")


def _text(value: Any, from_text: bool) -> str:  # noqa: ARG001 - every converter takes from_text; this one reads values alike
    return _one_line(value, "one line of text")


def _word(value: Any, from_text: bool) -> str:  # noqa: ARG001 - every converter takes from_text; this one reads values alike
    text = _one_line(value, "a single word")
    if not is_plain(text):
        raise ValueError(
            f"{text!r} has characters that cannot go into a batch directive " "(letters, digits and _.,:=@+/%- only)"
        )
    return text


def _args(value: Any, from_text: bool) -> str:  # noqa: ARG001 - every converter takes from_text; this one reads values alike
    text = _one_line(value, "one line of command-line options")
    try:
        shlex.split(text)
    except ValueError as exc:
        raise ValueError(f"{text!r}: {exc}") from None
    return text


def _bool(value: Any, from_text: bool) -> bool:  # noqa: ARG001 - every converter takes from_text; this one reads values alike
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
        return value.strip().lower() in _TRUE
    raise ValueError(f"{shown(value)} is not true or false")


def _duration(value: Any, from_text: bool) -> str:  # noqa: ARG001 - every converter takes from_text; this one reads values alike
    if isinstance(value, bool) or isinstance(value, (list, dict)):
        raise ValueError(f"{shown(value)} is not a duration (HH:MM:SS, D-HH:MM:SS or minutes)")
    text = _one_line(value, "a duration")
    try:
        parse_walltime(text, "")
    except ConfigError as exc:
        raise ValueError(str(exc).lstrip(": ")) from None
    return text


def _list(item: Callable[[Any, bool], str], what: str) -> Callable[[Any, bool], list[str]]:
    def convert(value: Any, from_text: bool) -> list[str]:
        if from_text:
            value = [v.strip() for v in str(value).split(",") if v.strip()]
        elif not isinstance(value, list):
            raise ValueError(f"expected a list of {what} ([a, b] or one '- item' per line), got {shown(value)}")
        return [item(v, False) for v in value]

    return convert


def _lines(value: Any, from_text: bool) -> list[str]:
    """Lines of a script part: a list of one-line strings (from --set: one line)."""
    if from_text:
        return [_one_line(value, "one line (write several lines as a YAML list)")]
    if not isinstance(value, list):
        raise ValueError(f"expected a list of lines (one '- line' per line), got {shown(value)}")
    return [_one_line(v, "one line per list entry") for v in value]


def key_list(keys: Callable[[], Sequence[str]]) -> Kind:
    """A list of the keys ``keys()`` names: those of the class whose field holds it, known once it is made."""

    def key(value: Any, from_text: bool) -> str:  # noqa: ARG001 - every converter takes from_text; this one reads values alike
        text = _one_line(value, "a site key")
        if text not in keys():
            close = difflib.get_close_matches(text, keys(), n=1)
            raise ValueError(f"{text!r} is not a site key" + (f" (did you mean {close[0]!r}?)" if close else ""))
        return text

    return Kind("a list of site keys", _list(key, "site keys"))


def integer(minimum: int) -> Kind:
    def convert(value: Any, from_text: bool) -> int:  # noqa: ARG001 - every converter takes from_text; this one reads values alike
        if (
            isinstance(value, bool)
            or isinstance(value, float)
            or (isinstance(value, str) and not re.fullmatch(r"-?\d+", value.strip()))
        ):
            raise ValueError(f"{shown(value)} is not a whole number")
        if not isinstance(value, (int, str)):
            raise ValueError(f"{shown(value)} is not a whole number")
        if isinstance(value, str) and len(value.strip()) > 12:
            raise ValueError(f"{value[:20]!r}... is not a whole number of at most 12 digits")
        number = int(value)
        if number < minimum:
            raise ValueError(f"{number} must be at least {minimum}")
        if number > MAX_INTEGER:
            raise ValueError(f"{number} is more than {MAX_INTEGER} (what a batch system reads)")
        return number

    return Kind(f"a whole number >= {minimum}", convert)


def choice(problem: Callable[[str], str | None]) -> Kind:
    def convert(value: Any, from_text: bool) -> str:  # noqa: ARG001 - every converter takes from_text; this one reads values alike
        text = _one_line(value, "a single word")
        said = problem(text)
        if said:
            raise ValueError(said)
        return text

    return Kind("one of a fixed set", convert)


TEXT = Kind("one line of text", _text)
WORD = Kind("a single word", _word)
ARGS = Kind("command-line options", _args)
COMMAND = Kind("a command", _args)
BOOL = Kind("true or false", _bool)
DURATION = Kind("a duration", _duration)
LINES = Kind("a list of lines", _lines)
# Container runtimes a site's compute nodes have, and the container kind of Pegasus' each runs, in the order a
# site whose runtimes are found on PATH offers them (the first of a kind runs its containers).
CONTAINER_RUNTIMES = {
    "apptainer": "singularity",
    "singularity": "singularity",
    "podman-hpc": "docker",
    "podman": "docker",
    "docker": "docker",
    "shifter": "shifter",
}


def _runtime(value: Any, from_text: bool) -> str:  # noqa: ARG001 - every converter takes from_text; this one reads values alike
    text = _one_line(value, "a container runtime")
    if text not in CONTAINER_RUNTIMES:
        raise ValueError(f"{text!r} is not a container runtime pilot runs: use {', '.join(CONTAINER_RUNTIMES)}")
    return text


RUNTIMES = Kind("a list of container runtimes", _list(_runtime, "container runtimes"))
TEXTLIST = Kind("a list of one-line texts", _list(_text, "one-line texts"))
