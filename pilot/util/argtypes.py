"""The number converters of every ``pilot`` command's options (argparse's ``type=``).

Each raises ``argparse.ArgumentTypeError`` with the value and what is wrong
with it, which the parser (``pilot.util.cmdline.Parser``) turns into one
line and exit status 2. ``pilot run`` reads its PMC options as
pegasus-mpi-cluster does, with C's ``sscanf``: the number at the start of the
value counts, hence the ``leading_`` readers; what a 0 there means (detect,
no limit) is the option's business, not the reader's.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable

DAY = 86400.0  # seconds: the longest wait between two looks that an option accepts

_C_INT = re.compile(r"\s*[+-]?\d+")
_C_UNSIGNED = re.compile(r"\s*\+?\d+")
_C_DOUBLE = re.compile(r"\s*[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf(?:inity)?|nan)", re.I)


def _shown(text: str) -> str:
    """The value as a message quotes it: whole unless it is long enough to make the message more than a line."""
    return repr(text) if len(text) <= 40 else repr(text[:20]) + "..."


def whole_number(low: int, high: int | None = None) -> Callable[[str], int]:
    """An integer from ``low`` up to ``high`` (no upper bound: None).

    With a bound, a value with more characters than the bound has digits is
    refused before ``int()`` reads it: past 4,300 digits ``int()`` raises an
    error of its own, and reading millions of digits takes seconds.
    """

    def convert(text: str) -> int:
        if high is not None and len(text.strip()) > len(str(high)):
            raise argparse.ArgumentTypeError(f"{_shown(text)} must be at most {high}")
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{_shown(text)} is not an integer") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{_shown(text)} must be at least {low}")
        if high is not None and value > high:
            raise argparse.ArgumentTypeError(f"{_shown(text)} must be at most {high}")
        return value

    return convert


def leading_whole_number(low: int) -> Callable[[str], int]:
    """An integer as ``sscanf("%d")`` reads it: the one at the start of the value ("2.5" is 2), at least ``low``."""
    whole = whole_number(low)

    def convert(text: str) -> int:
        match = _C_INT.match(text)
        return whole(match.group(0).strip() if match else text)

    return convert


def leading_count(note: str = "") -> Callable[[str], int]:
    """A whole number as ``sscanf("%u")`` reads it: the digits at the start ("2.5" is 2, "100MB" is 100).

    ``note`` follows the complaint about a value with no digits at its start.
    """

    def convert(text: str) -> int:
        match = _C_UNSIGNED.match(text)
        if match is None:
            raise argparse.ArgumentTypeError(f"{_shown(text)} is not a whole number{note}")
        return int(match.group(0))

    return convert


def leading_float(what: str) -> Callable[[str], float]:
    """A number as ``sscanf("%lf")`` reads it: the one at the start ("2.5min" is 2.5; inf and nan as C spells them).

    ``what`` names the number in the complaint about a value that has none at its start.
    """

    def convert(text: str) -> float:
        match = _C_DOUBLE.match(text)
        if match is None:
            raise argparse.ArgumentTypeError(f"{_shown(text)} is not {what}")
        return float(match.group(0))

    return convert


def positive_seconds(text: str) -> float:
    """A wait in seconds: more than 0 and at most a day (nan and inf are not a time to wait)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{_shown(text)} is not a number of seconds") from None
    if value != value:
        raise argparse.ArgumentTypeError(f"{_shown(text)} is not a number of seconds")
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{_shown(text)} must be more than 0")
    if not value <= DAY:
        raise argparse.ArgumentTypeError(f"{_shown(text)} must be at most {DAY:.0f} (a day)")
    return value
