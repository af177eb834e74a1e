"""Site and transformation catalog fields that say what a site is and how it is reached: ``arch`` and ``os.*``
(a transformation entry is usable only on a site of its system, as Pegasus' transformation mappers decide),
``grids`` (the site's batch system must be the site config's), ``sharedFileSystem`` (read by PegasusLite only:
a sharedfs plan is the same either way), and a file server's ``operation`` (put to write, get to read) and
``profiles`` (refused, as Pegasus' planner refuses them). Each workflow and catalog is written with the real
Pegasus.api, as a Pegasus user writes them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from pilot.errors import ConfigError
from pilot.planner.plan import PlanRequest, plan
from pilot.sites import load_site

api = pytest.importorskip("Pegasus.api")


def site_entry(tmp: Path, name: str = "local", **system) -> api.Site:
    """A site with shared scratch and local storage under ``tmp`` (file servers of operation all)."""
    return api.Site(name, **system).add_directories(
        api.Directory(api.Directory.SHARED_SCRATCH, str(tmp / "scratch")).add_file_servers(
            api.FileServer(f"file://{tmp / 'scratch'}", api.Operation.ALL)
        ),
        api.Directory(api.Directory.LOCAL_STORAGE, str(tmp / "output")).add_file_servers(
            api.FileServer(f"file://{tmp / 'output'}", api.Operation.ALL)
        ),
    )


def write(tmp: Path, sites: list[api.Site] | None, *entries: api.TransformationSite) -> dict[str, str]:
    """A one-job workflow (``echo``, id j) whose transformation has ``entries``; its catalogs as files."""
    tx = api.Transformation("echo")
    tx.add_sites(*entries)
    out = {"workflow": str(tmp / "wf.yml"), "tc": str(tmp / "tc.yml")}
    api.TransformationCatalog().add_transformations(tx).write(out["tc"])
    if sites is not None:
        out["sc"] = str(tmp / "sc.yml")
        api.SiteCatalog().add_sites(*sites).write(out["sc"])
    api.Workflow("sys").add_jobs(api.Job("echo", _id="j").add_args("hi")).write(out["workflow"])
    return out


def run_plan(tmp: Path, files: dict[str, str], site: str = "local", **overrides: str):
    return plan(
        PlanRequest(
            workflow=files["workflow"],
            site=load_site(site, overrides or None),
            cluster=["whole"],
            submit_dir=str(tmp / "submit"),
            tc=files["tc"],
            sc=files.get("sc"),
            force=True,
        )
    )


def task_argv(result) -> list[str]:
    from pilot.dag import read_dag

    return read_dag(result.emitted[0].dag).tasks["echo_j"].argv


def echo_at(site: str, pfn: str = "/bin/echo", stageable: bool = False, **system) -> api.TransformationSite:
    return api.TransformationSite(site, pfn, is_stageable=stageable, **system)


# --- arch, os.type, os.release, os.version: transformation entry against site --------------------------------------


def test_an_entry_built_for_another_arch_is_refused_naming_job_transformation_both_systems_and_the_fix(tmp_path):
    files = write(
        tmp_path,
        [site_entry(tmp_path, arch=api.Arch.X86_64, os_type=api.OS.LINUX)],
        echo_at("local", arch=api.Arch.AARCH64, os_type=api.OS.LINUX),
    )
    with pytest.raises(ConfigError) as err:
        run_plan(tmp_path, files)
    line = str(err.value)
    assert "\n" not in line
    assert line.startswith(
        f"{files['workflow']}: jobs[0] (id j): transformation echo has no entry for the system of "
        "site 'local' (arch=x86_64 os=linux)"
    )
    assert f"its entry {files['tc']}: transformations[0].sites[0] is for arch=aarch64 os=linux" in line
    assert "set that entry's arch/os.* to the site's" in line


def test_an_entry_that_names_no_arch_is_x86_64_as_in_pegasus_so_a_ppc64le_site_refuses_it(tmp_path):
    files = write(tmp_path, [site_entry(tmp_path, arch=api.Arch.PPC64LE)], echo_at("local"))
    with pytest.raises(ConfigError, match=r"site 'local' \(arch=ppc64le os=linux\).* is for arch=x86_64 os=linux"):
        run_plan(tmp_path, files)
    files = write(tmp_path, [site_entry(tmp_path, arch=api.Arch.PPC64LE)], echo_at("local", arch=api.Arch.PPC64LE))
    assert task_argv(run_plan(tmp_path, files)) == ["/bin/echo", "hi"]


def test_os_release_and_version_must_match_as_well(tmp_path):
    site = site_entry(tmp_path, arch=api.Arch.X86_64, os_type=api.OS.LINUX, os_release="rhel", os_version="8")
    files = write(
        tmp_path,
        [site],
        echo_at("local", arch=api.Arch.X86_64, os_type=api.OS.LINUX, os_release="rhel", os_version="7"),
    )
    with pytest.raises(
        ConfigError,
        match=r"osrelease=rhel osversion=8\): .* is for arch=x86_64 os=linux " r"osrelease=rhel osversion=7;",
    ):
        run_plan(tmp_path, files)
    files = write(
        tmp_path,
        [site],
        echo_at("local", arch=api.Arch.X86_64, os_type=api.OS.LINUX, os_release="rhel", os_version="8"),
    )
    assert task_argv(run_plan(tmp_path, files)) == ["/bin/echo", "hi"]


def test_of_several_entries_for_a_site_the_one_built_for_its_system_runs(tmp_path):
    """Pegasus' YAML schema lets a site have one entry per system (Pegasus.api's add_sites does not: the file is
    edited as a user would); the job runs the one whose arch is the site's, with that entry's profiles."""
    files = write(
        tmp_path, [site_entry(tmp_path, arch=api.Arch.X86_64)], echo_at("local", "/opt/arm/echo", arch=api.Arch.AARCH64)
    )
    tc = yaml.safe_load(Path(files["tc"]).read_text())
    tc["transformations"][0]["sites"].append(
        {
            "name": "local",
            "pfn": "/bin/echo",
            "type": "installed",
            "arch": "x86_64",
            "profiles": {"pegasus": {"cores": "2"}},
        }
    )
    Path(files["tc"]).write_text(yaml.safe_dump(tc))
    result = run_plan(tmp_path, files)
    assert task_argv(result) == ["/bin/echo", "hi"]
    assert "-c 2" in Path(result.emitted[0].dag).read_text()  # the chosen entry's profiles, not the other's


def test_a_stageable_entry_of_another_system_is_not_staged_in(tmp_path):
    (tmp_path / "echo.sh").write_text('#!/bin/sh\necho "$@"\n')
    entry = echo_at("elsewhere", f"file://{tmp_path / 'echo.sh'}", stageable=True, arch=api.Arch.AARCH64)
    with pytest.raises(ConfigError, match=r"its entry .*transformations\[0\]\.sites\[0\] is for arch=aarch64"):
        run_plan(tmp_path, write(tmp_path, [site_entry(tmp_path)], entry))
    entry = echo_at("elsewhere", f"file://{tmp_path / 'echo.sh'}", stageable=True)
    result = run_plan(tmp_path, write(tmp_path, [site_entry(tmp_path)], entry))
    assert task_argv(result)[0].endswith("/echo")  # staged into the job's directory, then run from there


def test_the_local_site_pegasus_plan_adds_is_of_pegasus_default_system_on_any_machine(tmp_path):
    """Entries that name no system plan on the added local site of any machine (an ARM laptop too); one built
    for another system is refused there."""
    assert task_argv(run_plan(tmp_path, write(tmp_path, None, echo_at("local")))) == ["/bin/echo", "hi"]
    with pytest.raises(ConfigError, match=r"site 'local' \(arch=x86_64 os=linux"):
        run_plan(tmp_path, write(tmp_path, None, echo_at("local", arch=api.Arch.PPC64LE)))


def test_a_site_the_site_catalog_does_not_describe_is_pegasus_default_system(tmp_path):
    files = write(tmp_path, [site_entry(tmp_path, "other")], echo_at("hpc", arch=api.Arch.AARCH64))
    with pytest.raises(
        ConfigError,
        match=r"site 'hpc' \(arch=x86_64 os=linux, Pegasus' default: the site catalog " r"does not describe the site\)",
    ):
        run_plan(tmp_path, files, pegasus_site="hpc", shared_scratch=str(tmp_path / "hpc"))


@pytest.mark.parametrize(
    "key,value,says",
    [
        ("arch", "x86-64", "is not one Pegasus knows: use one of x86, x86_64"),
        ("os.type", "Linux", "is not one Pegasus knows: use one of linux, sunos"),
        ("os.release", "centos", "is not one Pegasus knows: use one of alpine, rhel"),
        ("os.version", "8-stream", "is not a version Pegasus accepts: write N"),
    ],
)
def test_a_system_value_pegasus_does_not_know_is_refused_where_it_is_written(tmp_path, key, value, says):
    files = write(tmp_path, [site_entry(tmp_path)], echo_at("local"))
    good = Path(files["sc"]).read_text()
    sc = yaml.safe_load(good)
    sc["sites"][0][key] = value
    Path(files["sc"]).write_text(yaml.safe_dump(sc))
    with pytest.raises(ConfigError, match=rf"sc.yml: sites\[0\]\.{key}: '{value}' {says}"):
        run_plan(tmp_path, files)
    Path(files["sc"]).write_text(good)
    tc = yaml.safe_load(Path(files["tc"]).read_text())  # the same in a transformation's site entry
    tc["transformations"][0]["sites"][0][key] = value
    Path(files["tc"]).write_text(yaml.safe_dump(tc))
    with pytest.raises(ConfigError, match=rf"tc.yml: transformations\[0\]\.sites\[0\]\.{key}: '{value}' {says}"):
        run_plan(tmp_path, files)


# --- grids: the site's batch system is the site config's -----------------------------------------------------------


def grid(scheduler: api.Scheduler, jobtype: api.SupportedJobs | None = None, kind=api.Grid.BATCH) -> api.Grid:
    return api.Grid(kind, "login.hpc.example.org", scheduler, job_type=jobtype)


def test_a_compute_grid_of_another_batch_system_than_the_site_configs_is_refused(tmp_path):
    site = site_entry(tmp_path).add_grids(grid(api.Scheduler.PBS, api.SupportedJobs.COMPUTE))
    files = write(tmp_path, [site], echo_at("local"))
    with pytest.raises(ConfigError) as err:
        run_plan(tmp_path, files, "perlmutter-cpu", pegasus_site="local")
    assert str(err.value) == (
        f"{files['sc']}: sites[0].grids[0]: site local runs its compute jobs through pbs (grid batch "
        f"login.hpc.example.org), but site config {load_site('perlmutter-cpu').path} submits to slurm: plan with a site "
        "config whose scheduler is pbspro or torque (--site), or correct the grid's scheduler in the site catalog"
    )


def test_a_grid_of_the_site_configs_batch_system_plans_and_submits_through_it(tmp_path):
    """Pegasus' usual site: compute jobs through the batch system, auxiliary (data) jobs forked on the head node,
    which pilot runs in the cluster instead; the batch job is the site config's (Slurm)."""
    site = site_entry(tmp_path).add_grids(
        grid(api.Scheduler.SLURM, api.SupportedJobs.COMPUTE),
        grid(api.Scheduler.FORK, api.SupportedJobs.AUXILLARY, api.Grid.GT5),
        grid(api.Scheduler.UNKNOWN, api.SupportedJobs.TRANSFER),
    )
    result = run_plan(tmp_path, write(tmp_path, [site], echo_at("local")), "perlmutter-cpu", pegasus_site="local")
    assert "#SBATCH" in Path(result.emitted[0].script).read_text()


def test_a_fork_compute_grid_is_a_site_without_batch_system(tmp_path):
    site = site_entry(tmp_path).add_grids(grid(api.Scheduler.FORK, api.SupportedJobs.COMPUTE, api.Grid.GT5))
    files = write(tmp_path, [site], echo_at("local"))
    assert task_argv(run_plan(tmp_path, files)) == ["/bin/echo", "hi"]  # site config local: no batch system either
    with pytest.raises(
        ConfigError,
        match=r"runs its compute jobs through fork .* submits to slurm: plan with a site "
        r"config whose scheduler is local \(--site\)",
    ):
        run_plan(tmp_path, files, "perlmutter-cpu", pegasus_site="local")


def test_a_grid_of_a_batch_system_pilot_has_no_plug_in_for_is_refused(tmp_path):
    from providers import SCHEDULERS

    claimed = {plugin.pegasus_name for plugin in SCHEDULERS.values()}
    other = next(s for s in (api.Scheduler.LSF, api.Scheduler.SGE, api.Scheduler.FLUX) if s.value not in claimed)
    site = site_entry(tmp_path).add_grids(grid(other))
    with pytest.raises(
        ConfigError,
        match=rf"grids\[0\]: site local runs jobs through {other.value} .* submits to local: "
        rf"pilot has no {other.value} plug-in: plan for a site whose batch system pilot "
        "submits to",
    ):
        run_plan(tmp_path, write(tmp_path, [site], echo_at("local")))


def test_a_grid_value_pegasus_does_not_know_is_refused(tmp_path):
    files = write(tmp_path, [site_entry(tmp_path).add_grids(grid(api.Scheduler.SLURM))], echo_at("local"))
    sc = yaml.safe_load(Path(files["sc"]).read_text())
    sc["sites"][0]["grids"][0]["scheduler"] = "Slurm"
    Path(files["sc"]).write_text(yaml.safe_dump(sc))
    with pytest.raises(ConfigError, match=r"sites\[0\]\.grids\[0\]\.scheduler: 'Slurm' is not one Pegasus knows"):
        run_plan(tmp_path, files)


# --- directories: sharedFileSystem, file servers -------------------------------------------------------------------


def test_shared_file_system_changes_nothing_in_a_sharedfs_plan_as_in_pegasus(tmp_path):
    """Pegasus reads it only where PegasusLite stages a job's files (sls/Transfer.java), which sharedfs never does."""
    plans = []
    for shared in (False, True):
        tmp = tmp_path / str(shared)
        tmp.mkdir()
        site = api.Site("local").add_directories(
            api.Directory(
                api.Directory.SHARED_SCRATCH, str(tmp_path / "scratch"), shared_file_system=shared
            ).add_file_servers(api.FileServer(f"file://{tmp_path / 'scratch'}", api.Operation.ALL))
        )
        result = run_plan(tmp, write(tmp, [site], echo_at("local")))
        plans.append(Path(result.emitted[0].dag).read_text().replace(str(tmp), "TMP"))
    assert "sharedFileSystem: true" in Path(tmp_path / "True" / "sc.yml").read_text()
    assert plans[0] == plans[1]


def test_shared_file_system_must_be_true_or_false(tmp_path):
    files = write(tmp_path, [site_entry(tmp_path)], echo_at("local"))
    Path(files["sc"]).write_text(
        Path(files["sc"]).read_text().replace("sharedFileSystem: false", "sharedFileSystem: maybe", 1)
    )
    with pytest.raises(
        ConfigError, match=r"sites\[0\]\.directories\[0\]\.sharedFileSystem: 'maybe' is not true or false"
    ):
        run_plan(tmp_path, files)


def test_transfers_write_through_the_put_server_and_registration_records_the_get_one(tmp_path):
    """A directory with a put-only and a get-only file server: stage-in writes into the scratch through its put
    server, stage-out into the storage through its put server, and the output replica catalog records the
    storage's get URL, where readers find the file; stage-out reads the scratch through its get server (Pegasus'
    StageIn/StageOut generators)."""
    (tmp_path / "in.txt").write_text("x\n")
    put, get = f"file://{tmp_path / 'output'}", "https://data.example.org/output"
    site = api.Site("local").add_directories(
        api.Directory(api.Directory.SHARED_SCRATCH, str(tmp_path / "scratch")).add_file_servers(
            api.FileServer("https://scratch.example.org/scratch", api.Operation.GET),
            api.FileServer(f"file://{tmp_path / 'scratch'}", api.Operation.PUT),
        ),
        api.Directory(api.Directory.LOCAL_STORAGE, str(tmp_path / "output")).add_file_servers(
            api.FileServer(get, api.Operation.GET), api.FileServer(put, api.Operation.PUT)
        ),
    )
    tc = api.TransformationCatalog().add_transformations(api.Transformation("cp", site="local", pfn="/bin/cp"))
    rc = api.ReplicaCatalog().add_replica("local", "in.txt", str(tmp_path / "in.txt"))
    fin, fout = api.File("in.txt"), api.File("out.txt")
    wf = api.Workflow("ops").add_jobs(api.Job("cp", _id="j").add_args(fin, fout).add_inputs(fin).add_outputs(fout))
    wf.add_transformation_catalog(tc).add_site_catalog(api.SiteCatalog().add_sites(site)).add_replica_catalog(rc)
    wf.write(str(tmp_path / "ops.yml"))
    result = plan(
        PlanRequest(
            workflow=str(tmp_path / "ops.yml"),
            site=load_site("local"),
            cluster=["whole"],
            submit_dir=str(tmp_path / "submit"),
        )
    )
    submit = Path(result.submit_dir)
    stage_in = json.loads(next(submit.glob("**/stage_in_*.in")).read_text())
    assert stage_in[0]["dest_urls"][0]["url"].startswith(f"file://{tmp_path / 'scratch'}/")
    stage_out = json.loads(next(submit.glob("**/stage_out_*.in")).read_text())
    assert stage_out[0]["dest_urls"][0]["url"] == f"{put}/out.txt"
    # and reads the scratch through its get server (StageOut.java)
    assert stage_out[0]["src_urls"][0]["url"].startswith("https://scratch.example.org/scratch/")
    registered = next(submit.glob("**/register_*.in")).read_text()
    assert f"out.txt {get}/out.txt" in registered


def test_file_server_profiles_are_refused_as_pegasus_refuses_them(tmp_path):
    server = api.FileServer(f"file://{tmp_path / 'scratch'}", api.Operation.ALL).add_env(X509_USER_PROXY="/tmp/x")
    site = api.Site("local").add_directories(
        api.Directory(api.Directory.SHARED_SCRATCH, str(tmp_path / "scratch")).add_file_servers(server)
    )
    files = write(tmp_path, [site], echo_at("local"))
    with pytest.raises(ConfigError) as err:
        run_plan(tmp_path, files)
    assert str(err.value).startswith(
        f"{files['sc']}: sites[0].directories[0].fileServers[0].profiles: site local: "
        "Pegasus does not use a file server's profiles"
    )
