"""pilot.util.safetext: what each reader of a generated file can take, and the reason named when it cannot."""

from __future__ import annotations

import shlex

import pytest

from pilot.errors import ConfigError
from pilot.util import safetext


@pytest.mark.parametrize(
    "text,named", [("a\nb", "a newline"), ("a\rb", "a carriage return"), ("a\0b", "a NUL"), ("a\udcffb", "not UTF-8")]
)
def test_no_line_holds_a_line_break_a_nul_or_bytes_that_are_not_utf8(text, named):
    assert named in safetext.problem_line(text)


def test_a_dag_record_carries_bytes_that_are_not_utf8_but_no_line_break():
    assert safetext.problem_record("a\udcffb") is None
    assert "a newline" in safetext.problem_record("a\nb")


@pytest.mark.parametrize(
    "url",
    [
        "file:///a/b c",
        "file:///a/$(touch x)",
        'file:///a/`x`;"\\',
        "symlink:///a b",
        "https://h/x?a=b&c=d",
        "scp://h/a/b",
    ],
)
def test_pegasus_transfer_takes_what_it_quotes_whole(url):
    assert safetext.problem_transfer_url(url) is None


@pytest.mark.parametrize(
    "url,named",
    [
        ("file:///a/in'x", '"\'"'),
        ("https://h/x'", '"\'"'),
        ("scp://h/a b", "a space"),
        ("scp://h/a;b", "';'"),
        ("file:///a\nb", "a newline"),
    ],
)
def test_pegasus_transfer_is_not_given_what_would_end_its_quoting(url, named):
    assert named in safetext.problem_transfer_url(url)


def test_a_staged_path_has_no_variable_that_pegasus_transfer_alone_would_expand():
    assert "$HOME" in safetext.problem_staged_path("file:///a/$HOME/b")
    assert "${X1" in safetext.problem_staged_path("a${X1}")
    assert safetext.problem_staged_path("a$(touch x)") is None  # no variable: single quotes keep it


def test_a_line_value_keeps_its_ends():
    assert "blank" in safetext.problem_line_value("/a/sd ")
    assert safetext.problem_line_value("/a/s d") is None


@pytest.mark.parametrize("text", ["plain", "a b", "$(touch x)", "`x`", "it's", 'say "hi"', "back\\slash", ""])
def test_a_shell_word_comes_back_whole(text):
    assert shlex.split(safetext.shell_word(text)) == [text]


def test_a_shell_word_that_no_line_can_hold_is_refused_naming_it():
    with pytest.raises(ConfigError, match="the cluster directory '/a\\\\nb' holds a newline"):
        safetext.shell_word("/a\nb", "the cluster directory")


def test_a_word_is_one_plain_token():
    assert safetext.problem_word("local") is None
    assert "a space" in safetext.problem_word("lo cal")
    assert "empty" in safetext.problem_word("")
    assert safetext.is_plain("--mem=100") and not safetext.is_plain("a b")
