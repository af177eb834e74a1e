import pytest

from pilot.dag.lexer import quote_arg, split_args
from pilot.dag.writer import annotation, plain_task, plain_task_text, task_record


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


@pytest.mark.parametrize(
    "arg",
    [
        "",
        "plain",
        "a b",
        "it's",
        'say "hi"',
        "back\\slash",
        "tab\tx",
        "#x",
        "-m",
        "step_ID0000001",
        "\u00e9t\u00e9_1",
        "a\u3000b",
        "nbsp\u00a0x",
    ],
)
def test_quote_roundtrip(arg):
    assert split_args("X " + quote_arg(arg)) == ["X", arg]


@pytest.mark.parametrize("head,arguments", [("/bin/true", "-i f.a"), ("-m 10 /bin/true", ""), ("x", "'a b' c")])
def test_a_plain_task_is_its_annotation_and_record(head, arguments):
    """The one-string form of most planned tasks is the annotation and TASK record the general writers make."""
    record = task_record("t_ID1", f"{head} {arguments}" if arguments else head)
    assert plain_task(7, "ns::t:1", "ID1", "t_ID1", head, arguments) == plain_task_text(7, "ns::t:1", "ID1", record)
    assert plain_task_text(7, "ns::t:1", "ID1", record) == f"{annotation(7, 'ns::t:1', 'ID1')}\n{record}\n"
