"""Fuzzing the planner's writers: any string in any field a user writes reaches the generated files as the same
single value, or the plan is refused in one line; never a second task, a second directive or a broken line.

A workflow as Pegasus.api writes it gets arbitrary text in one field at a time: its job's id, name, namespace,
version, arguments, env profile, metadata key and value, stdout and stderr files, the executable's pfn, the
workflow's shell hook; or the site's account, worker_init, qos, constraint, launcher and pilot options,
scheduler_options. It is planned for a Slurm site, and the files are read back with the real readers: the
cluster DAG (one TASK per job, the argument words as Pegasus passes them, the env value itself), the batch
script (the directives of a plain plan, and of scheduler_options, no more), the notifications file (one
hook line), the .sub and static.bp files (no line that is not one of theirs).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from pilot.dag import read_dag
from pilot.dag.lexer import split_args
from pilot.errors import ConfigError, PilotError
from pilot.planner.plan import PlanRequest, plan
from pilot.sites import load_site

FUZZ = settings(max_examples=100, deadline=None, database=None, suppress_health_check=list(HealthCheck))
# What breaks lines, quotes, directives and shells, and a few of anything.
_PIECE = st.sampled_from(
    list(" \t\n\r\0'\"\\#@$`;=-/.:") + ["\nTASK x /bin/true", "\n#SBATCH --x", "ab"]
) | st.characters(blacklist_categories=("Cs",))
_TEXT = st.lists(_PIECE, max_size=8).map("".join)


def workflow(tmp: Path, v: dict[str, str], args: list[str]) -> Path:
    data = {
        "pegasus": "5.0.4",
        "name": "fz",
        "hooks": {"shell": [{"_on": "end", "cmd": v["hook"]}]},
        "transformationCatalog": {
            "transformations": [
                {
                    "namespace": v["namespace"],
                    "name": v["name"],
                    "version": v["version"],
                    "sites": [{"name": "local", "pfn": v["pfn"], "type": "installed"}],
                }
            ]
        },
        "jobs": [
            {
                "type": "job",
                "namespace": v["namespace"],
                "name": v["name"],
                "version": v["version"],
                "id": v["id"],
                "arguments": args,
                "uses": [],
                "profiles": {"env": {"FZ": v["env"]}},
                "metadata": {v["meta_key"]: v["meta"]},
                "stdout": v["stdout"],
                "stderr": v["stderr"],
            }
        ],
        "jobDependencies": [],
    }
    path = tmp / "fz.yml"
    path.write_text(yaml.safe_dump(data))
    return path


def directives(script: str) -> list[str]:
    return [(line.split()[1:] or [""])[0].split("=")[0] for line in script.split("\n") if line.startswith("#SBATCH")]


# Workflow fields, then site keys (written into the batch script and the .sub).
PLAIN = {
    "arg": "-i in.txt",
    "env": "v",
    "meta": "m",
    "meta_key": "k",
    "stdout": "o.txt",
    "stderr": "e.txt",
    "namespace": "ns",
    "name": "echo",
    "version": "1.0",
    "id": "J1",
    "pfn": "/bin/echo",
    "hook": "echo done",
    "account": "m1234",
    "worker_init": "module load python",
    "qos": "regular",
    "constraint": "cpu",
    "launcher_options": "--cpu-bind=cores",
    "pilot_options": "--max-wall-time 10",
    "scheduler_options": "#SBATCH --mail-type=END",
}
FIELDS = tuple(PLAIN)
SITE_KEYS = ("account", "worker_init", "qos", "constraint", "launcher_options", "pilot_options", "scheduler_options")


def plan_one(tmp: Path, v: dict[str, str], args: list[str]):
    site = load_site("perlmutter-cpu", {"pegasus_site": "local", **{k: v[k] for k in SITE_KEYS}})
    return plan(
        PlanRequest(
            workflow=str(workflow(tmp, v, args)),
            site=site,
            cluster=["none"],
            submit_dir=str(tmp / "submit"),
            output_site=None,
            cleanup="none",
        )
    )


@pytest.fixture(scope="module")
def plain_directives(tmp_path_factory) -> list[str]:
    result = plan_one(tmp_path_factory.mktemp("plain"), PLAIN, [PLAIN["arg"]])
    return directives(Path(result.emitted[0].script).read_text())


@FUZZ
@given(field=st.sampled_from(FIELDS), value=_TEXT, more=st.lists(_TEXT, max_size=3))
def test_any_field_is_one_value_in_the_written_files_or_refused(tmp_path_factory, plain_directives, field, value, more):
    """One field at a time gets the text (the others plain, so the plan gets to the writers); an argument
    list gets a few more items."""
    v = {**PLAIN, field: value}
    args = [v["arg"], *more] if field == "arg" else [v["arg"]]
    tmp = tmp_path_factory.mktemp("fz")
    try:
        result = plan_one(tmp, v, args)
    except (ConfigError, PilotError):
        event("refused")  # refused in one line: the CLI tests check the line
        return
    event("planned")
    emitted = [e for e in result.emitted if e.cluster.jobs and e.cluster.jobs[0].id == v["id"]]
    assert len(emitted) == 1
    dag = read_dag(emitted[0].dag)
    tasks = list(dag.tasks.values())
    assert [t.name for t in tasks] == [f"{v['name']}_{v['id']}"]  # nothing became a second task
    task = tasks[0]
    assert task.argv == [
        v["pfn"],
        *split_args(" ".join(args)),
    ]  # the words Pegasus passes: the list joined, split as PMC
    assert dict(task.env or ()) == {"FZ": v["env"]}
    assert (task.stdio[1:] if task.stdio else ("", "")) == (v["stdout"], v["stderr"])  # "" is no file
    script = Path(emitted[0].script).read_text()
    expected = [*plain_directives]
    expected.remove(directives(PLAIN["scheduler_options"])[0])
    expected += directives(v["scheduler_options"])  # its own lines, each a whole #SBATCH line, and nothing more
    assert sorted(directives(script)) == sorted(expected)
    assert f"#SBATCH --account={v['account']}" in script or f"#SBATCH -A {v['account']}" in script
    lines = script.split("\n")  # as bash reads it
    assert (
        v["worker_init"].rstrip("\n") in lines
    )  # one line of the script, as written (a YAML block's last newline goes)
    notify = (Path(result.submit_dir) / "monitord.notify").read_text()
    assert notify.count("\n") == 1 and notify.startswith("WORKFLOW ") and notify.endswith(f" at_end {v['hook']}\n")
    # Lines as their readers see them (a text file's lines: \n, and \r for Python's universal newlines).
    for path in Path(result.submit_dir).rglob("*.sub"):
        text = path.read_text(errors="replace")
        assert "\r" not in text and all(
            line.startswith("#") or " = " in line or line == "queue" for line in text.rstrip("\n").split("\n")
        )
    for path in Path(result.submit_dir).rglob("*.static.bp"):
        text = path.read_text(errors="replace")
        assert "\r" not in text and all(line.startswith("ts=") for line in text.rstrip("\n").split("\n"))
