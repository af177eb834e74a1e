"""Fuzzing (bounded, no MPI): any DAG text and any task input end in the project's own errors.

The parser either returns a DAG whose every command can be split, or raises
DagError; a worker handed any task (ids with / or .., NUL bytes, quotes,
missing programs, odd forwards) answers with a TaskResult and writes only
inside the DAG's directory.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pilot.dag import parse_dag
from pilot.errors import DagError
from pilot.runtime.options import RunOptions
from pilot.runtime.protocol import RunTask, TaskResult, WorkerFailed
from pilot.runtime.worker import Worker

FUZZ = settings(
    max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

# Characters that matter to the grammar, plus a few of anything.
_CHARS = st.sampled_from(list(" \t'\"\\#@=-/.\0\r") + list("ABab01")) | st.characters(blacklist_categories=("Cs",))
_WORD = st.text(_CHARS, min_size=0, max_size=8)
_LINE = st.one_of(
    st.builds(lambda w: " ".join(["TASK", *w]), st.lists(_WORD, max_size=6)),
    st.builds(lambda w: " ".join(["EDGE", *w]), st.lists(_WORD, max_size=4)),
    st.builds(lambda w: "#@ " + " ".join(w), st.lists(_WORD, max_size=4)),
    st.builds(
        lambda opt, val, rest: f"TASK t {opt} {val} {rest}",
        st.sampled_from(["-m", "-c", "-t", "-p", "-f", "-F", "-g", "--tries", "-x"]),
        _WORD,
        _WORD,
    ),
    _WORD,
)


@FUZZ
@given(st.lists(_LINE, max_size=12))
def test_parser_gives_a_dag_or_a_dag_error(lines):
    try:
        dag = parse_dag([line + "\n" for line in lines], "f.dag")
    except DagError as err:
        assert str(err).startswith("f.dag:") and "\n" not in str(err)
        return
    for task in dag:
        assert task.argv and all("\0" not in a for a in task.argv)


class _Recorder:
    """The master's end of a worker's messages, without MPI."""

    rank = 1
    size = 2

    def __init__(self) -> None:
        self.sent: list = []

    def send(self, dest, msg, ring=True) -> None:
        self.sent.append(msg)

    def recv(self, timeout=None, wake=None, patience=0.0):
        return None

    def close(self) -> None:
        pass


_NAME = st.lists(st.sampled_from(list("ab./%-_ '\"\\\0") + ["..", "\u00e9"]), min_size=1, max_size=6).map("".join)
_ARG = st.text(st.sampled_from(list("ab /'\"\\$*\0\n") + ["\u00e9"]), max_size=8)
_PROGRAM = st.sampled_from(["/bin/true", "/bin/false", "/bin/echo", "no-such-program", "/", "", "./x", "/bin/sh\0"])


@FUZZ
@given(
    _NAME,
    _PROGRAM,
    st.lists(_ARG, max_size=3),
    st.lists(st.tuples(_ARG, _ARG), max_size=2),
    st.lists(st.tuples(_ARG, _ARG), max_size=2),
    st.booleans(),
)
def test_worker_turns_any_task_into_a_result(tmp_path_factory, name, program, args, pipes, files, per_task):
    where = tmp_path_factory.mktemp("dagdir")
    opts = RunOptions(dag=str(where / "wf.dag"), per_task_stdio=per_task)
    transport = _Recorder()
    worker = Worker(opts, transport)
    from pilot.runtime import taskexec

    worker._waker = taskexec.ChildWaker()
    before = set(os.listdir(where.parent))
    try:
        msg = RunTask(name, [program, *args], 1, pipe_forwards=list(pipes), file_forwards=list(files))
        result = worker.run_task(msg)
    finally:
        worker.cleanup()
    assert isinstance(result, TaskResult) and isinstance(result.status, int)
    assert all(isinstance(m, WorkerFailed) and not m.fatal for m in transport.sent)
    assert set(os.listdir(where.parent)) == before  # nothing written beside the DAG's directory
    for entry in os.listdir(where):
        assert entry.startswith(("wf.dag.", *_stdio_prefixes(name))), entry


def _stdio_prefixes(name: str) -> tuple[str, ...]:
    from pilot.monitor.stdio import file_name

    return (file_name(name) + ".out.", file_name(name) + ".err.")
