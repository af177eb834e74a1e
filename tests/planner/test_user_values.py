"""No value a user writes runs a command or adds a line to a generated file: it is planned as the same one value,
or refused in one line naming the field.

A workflow that moves a file (an input from the replica catalog, an output staged out and registered, cleanup)
gets shell metacharacters (``$(touch PWNED)``, backticks, ``;``, quotes, backslashes), newlines, NUL and bytes
that are not UTF-8 in one field at a time: its input and output lfns, the replica's pfn, the site catalog's
scratch and storage directories, the site's name (and the selector profile that picks it), a job argument, the
transformation's name and pfn, an env profile, request_memory (as a profile and as a property), a property value
and the submit directory's name. A plan that is accepted has, in every .dag, .sh, .sub and data job input
(pegasus-transfer's JSON, the registration's map), as many lines as the plan of the plain values, its DAGs read
back with the same tasks, and every transfer URL one that pegasus-transfer's shell commands quote whole. The CLI
refuses in one line, exit 2, no traceback. tests/integration/test_user_values_run.py runs accepted values for real.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from pilot.dag import read_dag
from pilot.errors import ConfigError, PilotError
from pilot.planner.plan import PlanRequest, plan
from pilot.sites import load_site
from pilot.util import safetext

FUZZ = settings(max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck))
# What shells, DAG records, .sub lines and pegasus-transfer's quoting read, and a few of anything.
HOSTILE = [
    "$(touch PWNED)",
    "`touch PWNED`",
    ";touch PWNED;",
    "'",
    '"',
    "\\",
    "\n",
    "\r",
    "\0",
    "\udcff",
    " ",
    "$HOME",
    "${X}",
    "\nTASK x /bin/true",
    "\n+evil = 1",
    "#",
    "&",
    "|",
    "*",
    "a",
]
_PIECE = st.sampled_from(HOSTILE) | st.characters(blacklist_categories=("Cs",))
_TEXT = st.lists(_PIECE, min_size=1, max_size=5).map("".join)

PLAIN = {
    "lfn_in": "f.a",
    "lfn_out": "f.b",
    "pfn": "f.a",
    "scratch": "scratch",
    "storage": "output",
    "site": "local",
    "arg": "-n",
    "tx": "cat",
    "tx_pfn": "/bin/cat",
    "env": "v",
    "memory": "100",
    "prop_memory": "100",
    "threads": "2",
    "dir": "submit",
}
FIELDS = tuple(PLAIN)


def write_inputs(tmp: Path, v: dict[str, str]) -> tuple[Path, Path]:
    """The workflow (inline catalogs) and its properties; the input's replica is written where its pfn says."""
    inputs = tmp / "input"
    inputs.mkdir(exist_ok=True)
    pfn = inputs / v["pfn"]
    try:
        pfn.write_text("hello\n")
    except (OSError, ValueError):
        pass  # a name no file system takes: planning is what is tested here
    site = v["site"]
    directory = {"sharedScratch": tmp / v["scratch"], "localStorage": tmp / v["storage"]}
    data = {
        "pegasus": "5.0.4",
        "name": "uv",
        "siteCatalog": {
            "sites": [
                {
                    "name": site,
                    "directories": [
                        {
                            "type": kind,
                            "path": str(path),
                            "fileServers": [{"url": f"file://{path}", "operation": "all"}],
                        }
                        for kind, path in directory.items()
                    ],
                }
            ]
        },
        "replicaCatalog": {"replicas": [{"lfn": v["lfn_in"], "pfns": [{"site": site, "pfn": str(pfn)}]}]},
        "transformationCatalog": {
            "transformations": [{"name": v["tx"], "sites": [{"name": site, "pfn": v["tx_pfn"], "type": "installed"}]}]
        },
        "jobs": [
            {
                "type": "job",
                "name": v["tx"],
                "id": "j1",
                "arguments": [v["arg"], v["lfn_in"]],
                "stdout": v["lfn_out"],
                "uses": [
                    {"lfn": v["lfn_in"], "type": "input"},
                    {"lfn": v["lfn_out"], "type": "output", "stageOut": True, "registerReplica": True},
                ],
                "profiles": {
                    "env": {"UV": v["env"]},
                    "selector": {"execution.site": site},
                    **({"condor": {"request_memory": v["memory"]}} if v["memory"] else {}),
                },
            }
        ],
        "jobDependencies": [],
    }
    wf = tmp / "uv.yml"
    wf.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8", errors="surrogateescape")
    conf = tmp / "pegasus.properties"
    conf.write_text(
        f"pegasus.transfer.threads = {v['threads']}\ncondor.request_memory = {v['prop_memory']}\n",
        encoding="utf-8",
        errors="surrogateescape",
    )
    return wf, conf


def plan_one(tmp: Path, v: dict[str, str]):
    wf, conf = write_inputs(tmp, v)
    site = load_site("local", {"pegasus_site": v["site"]}) if v["site"] != "local" else load_site("local")
    return plan(
        PlanRequest(workflow=str(wf), site=site, cluster=["none"], conf=str(conf), submit_dir=str(tmp / v["dir"]))
    )


GENERATED = (".dag", ".sh", ".sub", ".in")


def line_counts(submit_dir: Path) -> list[int]:
    """Lines of every generated file, by kind, sorted (file names carry the site's and the directory's names)."""
    out = []
    for path in submit_dir.rglob("*"):
        if path.suffix in GENERATED and path.is_file():
            out.append((path.suffix, path.read_bytes().count(b"\n") + path.read_bytes().count(b"\r")))
    return sorted(out)


def transfer_urls(submit_dir: Path) -> list[str]:
    urls = []
    for path in submit_dir.rglob("*.in"):
        text = path.read_text()
        if not text.startswith("["):
            continue  # a registration's map lines
        for entry in json.loads(text):
            targets = [entry["target"]] if "target" in entry else [*entry["src_urls"], *entry["dest_urls"]]
            urls += [t["url"] for t in targets]
    return urls


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("plain")
    result = plan_one(tmp, PLAIN)
    return line_counts(Path(result.submit_dir)), {e.cluster.name: len(read_dag(e.dag).tasks) for e in result.emitted}


def test_the_plain_values_move_a_file(plain):
    counts, tasks = plain
    assert sum(tasks.values()) > 3  # the job and its create-dir, stage-in, stage-out, registration, cleanup
    assert (".in", 1) in counts  # a data job's input, one JSON line


@FUZZ
@given(field=st.sampled_from(FIELDS), value=_TEXT)
def test_any_value_is_one_value_in_the_written_files_or_refused(tmp_path_factory, plain, field, value):
    v = {**PLAIN, field: value}
    tmp = tmp_path_factory.mktemp("uv")
    try:
        result = plan_one(tmp, v)
    except (ConfigError, PilotError) as exc:
        event("refused")
        assert "\n" not in str(exc).strip() and "\r" not in str(exc)  # one line
        return
    event("planned")
    submit_dir = Path(result.submit_dir)
    counts, tasks = plain
    assert line_counts(submit_dir) == counts
    assert sorted(len(read_dag(e.dag).tasks) for e in result.emitted) == sorted(tasks.values())
    for url in transfer_urls(submit_dir):
        assert safetext.problem_transfer_url(url) is None, url
    assert not list(tmp.rglob("PWNED"))


# One per reader the values go to: pegasus-transfer (lfn, directory), a .sub line (site), a DAG record (argument),
# a batch directive (memory).
REFUSED = [
    ("lfn_in", "in'$(touch PWNED)'x", "uses[0].lfn"),
    ("scratch", "scr'$(touch PWNED)'x", "directories[0]"),
    ("storage", "out'x", "directories[1]"),
    ("site", "local\n+evil = 1", "sites[0].name"),
    ("arg", "a\nTASK x /bin/true", "arguments"),
    ("memory", "inf", "request_memory"),
    ("memory", "-5", "request_memory"),
    ("prop_memory", "1e400", "request_memory"),
    ("lfn_out", "out$HOME", "uses[1].lfn"),
    ("scratch", "scr\nx", "directories[0]"),
]


@pytest.mark.parametrize("field,value,named", REFUSED)
def test_the_cli_refuses_in_one_line_naming_the_field(tmp_path, field, value, named):
    v = {**PLAIN, field: value, **({"memory": ""} if field == "prop_memory" else {})}  # the job's own would win
    wf, conf = write_inputs(tmp_path, v)
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "pilot",
            "plan",
            "--site",
            "local",
            "--cluster",
            "none",
            str(wf),
            "--conf",
            str(conf),
            "--dir",
            str(tmp_path / "submit"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert res.returncode == 2, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr, res.stderr
    assert named in res.stderr
    assert not list(tmp_path.rglob("PWNED"))


def test_a_submit_directory_with_a_quote_is_refused(tmp_path):
    """The workflow's directory is named after the submit directory, and pegasus-transfer makes it."""
    wf, conf = write_inputs(tmp_path, PLAIN)
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "pilot",
            "plan",
            "--site",
            "local",
            str(wf),
            "--conf",
            str(conf),
            "--dir",
            str(tmp_path / "sub'$(touch PWNED)'"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert "workflow's directory" in res.stderr
    assert not list(tmp_path.rglob("PWNED"))
    assert os.path.exists(tmp_path / "uv.yml")


def test_a_submit_directory_ending_in_a_blank_is_refused(tmp_path):
    """Every task's ``#pilot cwd=`` line names the workflow's directory, and a line's reader strips its end: the
    tasks would run in another directory."""
    wf, conf = write_inputs(tmp_path, PLAIN)
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "pilot",
            "plan",
            "--site",
            "local",
            str(wf),
            "--conf",
            str(conf),
            "--dir",
            str(tmp_path / "sd "),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert "ends with a blank" in res.stderr


@pytest.mark.parametrize("task_id", ["'A '", "' A'", "''"])
def test_a_pmc_task_id_with_blanks_at_its_ends_is_refused_where_the_dag_is_read(tmp_path, task_id):
    """The rescue log's ``DONE <task>`` line would not give such an id back, and the rerun would fail."""
    dag = tmp_path / "blank.dag"
    dag.write_text(f"TASK {task_id} /bin/true\n")
    res = subprocess.run(
        [sys.executable, "-m", "pilot", "plan", "--site", "local", str(dag), "--dir", str(tmp_path / "sub")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert res.stderr.startswith(f"{dag}:1: task id")


@pytest.mark.parametrize("name", ["sub\nx", "sub\udcff"])
def test_a_submit_directory_no_line_can_hold_is_refused(tmp_path, name):
    """Its path is a line of every .sub file and batch script (a PMC .dag plan has no workflow directory)."""
    dag = tmp_path / "ok.dag"
    dag.write_text("TASK a /bin/true\n")
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "pilot",
            "plan",
            "--site",
            "local",
            str(dag),
            "--dir",
            os.fsencode(str(tmp_path / name)),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert res.stderr.startswith("pilot plan: --dir ")
