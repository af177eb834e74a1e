"""A replica or container image whose site the site catalog does not describe (montage's inputs on ipac over http,
an image on docker_hub) is a source pegasus-transfer reads from its URL, as in Pegasus, where the site is a label:
the plan names it in the stage-in job and contacts nothing; a path on such a site is refused in one line."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
import yaml

from pilot.errors import ConfigError
from pilot.planner.plan import PlanRequest, plan
from pilot.sites import load_site
from tests.planner.data_wf import data_workflow
from tests.planner.wf import api


def with_replica(paths: dict, site: str, pfn: str) -> None:
    doc = yaml.safe_load(Path(paths["workflow"]).read_text())
    doc["replicaCatalog"]["replicas"][0]["pfns"] = [{"site": site, "pfn": pfn}]
    Path(paths["workflow"]).write_text(yaml.safe_dump(doc))


def run_plan(tmp_path: Path, paths: dict):
    return plan(
        PlanRequest(
            workflow=paths["workflow"],
            site=load_site("local"),
            cluster=["none"],
            submit_dir=str(tmp_path / "s"),
            conf=paths.get("conf"),
        )
    )


def entry(submit: Path, lfn: str) -> dict:
    return next(e for p in submit.glob("*/stage_in_*.in") for e in json.loads(p.read_text()) if e["lfn"] == lfn)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:{port}/montage/2mass-atlas-f.a",
        "https://127.0.0.1:{port}/f.a",
        "gsiftp://gridftp.example/data/f.a",
        "s3://bucket/f.a",
        "scp://host.example/data/f.a",
    ],
)
def test_a_url_on_a_site_no_catalog_describes_is_staged_from_that_url_without_being_contacted(tmp_path, url):
    paths = data_workflow(tmp_path)
    with socket.create_server(("127.0.0.1", 0)) as source:  # the http(s) source: listening, never connected to
        url = url.format(port=source.getsockname()[1])
        with_replica(paths, "ipac", url)
        run_plan(tmp_path, paths)
        source.settimeout(0)
        with pytest.raises(BlockingIOError):
            source.accept()
    src = entry(tmp_path / "s", "f.a")["src_urls"]
    assert src == [{"site_label": "ipac", "url": url, "priority": 1}]


def test_a_path_on_a_site_no_catalog_describes_is_refused_in_one_line(tmp_path):
    paths = data_workflow(tmp_path)
    with_replica(paths, "ipac", "/data/montage/f.a")
    with pytest.raises(
        ConfigError,
        match=r"replicaCatalog.replicas\[0\].pfns\[0\]: replica 'file:///data/montage/f.a' "
        r"of 'f.a' is a path on site 'ipac', which no catalog knows",
    ):
        run_plan(tmp_path, paths)


def test_an_image_on_docker_hub_is_staged_from_docker(tmp_path):
    """Pegasus.api's image_site="docker_hub", which no site catalog describes."""
    box = api.Container("box", api.Container.SINGULARITY, image="docker://alpine:3.18", image_site="docker_hub")
    tc = (
        api.TransformationCatalog()
        .add_containers(box)
        .add_transformations(
            api.Transformation("echo", site="local", pfn="/bin/echo", is_stageable=False, container=box)
        )
    )
    wf = api.Workflow("box").add_transformation_catalog(tc).add_jobs(api.Job("echo", _id="j").add_args("hi"))
    wf.write(str(tmp_path / "box.yml"))
    site = load_site("local", {"container_runtimes": "apptainer"})
    result = plan(
        PlanRequest(workflow=str(tmp_path / "box.yml"), site=site, cluster=["whole"], submit_dir=str(tmp_path / "s"))
    )
    image = entry(Path(result.submit_dir), "box.simg")
    assert image["src_urls"][0]["site_label"] == "docker_hub" and image["src_urls"][0]["url"] == "docker://alpine:3.18"
