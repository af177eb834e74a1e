"""The data example of the tests, written with the real Pegasus.api as a Pegasus user writes it.

An input ``f.a`` found through the replica catalog; job j1 ``cp f.a f.b``; job j2 runs a stageable
executable (``mine``: ``cat f.b > f.c`` plus a line) whose output ``f.c`` is staged out and
registered; j2's stdout goes to ``j2.out``. Sites ``local`` with shared scratch and local storage
under ``tmp_path``.
"""

from __future__ import annotations

from pathlib import Path

from tests.planner.wf import api, write_properties

MINE = '#!/bin/sh\ncat "$1" > "$2" && echo mine >> "$2"\n'


def data_workflow(
    tmp_path: Path,
    *,
    site_catalog: bool = True,
    input_text: str = "hello\n",
    inline: bool = True,
    props: dict[str, str] | None = None,
    transfer_args: str = "-m 1",
) -> dict[str, str]:
    """Write the example; return the paths (workflow, replicas, conf) and its directories."""
    inputs = tmp_path / "input"
    inputs.mkdir(exist_ok=True)
    if input_text is not None:
        (inputs / "f.a").write_text(input_text)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "mine.sh").write_text(MINE)
    rc = api.ReplicaCatalog().add_replica("local", "f.a", str(inputs / "f.a"))
    tc = api.TransformationCatalog()
    tc.add_transformations(
        api.Transformation("cp", site="local", pfn="/bin/cp", is_stageable=False),
        api.Transformation("mine", site="local", pfn=f"file://{bin_dir}/mine.sh", is_stageable=True),
    )
    wf = api.Workflow("data")
    fa, fb, fc = api.File("f.a"), api.File("f.b"), api.File("f.c")
    j1 = (
        api.Job("cp", _id="j1").add_args(fa, fb).add_inputs(fa).add_outputs(fb, stage_out=False, register_replica=False)
    )
    j2 = (
        api.Job("mine", _id="j2").add_args(fb, fc).add_inputs(fb).add_outputs(fc, stage_out=True, register_replica=True)
    )
    j2.set_stdout(api.File("j2.out"), stage_out=True, register_replica=False)
    wf.add_jobs(j1, j2)
    wf.add_transformation_catalog(tc)
    if site_catalog:
        sc = api.SiteCatalog().add_sites(
            api.Site("local").add_directories(
                api.Directory(api.Directory.SHARED_SCRATCH, str(tmp_path / "scratch")).add_file_servers(
                    api.FileServer(f"file://{tmp_path / 'scratch'}", api.Operation.ALL)
                ),
                api.Directory(api.Directory.LOCAL_STORAGE, str(tmp_path / "output")).add_file_servers(
                    api.FileServer(f"file://{tmp_path / 'output'}", api.Operation.ALL)
                ),
            )
        )
        wf.add_site_catalog(sc)
    out = {"workflow": str(tmp_path / "data.yml")}
    if inline:
        wf.add_replica_catalog(rc)
    else:
        out["replicas"] = str(tmp_path / "replicas.yml")
        rc.write(out["replicas"])
    out["conf"] = write_properties(
        tmp_path / "pegasus.properties", {"pegasus.transfer.arguments": transfer_args, **(props or {})}
    )
    wf.write(out["workflow"])
    return out
