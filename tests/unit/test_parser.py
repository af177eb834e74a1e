import pytest

from pilot.dag import format_dag, parse_dag, read_dag
from pilot.dag.cycles import topological_order
from pilot.errors import DagError
from tests.conftest import DIAMOND_DAG

DIAMOND = DIAMOND_DAG


def parse(text: str, path: str = "t.dag"):
    return parse_dag(text.splitlines(True), path)


def error_of(text: str) -> str:
    with pytest.raises(DagError) as info:
        parse(text)
    return str(info.value)


def test_diamond():
    dag = parse(DIAMOND)
    assert list(dag.tasks) == ["A", "B", "C", "D"]
    assert dag["A"].argv == ["/bin/echo", "I am A"]
    assert [c.name for c in dag["A"].children] == ["B", "C"]
    assert [p.name for p in dag["D"].parents] == ["B", "C"]
    assert topological_order(dag) == ["A", "B", "C", "D"]


def test_task_options():
    dag = parse("TASK t01 -m 10.2 -c 1.5 -t 3 -p -4 -g 1 -f A=/tmp/a -f B=x=y -F /tmp/s=/d /bin/program -a -b\n")
    t = dag["t01"]
    assert (t.memory, t.cpus, t.tries, t.priority, t.gpus) == (11, 2, 3, -4, 1)
    assert t.pipe_forwards == [("A", "/tmp/a"), ("B", "x=y")]
    assert t.file_forwards == [("/tmp/s", "/d")]
    assert t.argv == ["/bin/program", "-a", "-b"]


def test_long_options_and_equals_form():
    t = parse(
        "TASK t --request-memory 5 --request-cpus=2 --tries 2 --priority 7 --pipe-forward V=f --file-forward a=b --request-gpus 1 x\n"
    )["t"]
    assert (t.memory, t.cpus, t.tries, t.priority, t.gpus) == (5, 2, 2, 7, 1)
    assert t.pipe_forwards == [("V", "f")] and t.file_forwards == [("a", "b")]


def test_options_only_before_executable():
    t = parse("TASK t /bin/prog -m 10 -c 2\n")["t"]
    assert t.memory == 0 and t.cpus == 1
    assert t.argv == ["/bin/prog", "-m", "10", "-c", "2"]


def test_defaults():
    t = parse("TASK t x\n")["t"]
    assert (t.memory, t.cpus, t.gpus, t.tries, t.priority) == (0, 1, 0, None, 0)


def test_comments_blank_and_annotations():
    dag = parse("\n   # a comment\n#@ 7 pegasus::findrange ID0000007\nTASK a x\n  TASK b y # not a comment\n")
    assert (
        dag["a"].pegasus_id == "7"
        and dag["a"].transformation == "pegasus::findrange"
        and dag["a"].dax_id == "ID0000007"
    )
    assert dag["b"].pegasus_id is None
    assert dag["b"].argv == ["y", "#", "not", "a", "comment"]


def test_edges_before_tasks_are_accepted():
    dag = parse("EDGE a b\nTASK a x\nTASK b y\n")
    assert [c.name for c in dag["a"].children] == ["b"]


def test_duplicate_edge_ignored():
    dag = parse("TASK a x\nTASK b y\nEDGE a b\nEDGE a b\n")
    assert sum(len(t.children) for t in dag) == 1 and len(dag["b"].parents) == 1


@pytest.mark.parametrize(
    "text,expected",
    [
        ("TASK a x\nTASK a y\n", "t.dag:2: duplicate task 'a'"),
        ("TASK a x\nEDGE a b\n", "t.dag:2: EDGE names unknown task 'b'"),
        ("TASK a x\nEDGE a\n", "t.dag:2: invalid EDGE record"),
        ("TASK a x\nEDGE a a b\n", "t.dag:2: invalid EDGE record"),
        ("TASK\n", "t.dag:1: invalid TASK record"),
        ("TASK a -m 10\n", "t.dag:1: task 'a' has no executable"),
        ("TASK a\n", "t.dag:1: task 'a' has no executable"),
        ("TASK a -m\n", "t.dag:1: task 'a': option -m needs a value"),
        ("TASK a -m -1 x\n", "t.dag:1: task 'a': -m '-1': must not be negative"),
        ("TASK a -m lots x\n", "t.dag:1: task 'a': -m 'lots': not a number"),
        ("TASK a -t -1 x\n", "t.dag:1: task 'a': -t '-1': must not be negative"),
        ("TASK a -p x1 x\n", "t.dag:1: task 'a': -p 'x1': not an integer"),
        ("TASK a -c many x\n", "t.dag:1: task 'a': -c 'many': not a number"),
        ("TASK a x\nTASK b /bin/echo 'oops\n", "t.dag:2: unterminated quote"),
        ('TASK a x\nEDGE a "b\n', "t.dag:2: unterminated quote"),
        ("TASK a /bin/echo a\0b\n", "t.dag:1: NUL byte in the line"),
        ("TASK a -f nonsense x\n", "t.dag:1: task 'a': -f 'nonsense': expected VAR=FILE"),
        ("TASK a -f 1X=f x\n", "not a valid environment variable name"),
        ("TASK a -F src x\n", "t.dag:1: task 'a': -F 'src': expected SRC=DEST"),
        ("TASK a --bogus 1 x\n", "t.dag:1: task 'a': unknown task option '--bogus'"),
        ("JOB a x\n", "t.dag:1: invalid record 'JOB'"),
        ("#@ 1 tx\nTASK a x\n", "t.dag:1: invalid '#@' annotation"),
        ("TASK a x\nEDGE a a\n", "t.dag:2: cycle: a -> a"),
    ],
)
def test_errors_are_one_line_with_location(text, expected):
    message = error_of(text)
    assert expected in message
    assert "\n" not in message


def test_cycle_names_its_tasks():
    message = error_of("TASK a x\nTASK b x\nTASK c x\nTASK d x\nEDGE a b\nEDGE b c\nEDGE c d\nEDGE d b\n")
    assert "cycle: b -> c -> d -> b" in message


def test_read_missing_file(tmp_path):
    with pytest.raises(DagError) as info:
        read_dag(str(tmp_path / "nope.dag"))
    assert "cannot read DAG" in str(info.value)


def test_roundtrip_through_writer():
    text = "#@ 3 tx ID3\nTASK a -m 5 -c 2 -g 1 -t 2 -p -1 -f V=/o -F s=d /bin/echo 'two words' '' it\\'s back\\\\slash\nTASK b x\nEDGE a b\n"
    dag = parse(text)
    again = parse(format_dag(dag))
    for name in ("a", "b"):
        x, y = dag[name], again[name]
        assert (
            x.argv,
            x.memory,
            x.cpus,
            x.gpus,
            x.tries,
            x.priority,
            x.pipe_forwards,
            x.file_forwards,
            x.pegasus_id,
        ) == (y.argv, y.memory, y.cpus, y.gpus, y.tries, y.priority, y.pipe_forwards, y.file_forwards, y.pegasus_id)
    assert sum(len(t.children) for t in again) == 1


def test_numbers_are_read_the_way_pmc_reads_them():
    """sscanf("%d") takes the integer at the start; "%f" then rounding up for -m and -c."""
    t = parse("TASK a -p 1.5 -t 2.5 -c 0 -m 1e1 x\n")["a"]
    assert (t.priority, t.tries, t.cpus, t.memory) == (1, 2, 0, 10)
    t = parse("TASK a -t 0 -p -7x -c 2.5 x\n")["a"]
    assert (t.tries, t.priority, t.cpus) == (0, -7, 3)


def test_cwd_notes_hold_until_the_next_and_stdio_notes_for_one_task():
    dag = parse(
        "TASK a /bin/true\n#pilot cwd=/scratch/my dir\n#pilot stdout=b.out 'stdin=in put'\nTASK b /bin/cat\n"
        "TASK c /bin/true\n#pilot cwd=\nTASK d /bin/true\n"
    )
    assert [(t.name, t.cwd) for t in dag] == [
        ("a", None),
        ("b", "/scratch/my dir"),
        ("c", "/scratch/my dir"),
        ("d", None),
    ]
    assert dag["b"].stdio == ("in put", "b.out", "") and dag["c"].stdio is None
    again = parse(format_dag(dag))  # written back as read
    assert [(t.name, t.cwd, t.stdio) for t in again] == [(t.name, t.cwd, t.stdio) for t in dag]


def test_env_notes_hold_until_the_next_and_are_written_back():
    dag = parse(
        "TASK a /bin/true\n#pilot env A=1 'B=x y' A=2\nTASK b /bin/true\nTASK c /bin/true\n#pilot env\nTASK d x\n"
    )
    assert [t.env for t in dag] == [None, (("A", "2"), ("B", "x y")), (("A", "2"), ("B", "x y")), None]
    assert dag["b"].env is dag["c"].env  # one tuple per line, however many tasks follow it
    assert [t.env for t in parse(format_dag(dag))] == [t.env for t in dag]


@pytest.mark.parametrize(
    "line,message",
    [
        ("#pilot env 1A=x", "t.dag:1: invalid '#pilot env' word '1A=x'"),
        ("#pilot env A", "t.dag:1: invalid '#pilot env' word 'A'"),
        ("#pilot cwd=relative/dir", "t.dag:1: '#pilot cwd=relative/dir': the directory must be an absolute path"),
        ("#pilot stdout=", "t.dag:1: invalid '#pilot' stdio annotation 'stdout='"),
        ("#pilot stdout=a stdlog=b", "t.dag:1: invalid '#pilot' stdio annotation 'stdlog=b'"),
    ],
)
def test_bad_pilot_notes_are_one_line(line, message):
    assert error_of(line + "\nTASK a /bin/true\n").startswith(message)


def test_edges_keep_the_order_of_their_records_when_some_come_before_their_tasks():
    # "EDGE a b" finds both tasks; "EDGE a d" comes before TASK d; "EDGE a c" follows it in the file,
    # and so in a's children, though both of its tasks were known when it was read.
    dag = parse("TASK a x\nTASK b x\nTASK c x\nEDGE a b\nEDGE a d\nEDGE a c\nTASK d x\nEDGE c d\n")
    assert [c.name for c in dag["a"].children] == ["b", "d", "c"]
    assert [p.name for p in dag["d"].parents] == ["a", "c"]


def test_edge_errors_keep_their_order_behind_task_errors():
    # A task's error is found while reading; an EDGE's, even one read before it, at the end.
    assert error_of("TASK a x\nEDGE a a\nTASK\n").startswith("t.dag:3: invalid TASK record")
    assert error_of("TASK a x\nEDGE a z\nTASK b x\nEDGE b b\n").startswith("t.dag:2: EDGE names unknown task 'z'")


def test_tasks_repeating_an_annotation_value_share_one_object():
    dag = parse(
        "#@ 1 pegasus::transfer stage_in_1\n#pilot runtime=2.5\nTASK stage_in_1 x\n"
        "#@ 2 pegasus::transfer ID2\n#pilot runtime=2.5\nTASK job_2 x\n"
        "#@ 3 other ID3\n#pilot runtime=0\nTASK job_3 x\n#pilot runtime=-0\nTASK job_4 x\n"
    )
    one, two, three, four = dag["stage_in_1"], dag["job_2"], dag["job_3"], dag["job_4"]
    assert two.transformation == "pegasus::transfer" and two.transformation is one.transformation
    assert two.runtime == 2.5 and two.runtime is one.runtime
    assert one.dax_id == "stage_in_1" and one.dax_id is one.name  # pilot plan's auxiliary jobs
    assert (two.dax_id, three.transformation) == ("ID2", "other")
    assert repr(three.runtime) == "0.0" and repr(four.runtime) == "-0.0"  # written back as given


def test_values_first_seen_after_the_shared_table_is_full_are_read_as_written(monkeypatch):
    from pilot.dag import parser

    monkeypatch.setattr(parser, "SHARED_MAX", 2)
    text = "".join(f"#@ {i} tx{i % 3} ID{i}\n#pilot runtime={i % 3 + 1}\nTASK t{i} x\n" for i in range(6))
    dag = parse(text)
    assert [t.transformation for t in dag] == [f"tx{i % 3}" for i in range(6)]
    assert [t.runtime for t in dag] == [float(i % 3 + 1) for i in range(6)]
    assert dag["t3"].transformation is dag["t0"].transformation and dag["t4"].runtime is dag["t1"].runtime
