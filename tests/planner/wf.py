"""Build planner inputs with the real Pegasus.api (pip pegasus-wms.api)."""

from __future__ import annotations

from pathlib import Path

import pytest

api = pytest.importorskip("Pegasus.api")


def transformations(site: str, names: dict[str, str], profiles: dict[str, dict] | None = None, site_profiles=None):
    tc = api.TransformationCatalog()
    for name, pfn in names.items():
        tx = api.Transformation(name, site=site, pfn=pfn, is_stageable=False)
        for key, value in (profiles or {}).get(name, {}).items():
            tx.add_profiles(api.Namespace.PEGASUS, key=key, value=value)
        tc.add_transformations(tx)
    return tc


def write_properties(path: Path, props: dict[str, str]) -> str:
    """pegasus.properties as Pegasus.api writes it; returns its path."""
    p = api.Properties()
    for k, v in props.items():
        p[k] = v
    p.write(str(path))
    return str(path)


def write(tmp_path: Path, wf, tc=None, sc=None, props: dict[str, str] | None = None) -> dict[str, str]:
    """Write workflow, catalogs and properties as separate files; return their paths."""
    out = {"workflow": str(tmp_path / "workflow.yml")}
    if tc is not None:
        out["tc"] = str(tmp_path / "transformations.yml")
        tc.write(out["tc"])
    if sc is not None:
        out["sc"] = str(tmp_path / "sites.yml")
        sc.write(out["sc"])
    if props:
        out["conf"] = write_properties(tmp_path / "pegasus.properties", props)
    wf.write(out["workflow"])
    return out


def jobs(wf, name: str, n: int, **profiles):
    made = []
    for i in range(n):
        j = api.Job(name, _id=f"{name}{i}").add_args(f"{name}{i}")
        for key, value in profiles.items():
            j.add_profiles(
                api.Namespace.PEGASUS, key=key.replace("_", ".") if key.startswith("clusters") else key, value=value
            )
        wf.add_jobs(j)
        made.append(j)
    return made
