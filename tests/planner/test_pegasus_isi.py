"""pilot plan takes the workflows pegasus-isi publishes as their generators write them, with no edit.

Each is planned, from a copy of its folder (its catalogs and pegasus.properties beside it), on pilot's
``local`` site for the execution site its generator names, as pegasus-plan --sites would, with every
clustering technique; each of the workflow's jobs is a task of exactly one cluster.
"""

from __future__ import annotations

import pytest

from pilot.cli.main import main as pilot
from tests.pegasus_isi import PUBLISHED, Published, job_ids, planned_ids


@pytest.mark.parametrize("cluster", ["whole", "label", "horizontal"])
@pytest.mark.parametrize("published", PUBLISHED, ids=lambda p: p.name)
def test_published_workflow_plans_every_job_once(tmp_path, monkeypatch, capsys, published: Published, cluster):
    folder = published.copy(tmp_path)
    monkeypatch.chdir(folder)  # where pegasus-plan finds pegasus.properties, sites.yml, transformations.yml, ...
    submit_dir = tmp_path / "submit"
    code = pilot(["plan", *published.plan_args(), "--cluster", cluster, "--dir", str(submit_dir)])
    assert code == 0, capsys.readouterr().err
    jobs = job_ids(folder, published.workflow)
    seen = planned_ids(submit_dir)
    assert {job: seen[job] for job in jobs} == {job: 1 for job in jobs}
