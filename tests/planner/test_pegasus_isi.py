"""pilot plan takes the workflows pegasus-isi publishes as their generators write them, with no edit.

Each is planned, from a copy of its folder (its catalogs and pegasus.properties beside it), on pilot's
``local`` site for the execution site its generator names, as pegasus-plan --sites would, with every
clustering technique; each of the workflow's jobs is a task of exactly one cluster.
"""

from __future__ import annotations

import pytest

from pilot.cli.main import main as pilot
from tests.pegasus_isi import BY_NAME, PUBLISHED, Published, job_ids, planned_ids


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


@pytest.mark.parametrize("name", ["casa-wind", "lung-instance-segmentation"])
def test_singularity_containers_of_docker_images_plan_on_a_site_with_only_podman(
    tmp_path, monkeypatch, capsys, caplog, name
):
    # A laptop's local site finds podman, not apptainer: a singularity container of a docker:// image runs there as
    # a docker container of the same image, said once per plan.
    published = BY_NAME[name]
    folder = published.copy(tmp_path)
    monkeypatch.chdir(folder)
    submit_dir = tmp_path / "submit"
    args = [a for a in published.plan_args() if a not in ("--set", *published.sets)]
    code = pilot(["plan", *args, "--set", "container_runtimes=podman", "--dir", str(submit_dir)])
    err = capsys.readouterr().err
    assert code == 0, err
    said = [r.getMessage() for r in caplog.records if "singularity container on podman" in r.getMessage()]
    assert len(said) == 1, said  # one line, however many jobs and containers
    dags = "\n".join(p.read_text() for p in submit_dir.rglob("*.dag"))
    assert " podman run --rm " in dags and " -v " in dags and "apptainer" not in dags
    jobs = job_ids(folder, published.workflow)
    seen = planned_ids(submit_dir)
    assert {job: seen[job] for job in jobs} == {job: 1 for job in jobs}


def test_a_sif_image_is_refused_on_a_site_with_only_podman(tmp_path, monkeypatch, capsys):
    # earthquake's image is a .sif file, singularity's own format: docker and podman cannot run it
    published = BY_NAME["earthquake"]
    folder = published.copy(tmp_path)
    monkeypatch.chdir(folder)
    args = [a for a in published.plan_args() if a not in ("--set", *published.sets)]
    code = pilot(["plan", *args, "--set", "container_runtimes=podman", "--dir", str(tmp_path / "submit")])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "Earthquake_Container.sif" in err and "site local offers podman" in err
