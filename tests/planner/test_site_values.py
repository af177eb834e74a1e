"""No value of a site config runs a command or adds a line to a batch script: each is quoted for the script, or
refused in one line naming the key.

Every text key of a site config that reaches a batch script (directives, the launcher's and pilot's options and
command, the site's name for Pegasus, its shared scratch, its description) gets shell metacharacters, quotes,
newlines, NUL and bytes that are not UTF-8, as ``pilot submit --set`` gives them. A plan that is accepted writes
scripts with as many lines as the plan of the site's own values (and so its .sub files and DAGs), and the scripts, run for real by bash with
``srun``/``mpiexec``/``pilot`` standing in on PATH (each records its arguments and exits 0), make no marker file.
``worker_init`` is left out on purpose: its lines are shell the site's author writes for the job to run.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from pilot.errors import ConfigError, PilotError
from pilot.planner.plan import PlanRequest, plan
from pilot.sites import load_site

SITE = "perlmutter-cpu"  # Slurm, srun, directives of every kind
KEYS = (
    "description",
    "launcher_options",
    "partition",
    "queue",
    "account",
    "qos",
    "constraint",
    "pilot_command",
    "pilot_options",
    "pegasus_site",
    "shared_scratch",
)
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
    "\n#SBATCH --x",
    "#",
    "&",
    "|",
    "*",
    "a",
    "--",
]
_TEXT = st.lists(st.sampled_from(HOSTILE) | st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=5).map(
    "".join
)
FUZZ = settings(max_examples=150, deadline=None, database=None, suppress_health_check=list(HealthCheck))

WORKFLOW = """\
pegasus: "5.0.4"
name: sv
jobs:
  - {type: job, name: "true", id: a, arguments: []}
  - {type: job, name: "true", id: b, arguments: []}
jobDependencies:
  - {id: a, children: [b]}
transformationCatalog:
  transformations:
    - name: "true"
      sites: [{name: perlmutter-cpu, pfn: /bin/true, type: installed}]
"""

STUB = '#!/bin/sh\nprintf \'%s\\n\' "$0" "$@" >> "$STUB_LOG"\nexit 0\n'


def plan_with(tmp: Path, overrides: dict[str, str]) -> Path:
    wf = tmp / "sv.yml"
    wf.write_text(WORKFLOW)
    site = load_site(SITE, overrides)
    result = plan(PlanRequest(workflow=str(wf), site=site, cluster=["label"], submit_dir=str(tmp / "submit")))
    return Path(result.submit_dir)


def scripts(submit_dir: Path) -> list[Path]:
    return sorted(p for p in submit_dir.rglob("*.slurm") if p.is_file())


def run_scripts(submit_dir: Path, tmp: Path) -> None:
    """Each batch script, run by bash as the batch system would, with the launcher and pilot standing in."""
    stubs = tmp / "stubs"
    stubs.mkdir(exist_ok=True)
    for name in ("srun", "mpiexec", "pilot", "sbatch", "module"):
        path = stubs / name
        path.write_text(STUB)
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    env = {
        "PATH": f"{stubs}:/usr/bin:/bin",
        "HOME": str(tmp),
        "STUB_LOG": str(tmp / "stub.log"),
        "SLURM_JOB_ID": "1",
        "SLURM_NNODES": "1",
        "SLURM_JOB_NODELIST": "localhost",
    }
    for script in scripts(submit_dir):
        subprocess.run(
            ["bash", str(script)], cwd=script.parent, env=env, capture_output=True, timeout=60, stdin=subprocess.DEVNULL
        )


def line_counts(submit_dir: Path) -> list[tuple[str, int]]:
    """Lines of each batch script, .sub file and DAG, by file name."""
    written = [p for p in submit_dir.rglob("*") if p.suffix in (".slurm", ".sub", ".dag") and p.is_file()]
    return sorted((p.name, p.read_bytes().count(b"\n") + p.read_bytes().count(b"\r")) for p in written)


# A plain value of each key: the plan that a hostile value's must match, line for line.
PLAIN = {
    "description": "d",
    "launcher_options": "-c 2",
    "partition": "p1",
    "queue": "q1",
    "account": "a1",
    "qos": "q1",
    "constraint": "c1",
    "pilot_command": "pilot",
    "pilot_options": "--keep-affinity",
    "pegasus_site": SITE,
    "shared_scratch": "/tmp/scratch",
}


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    counts = {}
    for key, value in PLAIN.items():
        tmp = tmp_path_factory.mktemp(f"plain-{key}")
        submit_dir = plan_with(tmp, {key: value})
        run_scripts(submit_dir, tmp)
        assert (tmp / "stub.log").read_text().count("srun") >= 1  # the scripts ran as far as the launcher
        counts[key] = line_counts(submit_dir)
    return counts


@FUZZ
@given(key=st.sampled_from(KEYS), value=_TEXT)
def test_any_site_value_is_quoted_in_the_script_or_refused(tmp_path_factory, plain, key, value):
    tmp = tmp_path_factory.mktemp("sv")
    try:
        submit_dir = plan_with(tmp, {key: value})
    except (ConfigError, PilotError) as exc:
        event(f"refused {key}")
        assert "\n" not in str(exc).strip() and "\r" not in str(exc), str(exc)  # one line
        return
    event(f"planned {key}")
    assert line_counts(submit_dir) == plain[key], (key, value)
    run_scripts(submit_dir, tmp)
    assert not list(tmp.rglob("PWNED")), (key, value)
    assert not os.path.exists("PWNED")


@pytest.mark.parametrize("key", KEYS)
def test_a_command_in_each_site_value_does_not_run(tmp_path, plain, key):
    value = "x$(touch PWNED)`touch PWNED`;touch PWNED"
    try:
        submit_dir = plan_with(tmp_path, {key: value})
    except (ConfigError, PilotError) as exc:
        assert key in str(exc) and "\n" not in str(exc).strip()
        return
    run_scripts(submit_dir, tmp_path)
    assert not list(tmp_path.rglob("PWNED")), key
