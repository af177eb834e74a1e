"""The crash record: read back as runs left it, torn or corrupt, with the previous run's slots."""

from __future__ import annotations

import pytest

from pilot.errors import DagError
from pilot.runtime.crashes import CrashLog, Slot

KNOWN = {"a": 1, "b": 2, "c": 3}


def test_slots_of_a_dead_run_make_suspects_and_a_crash_alone_counts(tmp_path):
    dag = str(tmp_path / "wf.dag")
    Slot(dag, 1).running("a")
    Slot(dag, 2).running("b")
    log = CrashLog(dag, KNOWN)
    assert sorted(log.state.suspects) == ["a", "b"] and log.state.crashes == {}
    log.close()
    assert not list(tmp_path.glob("wf.dag.running.*"))  # read once, then gone
    (tmp_path / "wf.dag.crashes").write_text("SUSPECT a\nSUSPECT b\nALONE a\n")
    Slot(dag, 1).running("a")  # the job died while a ran alone
    again = CrashLog(dag, KNOWN)
    assert again.state.crashes == {"a": 1} and again.state.suspects[0] == "a" and "b" in again.state.suspects
    again.close()
    assert (tmp_path / "wf.dag.crashes").read_text().endswith("ALONE a\nCRASH a\n")


def test_a_cleared_suspect_and_an_idle_slot_say_nothing(tmp_path):
    dag = str(tmp_path / "wf.dag")
    (tmp_path / "wf.dag.crashes").write_text("SUSPECT a\nALONE a\nCLEAR a\nCRASH zz\n")  # zz: no longer in the DAG
    slot = Slot(dag, 1)
    slot.running("b")
    slot.idle()
    log = CrashLog(dag, KNOWN)
    assert (log.state.suspects, log.state.crashes) == ([], {})


def test_a_torn_last_line_is_ignored_and_a_corrupt_one_is_one_line(tmp_path):
    dag = str(tmp_path / "wf.dag")
    (tmp_path / "wf.dag.crashes").write_text("CRASH a\nCRA")
    assert CrashLog(dag, KNOWN).state.crashes == {"a": 1}
    (tmp_path / "wf.dag.crashes").write_text("CRASH a\nBOOM a\n")
    with pytest.raises(DagError, match=r"wf.dag.crashes:2: not a crash record \('BOOM a'\).*delete the file") as info:
        CrashLog(dag, KNOWN)
    assert "\n" not in str(info.value) and info.value.exit_code == 2
