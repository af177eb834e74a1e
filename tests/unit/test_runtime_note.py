"""``#pilot runtime=<s>``: a task's expected run time in the DAG, skipped by PMC as a comment."""

import pytest

from pilot.dag import format_dag, parse_dag
from pilot.errors import DagError


def parse(text: str):
    return parse_dag(text.splitlines(True), "w.dag")


def test_runtime_applies_to_the_next_task_only():
    dag = parse(
        "#@ 1 ns::tx:1.0 j1\n#pilot runtime=12.5\nTASK a /bin/true\nTASK b /bin/true\n#pilot runtime=0\nTASK c /bin/true\n"
    )
    assert (dag["a"].runtime, dag["b"].runtime, dag["c"].runtime) == (12.5, None, 0.0)
    assert dag["a"].transformation == "ns::tx:1.0"


def test_written_back_and_read_again():
    dag = parse("#@ 1 tx j1\n#pilot runtime=0.1\nTASK a /bin/true\n#pilot runtime=1234567.25\nTASK b /bin/true\n")
    text = format_dag(dag)
    assert "#pilot runtime=0.1\nTASK a" in text
    again = parse(text)
    assert (again["a"].runtime, again["b"].runtime) == (0.1, 1234567.25)


@pytest.mark.parametrize("value", ["soon", "-1", "nan", "inf", ""])
def test_bad_runtime_names_file_and_line(value):
    with pytest.raises(DagError) as info:
        parse(f"TASK a /bin/true\n#pilot runtime={value}\nTASK b /bin/true\n")
    assert str(info.value).startswith("w.dag:2: runtime ")
    assert "not a non-negative number of seconds" in str(info.value)


def test_unknown_pilot_annotation_is_an_error_other_comments_are_not():
    with pytest.raises(DagError, match=r"w.dag:1: invalid '#pilot' annotation"):
        parse("#pilot walltime=3\nTASK a /bin/true\n")
    dag = parse("#pilots are fine\n# pilot runtime=x is a plain comment\nTASK a /bin/true\n")
    assert dag["a"].runtime is None
