"""tests/standin.py's check of a stand-in's staged outputs, which the laptop image's casa-wind run relies on to
fail when an output was not staged out, or not as its job wrote it."""

from __future__ import annotations

from tests.standin import StandIn


def test_the_stand_in_check_names_each_output_missing_or_wrong_and_passes_when_all_are_staged(tmp_path):
    run = StandIn("casa-wind", tmp_path)
    storage = run.storage()
    storage.mkdir(parents=True)
    wanted = sorted(run.outputs(registered=False))
    assert len(wanted) >= 2
    made_by = {use["lfn"]: job["id"] for job in run.wf["jobs"] for use in job["uses"] if use["type"] == "output"}
    for lfn in wanted:
        (storage / lfn).write_text(f"{made_by[lfn]} wrote {lfn}\n")
    assert run.staged_wrong() == []
    (storage / wanted[0]).unlink()
    (storage / wanted[1]).write_text("something else\n")
    (storage / "stray.txt").write_text("stray.txt\n")
    assert run.staged_wrong() == [
        f"{wanted[0]}: not staged out",
        "stray.txt: staged out but not an output marked stageOut",
        f"{wanted[1]}: holds 'something else\\n'",
    ]
