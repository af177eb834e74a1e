"""Jobs of one transformation share its environment and TASK head only when they have no profiles of their own."""

from __future__ import annotations

from pathlib import Path

from pilot.planner.plan import PlanRequest, plan
from pilot.sites import load_site
from tests.planner.wf import api, transformations, write


def test_a_job_with_profiles_of_its_own_gets_its_own_task_head_and_environment(tmp_path):
    wf = api.Workflow("shared")
    plain_first = api.Job("tool", _id="a").add_args("a")
    asks = api.Job("tool", _id="b").add_args("b")
    asks.add_profiles(api.Namespace.PEGASUS, key="pmc_request_memory", value=64)
    env = api.Job("tool", _id="d").add_args("d").add_env(X="1")
    plain_after = api.Job("tool", _id="c").add_args("c")
    other = api.Job("other", _id="e").add_args("e")
    wf.add_jobs(plain_first, asks, env, plain_after, other)
    tc = transformations("local", {"tool": "/bin/tool", "other": "/bin/other"}, profiles={"tool": {"runtime": "5"}})
    paths = write(tmp_path, wf, tc)
    result = plan(
        PlanRequest(
            workflow=paths["workflow"],
            site=load_site("local"),
            cluster=["whole"],
            submit_dir=str(tmp_path / "submit"),
            tc=paths["tc"],
            cleanup="none",
        )
    )
    lines = Path(result.emitted[0].dag).read_text().splitlines()
    tasks = lines[lines.index("#@ 2 tool a") : lines.index("EDGE create_dir_shared_0_local tool_a")]
    assert tasks == [
        "#@ 2 tool a",
        "#pilot runtime=5",
        "TASK tool_a /bin/tool a",
        "#@ 3 tool b",
        "#pilot runtime=5",
        "TASK tool_b -m 64 /bin/tool b",
        "#pilot env X=1",
        "#@ 4 tool d",
        "#pilot runtime=5",
        "TASK tool_d /bin/tool d",
        "#pilot env",
        "#@ 5 tool c",
        "#pilot runtime=5",
        "TASK tool_c /bin/tool c",
        "#@ 6 other e",
        "TASK other_e /bin/other e",
    ]
