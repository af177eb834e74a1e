"""``${NAME}`` in the catalogs and properties is the environment variable, as Pegasus expands it; ``$NAME`` is left
as written (Pegasus' rule); an unset variable is one line naming it and where it is written."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pilot.dag import read_dag
from tests.planner.data_wf import data_workflow


def plan_cli(tmp_path: Path, paths: dict, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pilot",
            "plan",
            paths["workflow"],
            "--conf",
            paths["conf"],
            "--site",
            "local",
            "--dir",
            str(tmp_path / "s"),
            "--cluster",
            "none",
            *extra,
        ],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
    )


def templated(tmp_path: Path, props: dict | None = None) -> dict:
    """The data example with its site catalog's directories, its replica and its executable under ${WF_BASE}."""
    paths = data_workflow(tmp_path, props=props)
    text = Path(paths["workflow"]).read_text().replace(str(tmp_path), "${WF_BASE}")
    doc = yaml.safe_load(text)
    doc["siteCatalog"]["sites"][0]["profiles"] = {"env": {"WF_DATA": "${WF_BASE}/input"}}
    Path(paths["workflow"]).write_text(yaml.safe_dump(doc))
    assert "${WF_BASE}/scratch" in Path(paths["workflow"]).read_text()
    return paths


def test_catalog_paths_and_profiles_are_expanded_from_the_environment(tmp_path):
    paths = templated(tmp_path)
    out = plan_cli(tmp_path, paths, {"WF_BASE": str(tmp_path)})
    assert out.returncode == 0, out.stderr
    dags = "".join(p.read_text() for p in (tmp_path / "s").rglob("*.dag"))
    assert "${WF_BASE}" not in dags and f"{tmp_path}/scratch/" in dags
    assert f"WF_DATA={tmp_path}/input" in dags  # the env profile
    assert f"{tmp_path}/input/f.a" in "".join(p.read_text() for p in (tmp_path / "s").rglob("*.in"))  # the replica


@pytest.mark.parametrize("where", ["scratch", "replica", "pfn", "env", "property"])
def test_an_unset_variable_is_one_line_naming_it_and_the_place(tmp_path, where):
    paths = data_workflow(tmp_path)
    doc = yaml.safe_load(Path(paths["workflow"]).read_text())
    site = doc["siteCatalog"]["sites"][0]
    if where == "scratch":
        site["directories"][0]["path"] = "${PILOT_TEST_UNSET}/scratch"
        place = "siteCatalog.sites[0].directories[0].path"
    elif where == "replica":
        doc["replicaCatalog"]["replicas"][0]["pfns"][0]["pfn"] = "${PILOT_TEST_UNSET}/f.a"
        place = "replicaCatalog.replicas[0].pfns[0].pfn"
    elif where == "pfn":
        doc["transformationCatalog"]["transformations"][0]["sites"][0]["pfn"] = "${PILOT_TEST_UNSET}/cp"
        place = "transformationCatalog.transformations[0].sites[0].pfn"
    elif where == "env":
        site["profiles"] = {"env": {"X": "${PILOT_TEST_UNSET}"}}
        place = "siteCatalog.sites[0].profiles.env.X"
    else:
        Path(paths["conf"]).write_text(
            Path(paths["conf"]).read_text() + "pegasus.transfer.threads = ${PILOT_TEST_UNSET}\n"
        )
        place = "pegasus.properties:"
    Path(paths["workflow"]).write_text(yaml.safe_dump(doc))
    out = plan_cli(tmp_path, paths, {})
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert place in out.stderr and "${PILOT_TEST_UNSET} is not set in the environment" in out.stderr, out.stderr
    assert not (tmp_path / "s").exists()


def test_a_home_scratch_plans_and_a_bare_dollar_name_is_left_as_pegasus_leaves_it(tmp_path):
    paths = data_workflow(tmp_path)
    doc = yaml.safe_load(Path(paths["workflow"]).read_text())
    home = tmp_path / "home"
    doc["siteCatalog"]["sites"][0]["directories"][0] = {
        "type": "sharedScratch",
        "path": "${HOME}/scratch",
        "fileServers": [{"url": "file://${HOME}/scratch", "operation": "all"}],
    }
    Path(paths["workflow"]).write_text(yaml.safe_dump(doc))
    out = plan_cli(tmp_path, paths, {"HOME": str(home)})
    assert out.returncode == 0, out.stderr
    assert f"{home}/scratch/" in "".join(p.read_text() for p in (tmp_path / "s").rglob("*.dag"))
    doc["siteCatalog"]["sites"][0]["directories"][0]["path"] = "$HOME/scratch"
    doc["siteCatalog"]["sites"][0]["directories"][0]["fileServers"][0]["url"] = "file://$HOME/scratch"
    Path(paths["workflow"]).write_text(yaml.safe_dump(doc))
    shutil.rmtree(tmp_path / "s")
    out = plan_cli(tmp_path, paths, {"HOME": str(home)})
    assert out.returncode == 2 and "$HOME" in out.stderr and out.stderr.count("\n") == 1, out.stderr


def test_a_property_value_is_expanded(tmp_path):
    paths = data_workflow(tmp_path, props={"pegasus.transfer.threads": "${WF_THREADS}"})
    out = plan_cli(tmp_path, paths, {"WF_THREADS": "7"})
    assert out.returncode == 0, out.stderr
    (task,) = read_dag(str(next((tmp_path / "s").rglob("stage_in_*.dag")))).tasks.values()
    assert "--threads 7" in " ".join(task.argv)
