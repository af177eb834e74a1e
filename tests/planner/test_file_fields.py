"""File fields of a Pegasus workflow: checksums are verified where the file is staged, metadata reaches the
transfer entries, the output replica catalog and the monitoring DB's static record, a transformation's
``requires`` are staged beside it, and the fields Pegasus itself gives no effect in a shared-file-system plan
(``nodeLabel``, ``bypass`` of an input, a transformation's metadata) change nothing. Written with the real
Pegasus.api; the stage-in check itself runs in test_integrity_check_fails_the_stage_in_on_a_wrong_copy."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pilot.dag import read_dag
from pilot.errors import ConfigError
from pilot.planner.plan import PlanRequest, plan
from pilot.sites import load_site
from tests.planner.wf import api, write_properties

PILOT = [sys.executable, "-m", "pilot"]


def sites(tmp: Path):
    return api.SiteCatalog().add_sites(
        api.Site("local").add_directories(
            api.Directory(api.Directory.SHARED_SCRATCH, str(tmp / "scratch")).add_file_servers(
                api.FileServer(f"file://{tmp / 'scratch'}", api.Operation.ALL)
            ),
            api.Directory(api.Directory.LOCAL_STORAGE, str(tmp / "output")).add_file_servers(
                api.FileServer(f"file://{tmp / 'output'}", api.Operation.ALL)
            ),
        )
    )


def data_workflow(
    tmp: Path, checksum: str | None = None, bypass: bool = False, tx_metadata: bool = True, **job_fields
) -> Path:
    """cat f.in > f.out: f.in from the replica catalog (with metadata, and a checksum if given), f.out with
    metadata, staged out and registered."""
    (tmp / "f.in").write_text("payload\n")
    rc = api.ReplicaCatalog().add_replica(
        "local",
        "f.in",
        str(tmp / "f.in"),
        metadata={"origin": "lab 7"},
        checksum={"sha256": checksum} if checksum else None,
    )
    cat = api.Transformation("cat", site="local", pfn="/bin/cat", is_stageable=False)
    tc = api.TransformationCatalog().add_transformations(cat.add_metadata(owner="me") if tx_metadata else cat)
    fin, fout = api.File("f.in").add_metadata(kind="raw"), api.File("f.out").add_metadata(kind="result", run="3")
    job = api.Job("cat", _id="j", **job_fields).add_args(fin).add_inputs(fin, bypass_staging=bypass).set_stdout(fout)
    wf = api.Workflow("files").add_jobs(job).add_replica_catalog(rc).add_transformation_catalog(tc)
    wf.add_site_catalog(sites(tmp)).write(str(tmp / "files.yml"))
    return tmp / "files.yml"


def run_plan(tmp: Path, wf: Path, conf: str | None = None, sub: str = "submit"):
    return plan(
        PlanRequest(workflow=str(wf), site=load_site("local"), cluster=["none"], submit_dir=str(tmp / sub), conf=conf)
    )


def tasks(result) -> dict[str, list[str]]:
    out = {}
    for e in result.emitted:
        for name, task in read_dag(e.dag).tasks.items():
            out[name] = task.argv
    return out


def stage_in(result) -> tuple[list[str], list[dict]]:
    """The stage-in job's command and the entries of its pegasus-transfer input."""
    e = next(e for e in result.emitted if e.cluster.jobs[0].id.startswith("stage_in_"))
    job = e.cluster.jobs[0]
    return job.command, json.loads(job.stdin_text)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


PAYLOAD, TAMPERED = sha("payload\n"), sha("tampered\n")


def test_a_replica_checksum_is_verified_by_the_stage_in_job_and_metadata_goes_where_pegasus_puts_it(tmp_path):
    result = run_plan(tmp_path, data_workflow(tmp_path, PAYLOAD))
    command, entries = stage_in(result)
    # python -m pilot.data.integrity PATH=SHA -- pegasus-transfer ...: the copy is checked after the transfer
    assert command[1:3] == ["-m", "pilot.data.integrity"] and command[4] == "--"
    path, _, digest = command[3].rpartition("=")
    assert path.endswith("/f.in") and digest == PAYLOAD and "pegasus-transfer" in " ".join(command[5:])
    assert path.startswith(str(tmp_path / "scratch"))
    # the transfer entry carries the file's metadata with the replica's, checksum included (Transfer.java)
    assert entries[0]["attributes"] == {
        "kind": "raw",
        "origin": "lab 7",
        "checksum.type": "sha256",
        "checksum.value": PAYLOAD,
    }
    # static.bp: rc.meta per key, then wf.map.file, for the input with metadata and the registered output
    bp = next(Path(result.submit_dir).glob("*.static.bp")).read_text()
    metas = re.findall(r'event=rc.meta xwf.id=\S+ lfn.id="([^"]+)" key="([^"]+)" value="([^"]+)"', bp)
    assert sorted(metas) == sorted(
        [
            ("f.in", "kind", "raw"),
            ("f.in", "origin", "lab 7"),
            ("f.in", "checksum.type", "sha256"),
            ("f.in", "checksum.value", PAYLOAD),
            ("f.out", "kind", "result"),
            ("f.out", "run", "3"),
        ]
    )
    assert sorted(re.findall(r'event=wf.map.file xwf.id=\S+ task.id="(\w+)" lfn.id="([^"]+)"', bp)) == [
        ("j", "f.in"),
        ("j", "f.out"),
    ]
    # the registration map line: the file's metadata as key="value", as Pegasus' registration writes it
    reg = next(e.cluster.jobs[0] for e in result.emitted if e.cluster.jobs[0].id.startswith("register_"))
    assert reg.stdin_text == f'f.out file://{tmp_path}/output/f.out site="local" kind="result" run="3"\n'


def test_integrity_checking_none_turns_the_check_off_as_in_pegasus(tmp_path):
    conf = write_properties(tmp_path / "pegasus.properties", {"pegasus.integrity.checking": "none"})
    command, entries = stage_in(run_plan(tmp_path, data_workflow(tmp_path, PAYLOAD), conf))
    assert "pilot.data.integrity" not in command and entries[0]["attributes"]["checksum.value"] == PAYLOAD


def test_integrity_check_fails_the_stage_in_on_a_wrong_copy(tmp_path):
    """The real check: the command runs, then each file is compared; a wrong copy is one line and exit 1."""
    good, bad = tmp_path / "good", tmp_path / "bad"
    good.write_text("payload\n")
    bad.write_text("tampered\n")
    check = [sys.executable, "-m", "pilot.data.integrity"]
    res = subprocess.run([*check, f"{good}={PAYLOAD}", "--", "/bin/true"], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    res = subprocess.run(
        [*check, f"{good}={PAYLOAD}", f"{bad}={PAYLOAD}", "--", "/bin/true"], capture_output=True, text=True
    )
    assert res.returncode == 1 and res.stderr.count("\n") == 1
    assert f"{bad}: sha256 is {TAMPERED}, the catalog says {PAYLOAD}" in res.stderr
    res = subprocess.run(
        [*check, f"{good}={sha('x')}", "--", "/bin/sh", "-c", "exit 7"], capture_output=True, text=True
    )
    assert res.returncode == 7 and res.stderr == ""  # the transfer's own failure comes first, unchanged


def test_a_checksum_pegasus_cannot_check_is_refused_in_one_line(tmp_path):
    wf = data_workflow(tmp_path, "abc")
    with pytest.raises(ConfigError, match=r"replicaCatalog.replicas\[0\].checksum.sha256: 'abc' is not a sha256"):
        run_plan(tmp_path, wf)
    text = wf.read_text().replace("sha256: abc", "md5: abc")
    wf.write_text(text)
    with pytest.raises(ConfigError, match=r"'md5' checksums are not checked \(Pegasus knows sha256 only\)"):
        run_plan(tmp_path, wf)


def test_a_staged_executable_and_what_it_requires_are_staged_and_verified(tmp_path):
    tool, helper = tmp_path / "tool", tmp_path / "helper"
    tool.write_text("#!/bin/sh\necho tool\n")
    helper.write_text("#!/bin/sh\necho helper\n")
    helper_tx = api.Transformation(
        "helper",
        namespace="ns",
        version="2",
        site="local",
        pfn=str(helper),
        is_stageable=True,
        checksum={"sha256": sha(helper.read_text())},
        bypass_staging=True,
    )  # staged all the same: Pegasus bypasses outside sharedfs only
    inst = api.Transformation("inst", namespace="ns", version="1", site="local", pfn="/bin/true", is_stageable=False)
    main = api.Transformation(
        "tool", site="local", pfn=str(tool), is_stageable=True, checksum={"sha256": sha(tool.read_text())}
    )
    main.add_requirement("helper", namespace="ns", version="2").add_requirement("inst", namespace="ns", version="1")
    tc = api.TransformationCatalog().add_transformations(main, helper_tx, inst)
    wf = api.Workflow("exe").add_jobs(api.Job("tool", _id="t")).add_transformation_catalog(tc)
    wf.add_site_catalog(sites(tmp_path)).write(str(tmp_path / "exe.yml"))
    result = run_plan(tmp_path, tmp_path / "exe.yml")
    command, entries = stage_in(result)
    # the executable and the stageable one it requires are staged under Pegasus' names; the installed one is not
    assert sorted(e["lfn"] for e in entries) == ["ns-helper-2", "tool"]
    checked = dict(w.rpartition("=")[::2] for w in command[3 : command.index("--")])
    assert {Path(p).name: d for p, d in checked.items()} == {
        "tool": sha(tool.read_text()),
        "ns-helper-2": sha(helper.read_text()),
    }
    chmod = [argv for name, argv in tasks(result).items() if name.startswith("chmod_t")]
    assert len(chmod) == 1 and sorted(Path(p).name for p in chmod[0][2:]) == ["ns-helper-2", "tool"]
    # a requirement that the catalog lacks is one line naming the job
    main.add_requirement("gone")
    wf.write(str(tmp_path / "exe.yml"))
    with pytest.raises(ConfigError, match=r"jobs\[0\] \(id t\).*requires 'gone', which the transformation catalog"):
        run_plan(tmp_path, tmp_path / "exe.yml", sub="again")


def test_fields_without_an_effect_in_pegasus_sharedfs_plans_change_nothing(tmp_path):
    """nodeLabel (Pegasus prints it in a debug dump only), bypass of an input (Pegasus applies it outside sharedfs
    only: the file is staged as any other) and a transformation's metadata (no planner step reads it): the plan
    with them is the plan without them."""
    plain = run_plan(tmp_path, data_workflow(tmp_path, tx_metadata=False), sub="plain")
    marked = data_workflow(tmp_path, bypass=True, node_label="a step")
    assert all(f in marked.read_text() for f in ("bypass: true", "nodeLabel: a step", "owner: me"))
    again = run_plan(tmp_path, marked, sub="marked")
    strip = lambda r: {n: [w.replace("/marked", "").replace("/plain", "") for w in a] for n, a in tasks(r).items()}  # noqa: E731 - a one-line helper beside its use
    assert strip(plain) == strip(again)
    assert json.dumps(stage_in(plain)[1]).replace("/plain", "") == json.dumps(stage_in(again)[1]).replace("/marked", "")


def test_a_container_image_checksum_is_verified_where_the_image_is_staged(tmp_path):
    image = tmp_path / "alp.sif"
    image.write_text("image bytes")
    box = api.Container(
        "alp", api.Container.SINGULARITY, image=f"file://{image}", checksum={"sha256": sha("image bytes")}
    )
    tc = (
        api.TransformationCatalog()
        .add_containers(box)
        .add_transformations(
            api.Transformation("echo", site="local", pfn="/bin/echo", is_stageable=False, container=box)
        )
    )
    wf = api.Workflow("box").add_jobs(api.Job("echo", _id="j")).add_transformation_catalog(tc)
    wf.add_site_catalog(sites(tmp_path)).write(str(tmp_path / "box.yml"))
    result = plan(
        PlanRequest(
            workflow=str(tmp_path / "box.yml"),
            site=load_site("local", {"container_runtimes": "apptainer"}),
            cluster=["none"],
            submit_dir=str(tmp_path / "submit"),
        )
    )
    command, entries = stage_in(result)
    assert [e["lfn"] for e in entries] == ["alp.sif"]
    at = command.index("pilot.data.integrity")  # inside pilot.data.images, which checks the image is there first
    path, _, digest = command[at + 1].rpartition("=")
    assert Path(path).name == "alp.sif" and digest == sha("image bytes") and command[at + 2] == "--"
    assert command[1:3] == ["-m", "pilot.data.images"] and command[3:8] == ["-", path, "-", f"file://{image}", "--"]
