import pytest

from pilot.dag.lexer import quote_arg, split_args


@pytest.mark.parametrize(
    "text,args",
    [
        ("a b  c", ["a", "b", "c"]),
        ('echo "I am A"', ["echo", "I am A"]),
        ("echo 'I am A'", ["echo", "I am A"]),
        ("echo ''", ["echo", ""]),
        ('echo ""', ["echo", ""]),
        # either quote closes an open quote
        ("echo 'a\"b", ["echo", "a", "b"]),
        # a closing quote always ends the argument
        ('a"b"c', ["ab", "c"]),
        # backslash escapes anywhere, inside quotes too
        (r"a\ b", ["a b"]),
        (r"'it\'s'", ["it's"]),
        (r'"a\"b"', ['a"b']),
        (r"a\\b", ["a\\b"]),
        # no expansion, no globbing
        ("echo $HOME *", ["echo", "$HOME", "*"]),
        # PMC: a trailing backslash stands for itself; an open quote ends at end of line
        ("echo a\\", ["echo", "a\\"]),
        ("echo 'abc", ["echo", "abc"]),
        ("\t a \t", ["a"]),
    ],
)
def test_split(text, args):
    assert split_args(text) == args


@pytest.mark.parametrize("arg", ["", "plain", "a b", "it's", 'say "hi"', "back\\slash", "tab\tx", "#x", "-m"])
def test_quote_roundtrip(arg):
    assert split_args("X " + quote_arg(arg)) == ["X", arg]
