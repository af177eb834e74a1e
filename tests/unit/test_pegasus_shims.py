"""pegasus-plan's options as Pegasus.api builds them, translated to pilot's; pegasus-status's table as Pegasus.api
parses it; the shims' layout as Pegasus.api finds its tools."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pilot.cli import pegasus_shims, pegasus_tools
from pilot.errors import UsageError
from pilot.monitor.dagman_out import DagmanOut

client = pytest.importorskip("Pegasus.client._client")


def planner_argv(**kw) -> list[str]:
    """pegasus-plan's command line exactly as Pegasus.api's Client.plan builds it."""
    return [*client.get_planner_args(**kw), "wf.yml", "--json"]


def test_options_of_workflow_plan_map_to_pilot_submit(tmp_path):
    argv = planner_argv(
        conf="my.properties",
        cluster=["label", "horizontal"],
        sites=["local"],
        output_sites=["local"],
        dir="runs",
        relative_dir="r1",
        cleanup="inplace",
        force=True,
        submit=True,
        cache=["a.rc", "b.rc"],
        **{"pegasus.mode": "development"},
    )
    call = pegasus_tools.plan_call(argv, cwd=str(tmp_path), user="u")
    sub = str(tmp_path / "runs" / "r1")
    assert call.submit_dir == sub and call.submit and call.json
    assert call.pilot_argv == [
        "submit",
        "--site",
        "local",
        "--dir",
        sub,
        "--output-sites",
        "local",
        "--cluster",
        "label,horizontal",
        "--cleanup",
        "inplace",
        "--conf",
        "my.properties",
        "-D",
        "pegasus.mode=development",
        "--cache",
        "a.rc",
        "--cache",
        "b.rc",
        "--force",
        "--detach",
        "wf.yml",
    ]


def test_without_submit_it_is_pilot_plan_in_pegasus_run_directories(tmp_path):
    (tmp_path / "wf.yml").write_text("pegasus: '5.0'\nname: diamond\njobs: []\njobDependencies: []\n")
    (tmp_path / "u" / "pegasus" / "diamond" / "run0001").mkdir(parents=True)
    call = pegasus_tools.plan_call(
        [*client.get_planner_args(sites=["cluster"]), str(tmp_path / "wf.yml")], cwd=str(tmp_path), user="u"
    )
    assert call.pilot_argv[:3] == ["plan", "--site", "cluster"] and "--detach" not in call.pilot_argv
    assert call.submit_dir == str(tmp_path / "u" / "pegasus" / "diamond" / "run0002")  # the first number free
    assert not call.json


def test_the_shims_site_wins_over_the_catalog_site_name(tmp_path):
    call = pegasus_tools.plan_call(planner_argv(sites=["condorpool"]), site_env="perlmutter-cpu", cwd=str(tmp_path))
    assert call.pilot_argv[1:3] == ["--site", "perlmutter-cpu"]
    several = planner_argv(sites=["local", "container"])
    assert pegasus_tools.plan_call(several, cwd=str(tmp_path)).pilot_argv[1:3] == ["--site", "local"]
    assert pegasus_tools.plan_call([*several, "--submit"], cwd=str(tmp_path)).pilot_argv[1:3] == [
        "--site",
        "local,container",
    ]  # pilot submit drives clusters on each


def test_options_pilot_cannot_follow_are_refused_and_names_are_ignored_with_a_warning(tmp_path):
    with pytest.raises(UsageError, match="--output-dir is not supported by pilot: pilot stages outputs"):
        pegasus_tools.plan_call(planner_argv(output_dir="/out"), cwd=str(tmp_path))
    call = pegasus_tools.plan_call(planner_argv(basename="x", java_options=["mx1g"]), cwd=str(tmp_path))
    assert call.warnings == [
        "pegasus-plan: --basename has no effect in pilot; ignored",
        "pegasus-plan: -X has no effect in pilot; ignored",
    ]
    with pytest.raises(UsageError, match="expected -Dkey=value"):
        pegasus_tools.plan_call(["-Dnovalue", "wf.yml"], cwd=str(tmp_path))


def _dagman_out(tmp_path: Path, ok: bool | None) -> Path:
    out = DagmanOut(str(tmp_path / "diamond-0.dag.dagman.out"), str(tmp_path / "diamond-0.dag"))
    out.header(4)
    out.status(done=1, queued=1, ready=0, failed=0)
    if ok is not None:
        out._block_at = 0.0  # the counts of the end are written at once
        out.status(done=4 if ok else 3, queued=0, ready=0, failed=0 if ok else 1)
        out.run_finished(ok, {})
    out.close()
    return tmp_path / "diamond-0.dag.dagman.out"


@pytest.mark.parametrize(
    "ok, state, done, failed", [(None, "Running", 1, 0), (True, "Success", 4, 0), (False, "Failure", 3, 1)]
)
def test_status_table_is_what_pegasus_api_parses(tmp_path, ok, state, done, failed):
    table = pegasus_tools.status_table(str(_dagman_out(tmp_path, ok)), "diamond-0.dag")
    parsed = client.Client._parse_status_output(table, "diamond-0")
    root = parsed["dags"]["root"]
    assert (root["state"], root["succeeded"], root["failed"], root["dagname"]) == (state, done, failed, "diamond-0.dag")
    assert root["percent_done"] == pytest.approx(100.0 * done / 4, abs=0.1)


def test_shims_sit_where_pegasus_api_looks_for_its_tools(tmp_path, monkeypatch):
    bindir = pegasus_shims.write_shims(str(tmp_path / "shims"), "local")
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    assert shutil.which("pegasus-version") == os.path.join(bindir, "pegasus-version")
    found = client.from_env()
    assert found._plan == os.path.join(bindir, "pegasus-plan") and os.access(found._remove, os.X_OK)
    res = subprocess.run(["condor_q", "-constraint", "x", "-json"], capture_output=True, text=True, timeout=60)
    assert (res.returncode, res.stdout) == (0, "[]\n")  # Pegasus.api's status reads an empty queue
    assert "'PILOT_PEGASUS_SITE', 'local'" in (Path(bindir) / "pegasus-plan").read_text()


def test_a_bad_dash_d_value_is_named_as_the_option(tmp_path):
    shutil.copy(Path(__file__).resolve().parents[2] / "examples" / "diamond.yml", tmp_path / "wf.yml")
    res = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from pilot.cli.pegasus_tools import tool; " "sys.exit(tool('pegasus-plan', sys.argv[1:]))",
            *planner_argv(sites=["local"], **{"pegasus.clusterer.preference": "bogus"}),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.startswith(
        "-D pegasus.clusterer.preference=bogus: pegasus.clusterer.preference = " "'bogus' is not a preference"
    ), res.stderr
