"""Nothing a Pegasus workflow says goes unnoticed: every field Pegasus.api writes is listed here with what pilot does.

A workflow using every feature of the real Pegasus.api (the workflow, its jobs and sub-workflows, and the
replica, transformation and site catalogs) is written to YAML and walked. Each field found must be in
FIELDS: honoured or refused, with the test that shows it (docs/pegasus-fields.md says how and why). A field
that a new Pegasus.api writes and this table does not know fails the test, so it cannot be dropped without a
word.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import yaml

from tests.planner.wf import api

ROOT = Path(__file__).resolve().parents[2]
# Maps whose keys are values, not fields: walked no deeper (a profile's namespace is the field there).
OPAQUE = {"metadata", "checksum", "x-pegasus"}

CLUSTERING = "tests/planner/test_clustering.py"
FIELDS_RUN = "tests/integration/test_pegasus_fields.py"
DATA = "tests/planner/test_data.py"
DATA_RUN = "tests/integration/test_data_runs.py"
ENV = f"{FIELDS_RUN}::test_env_profiles_of_every_layer_reach_the_task_in_every_clustering_mode"
HOOKS = f"{FIELDS_RUN}::test_shell_hooks_of_the_workflow_and_of_a_job_are_run_by_pegasus_monitord"
META = f"{FIELDS_RUN}::test_workflow_and_job_metadata_reach_the_monitoring_db"
MOVES = f"{DATA_RUN}::test_the_example_moves_its_files_in_every_clustering_mode"
CONTAINERS = "tests/planner/test_containers.py"
CONTAINER = f"{CONTAINERS}::test_a_singularity_job_runs_in_apptainer_as_pegasus_wrapper_runs_it_its_image_staged"
BYPASS = f"{CONTAINERS}::test_a_bypassed_image_is_used_from_its_url_and_shifter_runs_as_pegasus_runs_it"
SUBWF = "tests/planner/test_subworkflows.py::test_a_sub_workflow_job_is_a_cluster_of_its_own_between_its_parents_and_children"
SUBWF_RUN = (
    "tests/integration/test_subworkflows.py::test_a_sub_workflow_runs_fails_resumes_and_shows_in_the_monitoring_db"
)
FILES = "tests/planner/test_file_fields.py"
CATF = "tests/planner/test_catalog_fields.py"
NO_EFFECT = f"{FILES}::test_fields_without_an_effect_in_pegasus_sharedfs_plans_change_nothing"
FILE_META = f"{FILES}::test_a_replica_checksum_is_verified_by_the_stage_in_job_and_metadata_goes_where_pegasus_puts_it"
FILE_META_RUN = f"{FIELDS_RUN}::test_a_wrong_copy_fails_its_stage_in_and_file_metadata_reaches_the_monitoring_db"
EXECUTABLES = f"{FILES}::test_a_staged_executable_and_what_it_requires_are_staged_and_verified"
NAMESPACED = "tests/planner/test_input_bounds.py::test_any_value_of_any_type_is_planned_or_a_one_line_error"

# field -> (verdict, the test that shows it); verdict "honoured" or "refused".
FIELDS: dict[str, tuple[str, str]] = {
    "x-pegasus": ("honoured", "who wrote the file: nothing to do"),
    "pegasus": ("honoured", "the format version: read as Pegasus 5 YAML"),
    "name": ("honoured", f"{DATA}::test_whole_plan_has_pegasus_data_jobs_in_order"),
    "hooks.shell[]._on": ("honoured", HOOKS),
    "hooks.shell[].cmd": ("honoured", HOOKS),
    "profiles.env": ("honoured", ENV),
    "metadata": ("honoured", META),
    "jobDependencies[].id": ("honoured", f"{CLUSTERING}::test_levels_are_longest_paths"),
    "jobDependencies[].children": ("honoured", f"{CLUSTERING}::test_levels_are_longest_paths"),
    # jobs
    "jobs[].type": ("honoured", SUBWF),
    "jobs[].id": ("honoured", f"{CLUSTERING}::test_pmc_profiles_and_task_arguments"),
    "jobs[].name": ("honoured", f"{CLUSTERING}::test_pmc_profiles_and_task_arguments"),
    "jobs[].namespace": ("honoured", NAMESPACED),
    "jobs[].version": ("honoured", NAMESPACED),
    "jobs[].arguments": ("honoured", f"{CLUSTERING}::test_an_argument_list_reaches_the_task_as_pegasus_passes_it"),
    "jobs[].stdin": ("honoured", f"{FIELDS_RUN}::test_stdin_of_a_job_is_its_staged_input"),
    "jobs[].stdout": ("honoured", MOVES),
    "jobs[].stderr": ("honoured", MOVES),
    "jobs[].nodeLabel": ("honoured", NO_EFFECT),
    "jobs[].profiles.env": ("honoured", ENV),
    "jobs[].profiles.pegasus": (
        "honoured",
        f"{CLUSTERING}::test_cores_memory_and_gpus_profiles_become_the_task_request_unless_pmc_keys_say_otherwise",
    ),
    "jobs[].profiles.condor": (
        "honoured",
        f"{CLUSTERING}::test_queue_project_glite_arguments_and_request_memory_reach_the_batch_script",
    ),
    "jobs[].profiles.globus": (
        "honoured",
        f"{CLUSTERING}::test_queue_project_glite_arguments_and_request_memory_reach_the_batch_script",
    ),
    "jobs[].profiles.dagman": (
        "honoured",
        "tests/unit/test_submit_plan.py::test_largest_dagman_retry_of_a_cluster_reaches_clusters_yml",
    ),
    "jobs[].profiles.selector": ("honoured", f"{CLUSTERING}::test_label_on_two_sites_is_an_error"),
    "jobs[].metadata": ("honoured", META),
    "jobs[].hooks.shell[]._on": ("honoured", HOOKS),
    "jobs[].hooks.shell[].cmd": ("honoured", HOOKS),
    "jobs[].uses[].lfn": ("honoured", MOVES),
    "jobs[].uses[].type": ("honoured", MOVES),
    "jobs[].uses[].stageOut": ("honoured", MOVES),
    "jobs[].uses[].registerReplica": ("honoured", MOVES),
    "jobs[].uses[].optional": ("honoured", f"{DATA}::test_an_optional_input_without_a_replica_is_not_staged"),
    "jobs[].uses[].bypass": ("honoured", NO_EFFECT),
    "jobs[].uses[].metadata": ("honoured", FILE_META),
    "jobs[].uses[].forPlanning": ("honoured", SUBWF),
    "jobs[].file": ("honoured", SUBWF_RUN),
    # replica catalog
    "replicaCatalog.replicas[].lfn": ("honoured", MOVES),
    "replicaCatalog.replicas[].pfns[].site": ("honoured", MOVES),
    "replicaCatalog.replicas[].pfns[].pfn": ("honoured", MOVES),
    "replicaCatalog.replicas[].regex": ("honoured", f"{DATA}::test_rc_txt_regex_entries_and_relative_paths"),
    "replicaCatalog.replicas[].checksum": ("honoured", FILE_META_RUN),
    "replicaCatalog.replicas[].metadata": ("honoured", FILE_META_RUN),
    # transformation catalog
    "transformationCatalog.transformations[].name": ("honoured", MOVES),
    "transformationCatalog.transformations[].namespace": ("honoured", NAMESPACED),
    "transformationCatalog.transformations[].version": ("honoured", NAMESPACED),
    "transformationCatalog.transformations[].sites[].name": ("honoured", MOVES),
    "transformationCatalog.transformations[].sites[].pfn": ("honoured", MOVES),
    "transformationCatalog.transformations[].sites[].type": (
        "honoured",
        f"{DATA}::test_a_stageable_executable_of_another_site_is_staged_from_there",
    ),
    "transformationCatalog.transformations[].sites[].container": ("honoured", CONTAINER),
    "transformationCatalog.transformations[].sites[].bypass": ("honoured", EXECUTABLES),
    "transformationCatalog.transformations[].sites[].arch": (
        "honoured",
        f"{CATF}::test_an_entry_built_for_another_arch_is_refused_naming_job_transformation_both_systems_and_the_fix",
    ),
    "transformationCatalog.transformations[].sites[].os.type": (
        "honoured",
        f"{CATF}::test_of_several_entries_for_a_site_the_one_built_for_its_system_runs",
    ),
    "transformationCatalog.transformations[].sites[].os.release": (
        "honoured",
        f"{CATF}::test_os_release_and_version_must_match_as_well",
    ),
    "transformationCatalog.transformations[].sites[].os.version": (
        "honoured",
        f"{CATF}::test_os_release_and_version_must_match_as_well",
    ),
    "transformationCatalog.transformations[].requires": ("honoured", EXECUTABLES),
    "transformationCatalog.transformations[].checksum": ("honoured", EXECUTABLES),
    "transformationCatalog.transformations[].profiles.env": ("honoured", ENV),
    "transformationCatalog.transformations[].hooks.shell[]._on": ("honoured", HOOKS),
    "transformationCatalog.transformations[].hooks.shell[].cmd": ("honoured", HOOKS),
    "transformationCatalog.transformations[].metadata": ("honoured", NO_EFFECT),
    "transformationCatalog.containers[].name": ("honoured", CONTAINER),
    "transformationCatalog.containers[].type": ("honoured", CONTAINER),
    "transformationCatalog.containers[].image": ("honoured", CONTAINER),
    "transformationCatalog.containers[].image.site": ("honoured", CONTAINER),
    "transformationCatalog.containers[].mounts": ("honoured", CONTAINER),
    "transformationCatalog.containers[].bypass": ("honoured", BYPASS),
    "transformationCatalog.containers[].checksum": (
        "honoured",
        f"{FILES}::test_a_container_image_checksum_is_verified_where_the_image_is_staged",
    ),
    "transformationCatalog.containers[].profiles.env": ("honoured", CONTAINER),
    # site catalog
    "siteCatalog.sites[].name": ("honoured", MOVES),
    "siteCatalog.sites[].directories[].type": ("honoured", MOVES),
    "siteCatalog.sites[].directories[].path": ("honoured", MOVES),
    "siteCatalog.sites[].directories[].sharedFileSystem": (
        "honoured",
        f"{CATF}::test_shared_file_system_changes_nothing_in_a_sharedfs_plan_as_in_pegasus",
    ),
    "siteCatalog.sites[].directories[].fileServers[].url": ("honoured", MOVES),
    "siteCatalog.sites[].directories[].fileServers[].operation": (
        "honoured",
        f"{CATF}::test_transfers_write_through_the_put_server_and_registration_records_the_get_one",
    ),
    "siteCatalog.sites[].directories[].fileServers[].profiles.env": (
        "refused",
        f"{CATF}::test_file_server_profiles_are_refused_as_pegasus_refuses_them",
    ),
    "siteCatalog.sites[].arch": (
        "honoured",
        f"{CATF}::test_an_entry_that_names_no_arch_is_x86_64_as_in_pegasus_so_a_ppc64le_site_refuses_it",
    ),
    "siteCatalog.sites[].os.type": (
        "honoured",
        f"{CATF}::test_an_entry_built_for_another_arch_is_refused_naming_job_transformation_both_systems_and_the_fix",
    ),
    "siteCatalog.sites[].os.release": ("honoured", f"{CATF}::test_os_release_and_version_must_match_as_well"),
    "siteCatalog.sites[].os.version": ("honoured", f"{CATF}::test_os_release_and_version_must_match_as_well"),
    "siteCatalog.sites[].grids[].type": (
        "honoured",
        f"{CATF}::test_a_grid_of_the_site_configs_batch_system_plans_and_submits_through_it",
    ),
    "siteCatalog.sites[].grids[].contact": (
        "honoured",
        f"{CATF}::test_a_grid_of_the_site_configs_batch_system_plans_and_submits_through_it",
    ),
    "siteCatalog.sites[].grids[].scheduler": (
        "honoured",
        f"{CATF}::test_a_compute_grid_of_another_batch_system_than_the_site_configs_is_refused",
    ),
    "siteCatalog.sites[].grids[].jobtype": (
        "honoured",
        f"{CATF}::test_a_fork_compute_grid_is_a_site_without_batch_system",
    ),
    "siteCatalog.sites[].profiles.env": ("honoured", ENV),
}


def everything(tmp_path: Path) -> dict:
    """A workflow using every feature of Pegasus.api, as YAML data."""
    fa, fb, fc, ck = api.File("f.a").add_metadata(size="1"), api.File("f.b"), api.File("f.c"), api.File("ck")
    rc = api.ReplicaCatalog().add_replica("local", fa, "/tmp/f.a", checksum={"sha256": "ab"}, metadata={"k": "v"})
    rc.add_regex_replica("local", "r.*", "/tmp/[0]", metadata={"x": "y"})
    box = api.Container(
        "box",
        api.Container.SINGULARITY,
        image="docker://alpine",
        image_site="local",
        mounts=["/a:/b"],
        checksum={"sha256": "cd"},
        bypass_staging=True,
    ).add_env(CE="1")
    t = api.Transformation(
        "t",
        namespace="ns",
        version="1",
        site="local",
        pfn="/bin/true",
        is_stageable=True,
        bypass_staging=True,
        arch=api.Arch.X86_64,
        os_type=api.OS.LINUX,
        os_release="rhel",
        os_version="7",
        container=box,
        checksum={"sha256": "ef"},
    )
    t.add_env(T="1").add_metadata(tm="1").add_requirement("u", namespace="ns", version="1")
    t.add_shell_hook(api.EventType.START, "echo hi")
    u = api.Transformation("u", namespace="ns", version="1", site="local", pfn="/bin/true", is_stageable=False)
    tc = api.TransformationCatalog().add_containers(box).add_transformations(t, u)
    site = api.Site("local", arch=api.Arch.X86_64, os_type=api.OS.LINUX, os_release="rhel", os_version="7")
    site.add_directories(
        api.Directory(api.Directory.SHARED_SCRATCH, "/tmp/s", shared_file_system=True).add_file_servers(
            api.FileServer("file:///tmp/s", api.Operation.ALL).add_env(FS="1")
        )
    )
    site.add_grids(api.Grid(api.Grid.BATCH, "contact", api.Scheduler.SLURM, job_type=api.SupportedJobs.COMPUTE))
    sc = api.SiteCatalog().add_sites(site.add_env(S="1"))
    wf = api.Workflow("everything").add_metadata(w="1").add_env(W="1")
    wf.add_shell_hook(api.EventType.END, "echo end")
    j = api.Job(t, _id="j1", node_label="lbl").add_args("-i", fa).add_inputs(fa, bypass_staging=True)
    j.add_outputs(fb, stage_out=True, register_replica=False).add_checkpoint(ck).add_metadata(m="1").add_env(J="1")
    j.add_pegasus_profile(cores=1).add_profiles(api.Namespace.CONDOR, key="request_memory", value="1")
    j.add_profiles(api.Namespace.GLOBUS, key="queue", value="q").add_dagman_profile(retry=1)
    j.add_selector_profile(execution_site="local")
    j.set_stdin(api.File("in.txt")).set_stdout(fc, stage_out=False).set_stderr("e.txt")
    j.add_shell_hook(api.EventType.ERROR, "echo err")
    j2 = api.Job(u, _id="j2").add_inputs(fb)
    wf.add_jobs(
        j,
        j2,
        api.SubWorkflow("sub.yml", is_planned=False, _id="s1").add_planner_args(verbose=3),
        api.SubWorkflow("sub.dag", is_planned=True, _id="s2"),
    )
    wf.add_replica_catalog(rc).add_transformation_catalog(tc).add_site_catalog(sc)
    wf.write(str(tmp_path / "everything.yml"))
    return yaml.safe_load((tmp_path / "everything.yml").read_text())


def fields(data, prefix: str = "") -> set[str]:
    """Dotted paths of every field in ``data`` (list items as ``[]``)."""
    out: set[str] = set()
    if isinstance(data, dict):
        for key, value in data.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            if key in OPAQUE:
                out.add(path)
            elif key == "profiles" and isinstance(value, dict):
                out.update(f"{path}.{ns}" for ns in value)
            else:
                out |= fields(value, path) or {path}
    elif isinstance(data, list):
        for item in data:
            out |= fields(item, prefix + "[]") or ({prefix} if prefix else set())
    return out


def test_every_field_pegasus_api_writes_is_honoured_or_refused(tmp_path):
    found = fields(everything(tmp_path))
    unknown = sorted(found - set(FIELDS))
    assert not unknown, f"fields of Pegasus.api that pilot neither honours nor refuses: {unknown}"
    docs = (ROOT / "docs" / "pegasus-fields.md").read_text()
    for field, (verdict, where) in FIELDS.items():
        assert verdict in (
            "honoured",
            "refused",
        ), f"{field}: {verdict!r}: a field is honoured or refused, never left open"
        if "::" in where:
            module, test = where.split("::")
            mod = importlib.import_module(module[:-3].replace("/", "."))
            assert callable(getattr(mod, test, None)), f"{field}: {where} does not exist"
    assert "*Open*" not in docs, "docs/pegasus-fields.md lists a field as open"
