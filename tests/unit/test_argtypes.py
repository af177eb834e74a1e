"""The number converters of the commands' options: one set, each value's complaint one line."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import pytest

from pilot.util.argtypes import leading_count, leading_float, leading_whole_number, positive_seconds, whole_number

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "convert, text, says",
    [
        (whole_number(0), "x", "'x' is not an integer"),
        (whole_number(1), "0", "'0' must be at least 1"),
        (whole_number(0, 999999), "1000000", "'1000000' must be at most 999999"),
        (whole_number(0, 999999), "9" * 5000, "'99999999999999999999'... must be at most 999999"),
        (whole_number(0), "9" * 5000, "'99999999999999999999'... is not an integer"),  # past int()'s 4,300 digits
        (leading_whole_number(1), "0.5", "'0' must be at least 1"),
        (leading_whole_number(0), "many", "'many' is not an integer"),
        (leading_count(" (0: detect)"), "-5", "'-5' is not a whole number (0: detect)"),
        (leading_float("a number of minutes"), "soon", "'soon' is not a number of minutes"),
        (positive_seconds, "nan", "'nan' is not a number of seconds"),
        (positive_seconds, "-1", "'-1' must be more than 0"),
        (positive_seconds, "1e9", "'1e9' must be at most 86400 (a day)"),
    ],
)
def test_bad_values_are_one_short_line(convert, text, says):
    with pytest.raises(argparse.ArgumentTypeError) as info:
        convert(text)
    assert str(info.value) == says


@pytest.mark.parametrize(
    "convert, text, value",
    [
        (whole_number(-3), "-3", -3),
        (whole_number(0, 999999), " 42 ", 42),
        (leading_whole_number(1), "2.5", 2),  # sscanf("%d")
        (leading_whole_number(0), "1x", 1),
        (leading_count(), "100MB", 100),  # sscanf("%u")
        (leading_count(), "0", 0),
        (leading_float("x"), "2.5min", 2.5),  # sscanf("%lf")
        (leading_float("x"), "-3", -3.0),
        (leading_float("x"), "1e400", math.inf),
        (positive_seconds, "86400", 86400.0),
    ],
)
def test_values_read_as_the_options_take_them(convert, text, value):
    assert convert(text) == value


def test_no_other_module_makes_its_own_converters():
    own = ROOT / "pilot" / "util" / "argtypes.py"
    others = [
        p.relative_to(ROOT)
        for top in ("pilot", "providers")
        for p in (ROOT / top).rglob("*.py")
        if p != own and "ArgumentTypeError(" in p.read_text()
    ]
    assert not others, f"number converters belong in {own.relative_to(ROOT)}: {others}"
