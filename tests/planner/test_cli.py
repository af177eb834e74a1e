"""pilot plan / submit / demo as a user meets them: the shared --cluster default, the summary, the demo."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from pilot.cli import demo
from pilot.cli.main import main as pilot
from pilot.planner.clustering import DEFAULT_CLUSTER
from tests.planner.wf import api, transformations, write

REPO = Path(__file__).resolve().parents[2]


def help_text(capsys, *args: str) -> str:
    with pytest.raises(SystemExit) as exit_:
        pilot([*args, "--help"])
    assert exit_.value.code == 0
    return " ".join(capsys.readouterr().out.split()).replace("- ", "-")  # argparse wraps at hyphens


@pytest.mark.parametrize("command", ["plan", "submit"])
def test_plan_and_submit_show_one_default_for_cluster(capsys, command):
    text = help_text(capsys, command)
    assert f"(default: {DEFAULT_CLUSTER})" in text and "PMC-only mode" in text


def two_jobs(tmp_path: Path) -> dict[str, str]:
    wf = api.Workflow("two", infer_dependencies=False)
    a, b = api.Job("T", _id="a"), api.Job("T", _id="b")
    wf.add_jobs(a, b)
    wf.add_dependency(a, children=[b])
    return write(tmp_path, wf, transformations("local", {"T": "/bin/echo"}))


def test_plan_without_cluster_makes_one_batch_job_and_counts_in_words(tmp_path, capsys):
    paths = two_jobs(tmp_path)
    code = pilot(["plan", paths["workflow"], "--site", "local", "--tc", paths["tc"], "--dir", str(tmp_path / "s")])
    out = capsys.readouterr().out
    assert code == 0 and re.search(r"^merge_two\s+whole\s+4\s", out, re.M)  # with its create-dir and cleanup
    assert "4 tasks (2 of them data jobs) in 1 cluster, written to" in out
    code = pilot(
        [
            "plan",
            paths["workflow"],
            "--site",
            "local",
            "--tc",
            paths["tc"],
            "--dir",
            str(tmp_path / "n"),
            "--cluster",
            "none",
        ]
    )
    assert code == 0 and "4 tasks (2 of them data jobs) in 4 clusters," in capsys.readouterr().out


def test_unknown_cluster_technique_is_exit_2(tmp_path, capsys):
    paths = two_jobs(tmp_path)
    code = pilot(["plan", paths["workflow"], "--site", "local", "--tc", paths["tc"], "--cluster", "vertical"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "unknown clustering technique 'vertical'" in err


def test_demo_help_is_plain_text_and_defaults_to_local(capsys):
    text = help_text(capsys, "demo")
    assert "``" not in text and ":ref:" not in text
    assert "default: local" in text


def test_demo_workflow_ships_with_the_package(tmp_path):
    """The demo's workflow is found beside the package, not in the current directory."""
    path = Path(demo.bundled_workflow())
    assert path.is_file() and path.read_bytes() == (REPO / "examples" / "diamond.yml").read_bytes()
    pyproject = (REPO / "pyproject.toml").read_text()
    assert 'pilot = ["examples/diamond.yml", "examples/f.a"]' in pyproject  # f.a: its input, from its replica catalog


@pytest.mark.mpi
def test_demo_runs_from_any_directory_after_pip_install(tmp_path):
    """Build the wheel, install it into a directory of its own, run pilot demo --site local elsewhere."""
    source = tmp_path / "source"  # pip builds in the tree it is given: a copy keeps the checkout clean
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    for name in filter(None, tracked.decode().split("\0")):
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, source / name, follow_symlinks=False)
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(source)],
        check=True,
        capture_output=True,
    )
    wheel = next(wheels.glob("pilot_hpc-*.whl"))
    assert "pilot/examples/diamond.yml" in zipfile.ZipFile(wheel).namelist()
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = dict(os.environ, PYTHONPATH=str(target))
    res = subprocess.run(
        [sys.executable, "-m", "pilot", "demo", "--site", "local", "--dir", str(tmp_path / "submit")],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert str(target / "pilot" / "examples" / "diamond.yml") in res.stdout
    assert "13 tasks (9 of them data jobs) in 12 clusters" in res.stdout
    assert f"The run is in {tmp_path / 'submit'}; its outputs are in {tmp_path / 'wf-output'}" in res.stdout
    assert list(elsewhere.iterdir()) == []
    # the example's input came from its replica catalog, beside the installed workflow; its output was staged out
    assert (tmp_path / "wf-output" / "f.d").read_text().count("\n") == 8


def test_submit_directory_that_cannot_be_written_is_exit_2(tmp_path, capsys):
    paths = two_jobs(tmp_path)
    blocker = tmp_path / "afile"
    blocker.write_text("")
    for where, expected in (
        (blocker, f"{blocker}: not a directory; choose another --dir"),
        (blocker / "sub", f"{blocker / 'sub'}: cannot write the plan: Not a directory; choose another --dir"),
    ):
        code = pilot(["plan", paths["workflow"], "--site", "local", "--tc", paths["tc"], "--dir", str(where)])
        assert code == 2 and capsys.readouterr().err.strip() == expected


def test_demo_on_local_without_mpiexec_says_how_to_get_one(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sys, "executable", str(tmp_path / "bin" / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    code = pilot(["demo", "--dir", str(tmp_path / "submit")])
    err = capsys.readouterr().err
    assert code == 2 and "no mpiexec next to" in err and "pip install 'pilot-hpc[mpich]'" in err
    assert not (tmp_path / "submit").exists()


def without_pegasus_wms(where: Path) -> Path:
    """A PYTHONPATH entry whose Pegasus package holds only what pilot-hpc installs (pegasus-wms.worker and its
    dependencies, for pegasus-transfer), as on a machine where pegasus-wms itself is not installed."""
    from importlib import metadata

    for dist in ("pegasus-wms.worker", "pegasus-wms.common", "pegasus-wms.api"):
        for file in metadata.files(dist) or []:
            name = str(file)
            if name.startswith("Pegasus/") and "__pycache__" not in name and name != "Pegasus/__init__.py":
                link = where / name
                link.parent.mkdir(parents=True, exist_ok=True)
                if not link.exists():
                    link.symlink_to(file.locate())
    # Not the distributions' own __init__, which extends the package's path over every Pegasus directory of
    # sys.path, this environment's whole pegasus-wms included.
    (where / "Pegasus" / "__init__.py").write_text("")
    return where


def test_demo_without_pegasus_wms_skips_the_monitoring_step_and_exits_0(tmp_path):
    shim = without_pegasus_wms(tmp_path / "shim")
    env = dict(os.environ, PYTHONPATH=str(shim))
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "from pilot.submit.monitord import pegasus_cli; "
            "print(pegasus_cli('pegasus-statistics'), pegasus_cli('pegasus-transfer') is not None)",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert probe.stdout.split() == ["None", "True"]
    res = subprocess.run(
        [sys.executable, "-m", "pilot", "demo", "--dir", str(tmp_path / "submit")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert (
        "(monitoring step skipped: pegasus-wms is not installed; pip install 'pegasus-wms==5.1.*' for "
        "pegasus-status and pegasus-statistics on the run)"
    ) in res.stdout
    assert "Success" in res.stdout


def tx_on(site: str, tmp_path: Path) -> dict[str, str]:
    """two_jobs, with its transformation catalogued only at the Pegasus site ``site``."""
    wf = api.Workflow("two", infer_dependencies=False)
    a, b = api.Job("T", _id="a"), api.Job("T", _id="b")
    wf.add_jobs(a, b)
    wf.add_dependency(a, children=[b])
    return write(tmp_path, wf, transformations(site, {"T": "/bin/echo"}))


@pytest.mark.parametrize(
    "spelling", [["--sites", "condorpool"], ["-s", "condorpool"], ["--set", "pegasus_site=condorpool"]]
)
def test_pegasus_plan_sites_names_the_catalogs_execution_site(tmp_path, capsys, spelling):
    paths = tx_on("condorpool", tmp_path)
    code = pilot(
        ["plan", paths["workflow"], "--site", "local", "--tc", paths["tc"], "--dir", str(tmp_path / "s"), *spelling]
    )
    assert code == 0, capsys.readouterr().err
    dag = (tmp_path / "s" / "merge_two" / "merge_two.dag").read_text()
    assert "cleanup_two_0_condorpool" in dag  # the workflow's directory is made and removed on that site


def test_without_sites_a_transformation_of_another_site_is_exit_2(tmp_path, capsys):
    paths = tx_on("condorpool", tmp_path)
    code = pilot(["plan", paths["workflow"], "--site", "local", "--tc", paths["tc"], "--dir", str(tmp_path / "s")])
    assert code == 2 and "no entry for site 'local'" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["plan", "submit"])
def test_sites_takes_one_site_as_a_usage_error(tmp_path, capsys, command):
    paths = tx_on("condorpool", tmp_path)
    code = pilot([command, paths["workflow"], "--site", "local", "--tc", paths["tc"], "--sites", "condorpool,other"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "pilot plans for one execution site" in err


@pytest.mark.parametrize("command", ["plan", "submit"])
@pytest.mark.parametrize("spelling", ["--output-sites", "--output-site", "-o"])
def test_pegasus_plan_output_site_spellings(command, spelling):
    from pilot.cli import plan, submit

    parser = plan.build_parser() if command == "plan" else submit.build_parser()
    ns = parser.parse_args(["wf.yml", "--site", "local", spelling, "none", "--sites", "condorpool"])
    assert ns.output_sites == "none" and ns.set == ["pegasus_site=condorpool"]


@pytest.mark.parametrize(
    "spelling", [["-D", "pegasus.clusterer.label.key=group"], ["-Dpegasus.clusterer.label.key=group"]]
)
def test_pegasus_plan_dash_d_sets_a_property_over_the_conf_file(tmp_path, capsys, spelling):
    paths = tx_on("local", tmp_path)
    conf = tmp_path / "pegasus.properties"
    conf.write_text("pegasus.clusterer.label.key = label\npegasus.mode = development\n")
    code = pilot(
        [
            "plan",
            paths["workflow"],
            "--site",
            "local",
            "--tc",
            paths["tc"],
            "--conf",
            str(conf),
            "--dir",
            str(tmp_path / "s"),
            *spelling,
        ]
    )
    assert code == 0, capsys.readouterr().err
    kept = (tmp_path / "s" / "pegasus.properties").read_text()  # what the plan ran with, sub-workflows included
    assert "pegasus.clusterer.label.key = group\n" in kept and "pegasus.mode = development\n" in kept


@pytest.mark.parametrize(
    "pair, said",
    [
        ("pegasus.clusterer.preference=Size", "-D pegasus.clusterer.preference=Size: "),
        ("nokey", "-D nokey: expected -D key=value"),
        ("pegasus.x=${PILOT_UNSET_VARIABLE}", "PILOT_UNSET_VARIABLE"),
    ],
)
def test_a_bad_dash_d_is_one_line_naming_it(tmp_path, capsys, pair, said):
    paths = tx_on("local", tmp_path)
    code = pilot(
        ["plan", paths["workflow"], "--site", "local", "--tc", paths["tc"], "--dir", str(tmp_path / "s"), "-D", pair]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and said in err, err
