"""A file opened on another thread than its writer's: nothing written before it opens is lost or reordered."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from pilot.util.latefile import LateFile


def _opener(path: Path, mode: str):
    """The file's opening, for the LateFile (which closes it)."""
    return lambda: open(path, mode, **({} if "b" in mode else {"encoding": "utf-8"}))


def test_what_is_written_before_it_opens_comes_first_in_order(tmp_path):
    path = tmp_path / "f"
    late = LateFile(_opener(path, "a"), str(path))
    late.write("a\n")
    late.write("b\n")
    late.flush()  # nothing to flush yet: no file
    assert not path.exists()
    assert late.open() is None
    assert path.read_text() == "a\nb\n"  # the flush asked for before is done as it opens
    late.write("c\n")
    late.close()
    assert path.read_text() == "a\nb\nc\n"
    assert late.closed


def test_a_file_closed_before_its_opening_exists_with_all_that_was_written(tmp_path):
    path = tmp_path / "f"
    late = LateFile(_opener(path, "ab"))
    late.write(b"x\n")
    late.close()
    assert path.read_bytes() == b"x\n"
    assert late.open() is None  # opened by the close: the opener thread's turn opens nothing more
    assert path.read_bytes() == b"x\n"


def test_an_opening_that_fails_is_raised_once_by_the_writer_then_nothing_is_kept(tmp_path):
    path = tmp_path / "missing" / "f"
    late = LateFile(_opener(path, "a"))
    late.write("lost\n")
    exc = late.open()
    assert isinstance(exc, FileNotFoundError)
    with pytest.raises(FileNotFoundError):
        late.write("x\n")  # the writer's own error path says it
    late.write("y\n")  # left out from then on
    late.close()


def test_a_failed_opening_nothing_wrote_after_is_raised_by_the_close(tmp_path):
    late = LateFile(_opener(tmp_path / "no" / "f", "ab"))
    late.open()
    with pytest.raises(FileNotFoundError):
        late.close()


def test_lines_written_while_another_thread_opens_it_all_arrive_in_order(tmp_path):
    path = tmp_path / "f"
    for _ in range(20):
        path.unlink(missing_ok=True)
        late = LateFile(_opener(path, "a"))
        opener = threading.Thread(target=late.open)
        lines = [f"{i}\n" for i in range(2000)]
        for i, line in enumerate(lines):
            if i == 50:
                opener.start()
            late.write(line)
        opener.join()
        late.close()
        assert path.read_text().splitlines(keepends=True) == lines


def test_it_names_its_file_for_messages(tmp_path):
    from pilot.monitor.events import written_to

    assert written_to(LateFile(_opener(tmp_path / "f", "ab"), "/x/f")) == "/x/f"
