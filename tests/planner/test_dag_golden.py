"""The PMC DAG the planner writes for a cluster, compared byte for byte with a golden file.

The workflow has every kind of line the DAG writer makes: ``#@`` annotations,
TASK records with options and quoted arguments, ``#pilot`` cwd, env, runtime
and stdio notes, the planner's data jobs and EDGE records. Paths that depend on
the machine (the test's directory, this Python, pegasus-transfer) are replaced
by placeholders before the comparison.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pilot.planner.datalayout import transfer_command
from pilot.planner.plan import PlanRequest, plan
from pilot.sites import load_site
from tests.planner.wf import api, transformations, write

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "planned.dag"


def _workflow() -> api.Workflow:
    wf = api.Workflow("golden")
    raw, mid, out = api.File("raw.txt"), api.File("mid.txt"), api.File("out.txt")
    first = (
        api.Job("prepare", _id="p1")
        .add_args("-n", "'two words'", "it\\'s", raw)
        .add_outputs(mid)
        .set_stdin(raw)
        .set_stdout("prepare.log")
        .add_env(STAGE="first", EMPTY="")
    )
    first.add_profiles(api.Namespace.PEGASUS, key="runtime", value=30)
    first.add_profiles(api.Namespace.PEGASUS, key="pmc_request_memory", value=512)
    first.add_profiles(api.Namespace.PEGASUS, key="pmc_request_cpus", value=2)
    second = (
        api.Job("combine", _id="c1").add_args(mid, 'say "hi"').add_inputs(mid).add_outputs(out, register_replica=False)
    )
    second.add_profiles(api.Namespace.PEGASUS, key="pmc_priority", value=5)
    second.add_profiles(api.Namespace.PEGASUS, key="gpus", value=1)
    second.add_profiles(api.Namespace.PEGASUS, key="pmc_task_arguments", value="-t 3")
    second.add_profiles(api.Namespace.PEGASUS, key="runtime", value=1.5)
    third = api.Job("combine", _id="c2").add_args("--alone")
    wf.add_jobs(first, second, third)
    return wf


def _normalized(text: str, tmp_path: Path) -> str:
    transfer = transfer_command()
    if transfer is not None:
        text = text.replace(" ".join(transfer), "@TRANSFER@")
    return text.replace(str(tmp_path), "@TMP@").replace(sys.executable, "@PYTHON@")


def test_planned_cluster_dag_matches_the_golden_file(tmp_path, monkeypatch):
    monkeypatch.setattr("getpass.getuser", lambda: "someone")  # the scratch directory names the user
    (tmp_path / "raw.txt").write_text("raw\n")
    rc = api.ReplicaCatalog().add_replica("local", "raw.txt", str(tmp_path / "raw.txt"))
    paths = write(
        tmp_path, _workflow(), transformations("local", {"prepare": "/bin/prepare", "combine": "/opt/tools/combine"})
    )
    paths["rc"] = str(tmp_path / "replicas.yml")
    rc.write(paths["rc"])
    result = plan(
        PlanRequest(
            workflow=paths["workflow"],
            site=load_site("local"),
            cluster=["whole"],
            submit_dir=str(tmp_path / "submit"),
            tc=paths["tc"],
            replicas=paths["rc"],
        )
    )
    [emitted] = result.emitted
    assert _normalized(Path(emitted.dag).read_text(), tmp_path) == GOLDEN.read_text()
