"""A PMC DAG written back by ``format_dag``, compared byte for byte with a golden file.

The input is untidy as a hand-written DAG is (blank lines, extra spaces, EDGE
records first, quoting of every kind); the golden file is what ``pilot plan``
copies into a cluster: every record in pilot's one spelling of it.
"""

from pathlib import Path

from pilot.dag import format_dag, parse_dag, read_dag

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def test_a_hand_written_dag_is_written_back_as_the_golden_file():
    text = format_dag(read_dag(str(GOLDEN / "handwritten.dag")))
    assert text == (GOLDEN / "rewritten.dag").read_text()


def test_the_golden_file_reads_back_as_itself():
    text = (GOLDEN / "rewritten.dag").read_text()
    assert format_dag(parse_dag(text.splitlines(True), "rewritten.dag")) == text
