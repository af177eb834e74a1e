"""condor::request_memory is read as HTCondor reads it: a bare number is MB; K/KB, M/MB, G/GB, T/TB (any case, a
space allowed, powers of 1024) are units; what is no amount is refused in one line naming the job."""

from __future__ import annotations

from pathlib import Path

import pytest

from pilot.errors import ConfigError
from pilot.planner.batchopts import htcondor_quantity
from pilot.planner.plan import PlanRequest, plan
from pilot.sites import load_site
from tests.planner.wf import api, transformations, write


@pytest.mark.parametrize(
    "text, mb",
    [
        ("2048", 2048),
        ("2048 MB", 2048),
        ("1 GB", 1024),
        ("1GB", 1024),
        ("1.5G", 1536),
        ("512M", 512),
        ("512m", 512),
        ("1 GiB", 1024),
        ("2 gb", 2048),
        ("1T", 1 << 20),
        ("1 TB", 1 << 20),
        ("1048576 K", 1024),
        ("1048576KB", 1024),
        (" 64 ", 64),
        ("1e3", 1000),
        ("0", 0),
        (".5 G", 512),
    ],
)
def test_request_memory_values_as_htcondor_reads_them(text, mb):
    assert htcondor_quantity(text) == mb


def test_request_disk_is_kilobytes_without_a_unit():
    assert htcondor_quantity("2048", "k") == 2048 and htcondor_quantity("2 MB", "k") == 2048


@pytest.mark.parametrize(
    "text", ["inf", "-5", "1e400", "nan", "2*1024", "1 XB", "", "GB", "1 G B", "RequestMemory * 2"]
)
def test_what_is_no_amount_is_none(text):
    assert htcondor_quantity(text) is None


def memory_plan(tmp_path: Path, value: str):
    wf = api.Workflow("mem", infer_dependencies=False)
    wf.add_jobs(api.Job("T", _id="a").add_profiles(api.Namespace.CONDOR, key="request_memory", value=value))
    paths = write(tmp_path, wf, transformations("local", {"T": "/bin/true"}))
    return plan(
        PlanRequest(
            workflow=paths["workflow"],
            site=load_site("container", {"pegasus_site": "local"}),
            cluster=["whole"],
            submit_dir=str(tmp_path / "s"),
            tc=paths["tc"],
        )
    )


@pytest.mark.parametrize(
    "value, line",
    [
        ("2 GB", "#SBATCH --mem=2048"),
        ("1.5G", "#SBATCH --mem=1536"),
        ("4096", "#SBATCH --mem=4096"),
        ("100k", "#SBATCH --mem=1"),
    ],
)
def test_request_memory_with_a_unit_reaches_the_batch_script_in_mb(tmp_path, value, line):
    result = memory_plan(tmp_path, value)
    (e,) = [e for e in result.emitted if e.cluster.kind != "data"]
    assert line in Path(e.script).read_text().splitlines()


def test_request_memory_that_is_no_amount_is_refused_naming_the_job(tmp_path):
    with pytest.raises(
        ConfigError,
        match=r"jobs\[0\].*condor request_memory '2 \* 1024' is not an amount of memory: " r"give a number of MB.*2 GB",
    ):
        memory_plan(tmp_path, "2 * 1024")
