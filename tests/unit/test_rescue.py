import os
from pathlib import Path

import pytest

from pilot.contracts.rescue import RescueLog, read_rescue
from pilot.errors import DagError


def test_missing_log_means_nothing_done(tmp_path):
    assert read_rescue(str(tmp_path / "x.rescue")) == set()


def test_read_skips_blank_and_comments(tmp_path):
    p = tmp_path / "r"
    p.write_text("# header\n\nDONE a\n  DONE b  \nDONE my task\n")
    assert read_rescue(str(p)) == {"a", "b", "my task"}


def test_unknown_task_and_bad_record(tmp_path):
    p = tmp_path / "r"
    p.write_text("DONE a\nDONE zz\n")
    with pytest.raises(DagError, match=r"r:2: rescue log names unknown task 'zz'"):
        read_rescue(str(p), {"a"})
    p.write_text("DONE a\nFINISHED b\n")
    with pytest.raises(DagError, match=r"r:2: invalid rescue record"):
        read_rescue(str(p))


def test_torn_last_line_is_ignored(tmp_path):
    p = tmp_path / "r"
    p.write_bytes(b"DONE a\nDONE b")
    assert read_rescue(str(p)) == {"a"}


def test_writer_compacts_and_appends(tmp_path):
    p = str(tmp_path / "r")
    log = RescueLog(p, ["a", "b"])
    log.done("c")
    # each record reaches the kernel at once (survives SIGKILL of the writer)
    assert Path(p).read_text() == "DONE a\nDONE b\nDONE c\n"
    log.close()
    log = RescueLog(p, sorted(read_rescue(p)))
    log.done("d")
    log.close()
    assert Path(p).read_text() == "DONE a\nDONE b\nDONE c\nDONE d\n"
    assert not [f for f in os.listdir(tmp_path) if ".tmp." in f]


def test_a_log_with_nothing_to_keep_is_emptied_in_place(tmp_path):
    p = tmp_path / "r"
    p.write_text("DONE a\nDONE b\n")
    inode = p.stat().st_ino
    log = RescueLog(str(p))  # -s: the old records are dropped
    assert p.read_text() == ""
    assert p.stat().st_ino == inode  # no temp file renamed over it
    log.done("c")
    log.close()
    assert p.read_text() == "DONE c\n"
    fresh = tmp_path / "new.rescue"
    RescueLog(str(fresh)).close()
    assert fresh.read_text() == ""
    assert not list(tmp_path.glob("*.tmp.*"))


def test_log_written_by_pmc_keeps_its_last_record(tmp_path):
    """PMC writes "\\nDONE X" per record: the file starts with a newline and ends without one."""
    p = tmp_path / "r"
    p.write_bytes(b"\nDONE A\nDONE B\nDONE C")
    assert read_rescue(str(p), {"A", "B", "C", "D"}) == {"A", "B", "C"}
    log = RescueLog(str(p), sorted(read_rescue(str(p))))
    log.close()
    assert p.read_text() == "DONE A\nDONE B\nDONE C\n"  # one record per line from now on


def test_stale_temp_files_are_removed_and_a_failed_rewrite_leaves_none(tmp_path):
    p = tmp_path / "r"
    dead = tmp_path / "r.tmp.999999999"
    dead.write_text("DONE a\n")
    live = tmp_path / f"r.tmp.{os.getppid()}"
    live.write_text("")
    RescueLog(str(p), ["a"]).close()
    assert not dead.exists() and live.exists()
    live.unlink()
    with pytest.raises(
        DagError, match="cannot write the rescue log: No such file or directory; check that the directory"
    ):
        RescueLog(str(tmp_path / "missing" / "r"), ["a"])
    assert sorted(f.name for f in tmp_path.iterdir()) == ["r"]
