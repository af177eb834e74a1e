"""Every profile key of Pegasus' namespaces is honoured by pilot (with a test of its effect), replaced (pilot
reaches its result its own way: accepted, the plan unchanged, one warning line), refused at plan time in one line
naming namespace::key and the entry, or, where Pegasus itself ignores it in a glite/sharedfs/PMC plan, accepted
without changing the plan (the table pilot.planner.keytable, which pilot.planner.profilekeys rules by;
docs/pegasus-fields.md, "Profile keys").

The key lists below are read from Pegasus' source (the checkKey method of each namespace class): a key a new
Pegasus adds fails test_the_table_rules_on_every_key_pegasus_knows until pilot rules on it.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest
import yaml

from pilot.cli.main import main as pilot
from pilot.dag import read_dag
from pilot.errors import ConfigError
from pilot.planner import keytable, profilekeys
from pilot.planner.plan import PlanRequest, plan
from pilot.sites import load_site
from tests.planner.data_wf import data_workflow
from tests.planner.wf import api, transformations, write

ROOT = Path(__file__).resolve().parents[2]
# src/edu/isi/pegasus/planner/namespace/Pegasus.java, checkKey: valid, deprecated and merge keys (the credential
# keys are the lower-cased variable names of common/credential/impl/*.java).
PEGASUS_JAVA = """auxillary.local stagein.clusters stageout.clusters stagein.remote.clusters boto_config bundle.stagein
clusters.num clusters.size change.dir chain.stagein clusters.maxruntime create.dir cores checkpoint.time
condor.arguments.quote container.arguments container.launcher container.launcher.arguments change_dir collapser
data.configuration diskspace exitcode.failuremsg exitcode.successmsg enable_for_data_reuse group gridstart
gridstart.path gridstart.arguments gridstart.launcher gridstart.launcher.arguments google_pkcs12 gpus glite.arguments
irods_environment_file job.runtime job.aggregator job.aggregator.arguments label maxwalltime memory nodes nosymlink
pmc_request_memory pmc_request_cpus pmc_priority pmc_task_arguments ppn project pegasus_lite_env_source
pegasus_credentials queue runtime relative.submit.dir style s3cfg ssh_private_key stagein.local.clusters
stageout.remote.clusters stageout.local.clusters transfer.proxy transfer.arguments transfer.threads
transfer.lite.arguments transfer.lite.threads type tag workdir wntmp x509_user_proxy""".split()
# Pegasus.api (Pegasus/api/mixins.py, add_pegasus_profile): the expression keys of GH-2183.
PEGASUS_API_EXPR = (
    "glite.arguments.expr runtime.expr cores.expr gpus.expr memory.expr diskspace.expr queue.expr "
    "project.expr".split()
)
# src/edu/isi/pegasus/planner/namespace/Globus.java, checkKey: valid and not permitted keys.
GLOBUS_JAVA = """arch arguments count directory dryrun environment executable grammyjob hostcount jobtype maxcputime
maxmemory maxtime maxwalltime minmemory project queue rsl stdin stdout stderr totalmemory xcount""".split()
# src/edu/isi/pegasus/planner/namespace/Condor.java, checkKey: valid and not permitted keys ("+..." ClassAds too).
CONDOR_JAVA = """accounting_group arguments batch_queue container_image concurrency_limits copy_to_spool
cream_attributes condor_collector environment executable encrypt_input_files encrypt_op_files
encrypt_execute_directory filesystemdomain grid_type getenv grid_resource globusscheduler globusrsl jobmanager_type log
notification noop_job noop_job_exit_code noop_job_exit_signal priority periodic_release periodic_remove periodic_hold
preserve_relative_paths queue remote_initialdir requirements rank request_cpus request_gpus require_gpus
request_memory request_disk remote_universe stream_error stream_output should_transfer_files transfer_executable
transfer_input_files transfer_output transfer_output_remaps transfer_error universe use_x509userproxy
when_to_transfer_output x509userproxy +remote_queue""".split()
# src/edu/isi/pegasus/planner/namespace/Dagman.java, checkKey (MAX* and NOOP* are prefixes, POST.PATH.<type>).
DAGMAN_JAVA = [
    "ABORT-DAG-ON",
    "CATEGORY",
    "DIR",
    "JOB",
    "MAXPRE",
    "MAXPOST",
    "MAXJOBS",
    "MAXIDLE",
    "NOOP",
    "OUTPUT",
    "POST",
    "POST.ARGUMENTS",
    "PRE",
    "PRE.ARGUMENTS",
    "POST.SCOPE",
    "PRIORITY",
    "POST.PATH.DEFAULT",
    "RETRY",
    "SUBDAG EXTERNAL",
    "VARS",
]
# src/edu/isi/pegasus/planner/namespace/Hints.java and Selector.java (Selector's keys are its constants).
HINTS_JAVA = ["execution.site", "grid.jobtype", "pfn", "executionPool", "pfnHint"]
SELECTOR_JAVA = ["execution.site", "pfn", "grid.jobtype"]
JAVA = {
    "pegasus": PEGASUS_JAVA + PEGASUS_API_EXPR,
    "globus": GLOBUS_JAVA,
    "condor": CONDOR_JAVA,
    "dagman": DAGMAN_JAVA,
    "hints": HINTS_JAVA,
    "selector": SELECTOR_JAVA,
}

CL = "tests/planner/test_clustering.py"
DATA = "tests/planner/test_data.py"
HERE = "tests/planner/test_profile_keys.py"
REPLACED = "tests/planner/test_replaced_keys.py"
BATCH = f"{CL}::test_queue_project_glite_arguments_and_request_memory_reach_the_batch_script"
REQUEST = f"{CL}::test_cores_memory_and_gpus_profiles_become_the_task_request_unless_pmc_keys_say_otherwise"
ACCEPTED = f"{HERE}::test_keys_pegasus_ignores_here_or_pilot_does_already_leave_the_plan_unchanged"
GLOBUS = f"{HERE}::test_globus_and_walltime_keys_stand_for_the_pegasus_keys_as_pegasus_maps_them"
QUEUES = f"{HERE}::test_globus_queue_and_project_and_condor_batch_queue_reach_the_batch_script"
SIZE = "tests/planner/test_batch_profiles.py::test_the_aggregators_nodes_ppn_and_runtime_size_the_clustered_batch_job"
# Each honoured key (namespace, stored name) and the test of its effect.
HONOURED = {
    ("pegasus", "clusters.num"): f"{CL}::test_clusters_num_3_gives_2_1_1",
    ("pegasus", "clusters.size"): f"{CL}::test_clusters_size_3_gives_3_plus_1",
    ("pegasus", "clusters.maxruntime"): f"{CL}::test_runtime_maxruntime_first_fit_decreasing",
    ("pegasus", "job.aggregator"): ACCEPTED,
    ("pegasus", "label"): f"{CL}::test_label_key_property",
    ("pegasus", "runtime"): f"{CL}::test_runtime_maxruntime_first_fit_decreasing",
    ("pegasus", "job.runtime"): f"{CL}::test_pmc_arguments_is_pmc_task_arguments",
    ("pegasus", "maxwalltime"): GLOBUS,
    ("pegasus", "pmc_request_memory"): f"{CL}::test_pmc_profiles_and_task_arguments",
    ("pegasus", "pmc_request_cpus"): f"{CL}::test_pmc_profiles_and_task_arguments",
    ("pegasus", "pmc_priority"): f"{CL}::test_pmc_profiles_and_task_arguments",
    ("pegasus", "pmc_task_arguments"): f"{CL}::test_pmc_profiles_and_task_arguments",
    ("pegasus", "cores"): REQUEST,
    ("pegasus", "memory"): REQUEST,
    ("pegasus", "gpus"): REQUEST,
    ("pegasus", "nodes"): SIZE,
    ("pegasus", "queue"): BATCH,
    ("pegasus", "project"): BATCH,
    ("pegasus", "glite.arguments"): BATCH,
    (
        "pegasus",
        "container.arguments",
    ): "tests/planner/test_containers.py::test_a_singularity_job_runs_in_apptainer_as_pegasus_wrapper_runs_it_its_image_staged",
    (
        "pegasus",
        "data.configuration",
    ): "tests/planner/test_taskdirs.py::test_nonsharedfs_and_condorio_plans_run_each_task_in_a_directory_of_its_own",
    ("pegasus", "enable_for_data_reuse"): f"{HERE}::test_partial_data_reuse_considers_only_jobs_enabled_for_it",
    ("pegasus", "style"): f"{REPLACED}::test_an_htcondor_style_on_the_site_is_its_batch_system_said_once",
    ("pegasus", "auxillary.local"): ACCEPTED,
    ("pegasus", "transfer.threads"): f"{REPLACED}::test_transfer_threads_profile_sets_the_data_jobs_threads",
    ("pegasus", "transfer.arguments"): f"{HERE}::test_transfer_arguments_profile_reaches_pegasus_transfer",
    **{
        ("pegasus", key): f"{REPLACED}::test_a_sites_ssh_key_reaches_the_data_jobs_as_pegasus_transfer_reads_it"
        for key in keytable.CREDENTIALS
    },
    ("condor", "request_memory"): BATCH,
    ("condor", "batch_queue"): QUEUES,
    ("globus", "queue"): QUEUES,
    ("globus", "project"): QUEUES,
    ("globus", "maxwalltime"): GLOBUS,
    ("globus", "count"): GLOBUS,
    ("globus", "totalmemory"): GLOBUS,
    ("globus", "hostcount"): SIZE,
    ("dagman", "RETRY"): "tests/unit/test_submit_plan.py::test_largest_dagman_retry_of_a_cluster_reaches_clusters_yml",
    ("selector", "execution.site"): f"{CL}::test_label_on_two_sites_is_an_error",
    ("hints", "execution.site"): f"{HERE}::test_hints_execution_site_places_the_job_as_selector_does",
    ("properties", "transfer.arguments"): f"{HERE}::test_transfer_properties_reach_pegasus_transfer",
    ("properties", "transfer.threads"): f"{HERE}::test_transfer_properties_reach_pegasus_transfer",
    ("properties", "stagein.clusters"): f"{DATA}::test_properties_set_the_number_of_transfer_jobs_and_symlinks",
    ("properties", "stageout.clusters"): f"{DATA}::test_properties_set_the_number_of_transfer_jobs_and_symlinks",
}


def entries():
    """(namespace, key, entry) of the whole table, the pegasus.<key> properties under namespace "properties"."""
    for ns, table in keytable.TABLE.items():
        for key, entry in table.items():
            if not (ns == "hints" and key in ("executionpool", "pfnhint")):  # aliases of execution.site and pfn
                yield ns, key, entry
    for key, entry in keytable.PROPERTIES.items():
        yield "properties", key, entry


@pytest.mark.parametrize("ns", sorted(JAVA))
def test_the_table_rules_on_every_key_pegasus_knows(ns):
    unruled = [key for key in JAVA[ns] if profilekeys.lookup(ns, key)[1] is None]
    assert not unruled, f"{ns} keys of Pegasus that pilot neither honours nor refuses: {unruled}"


def test_every_honoured_key_names_a_test_of_its_effect_and_the_docs_list_every_key():
    docs = (ROOT / "docs" / "pegasus-fields.md").read_text()
    for ns, key, entry in entries():
        assert entry.verdict in (keytable.HONOURED, keytable.REPLACED, keytable.REFUSED, keytable.NO_EFFECT)
        if entry.verdict == keytable.NO_EFFECT:
            assert "NO_EFFECT" in entry.why and ".java" in entry.why, f"{ns}::{key} names no Pegasus source"
        if entry.verdict == keytable.HONOURED:
            assert (ns, key) in HONOURED, f"{ns}::{key} is honoured: name the test of its effect"
        name = f"`pegasus.{key}` (properties)" if ns == "properties" else f"`{ns}::{key}`"
        assert name in docs, f"{name} is missing from docs/pegasus-fields.md"
    for where in HONOURED.values():
        module, test = where.split("::")
        assert callable(getattr(importlib.import_module(module[:-3].replace("/", ".")), test, None)), where


def one_job(tmp_path: Path, ns: str, key: str, value: str, *, on: str = "job", props: dict | None = None):
    """A one-job workflow with profile ns::key=value on the job (or its transformation), written into the YAML
    as Pegasus.api writes profiles (the hints namespace, which Pegasus.api has no name for, included)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    wf = api.Workflow("keys", infer_dependencies=False).add_jobs(api.Job("T", _id="a").add_args("x"))
    paths = write(tmp_path, wf, transformations("local", {"T": "/bin/echo"}), props=props)
    if ns:
        file, entries = (paths["workflow"], "jobs") if on == "job" else (paths["tc"], "transformations")
        doc = yaml.safe_load(Path(file).read_text())
        doc[entries][0].setdefault("profiles", {}).setdefault(ns, {})[key] = value
        Path(file).write_text(yaml.safe_dump(doc))
    return paths


def concrete(key: str) -> str:
    return key.replace("*", "X") if key.endswith(".*") else key.replace("*", "JOBS")


REFUSED = [(ns, key) for ns, key, e in entries() if e.verdict == keytable.REFUSED and ns != "properties"]


@pytest.mark.parametrize("ns, key", REFUSED)
def test_a_refused_key_fails_pilot_plan_in_one_line_naming_it_and_the_job(tmp_path, capsys, ns, key):
    paths = one_job(tmp_path, ns, concrete(key), "1")
    code = pilot(["plan", paths["workflow"], "--site", "local", "--tc", paths["tc"], "--dir", str(tmp_path / "s")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err, err
    assert f"jobs[0].profiles.{ns}.{concrete(key)}: {ns}::{concrete(key)}" in err and ": " in err.split("::", 1)[1]


@pytest.mark.parametrize(
    "ns, key, value, message",
    [
        ("pegasus", "style", "condorr", r"pegasus::style = 'condorr': .*no style of Pegasus'"),
        ("pegasus", "data.configuration", "shared", r"pegasus::data.configuration = 'shared': .*use sharedfs"),
        ("pegasus", "nodes", "4", r"a task runs on one node"),
        ("pegasus", "job.aggregator", "seqexec", r"set mpiexec or drop the key"),
        (
            "pegasus",
            "clusters.szie",
            "2",
            r"pegasus::clusters.szie is not a key of Pegasus' pegasus namespace: did you " r"mean clusters.size\?",
        ),
        ("condor", "request_memroy", "2", r"did you mean request_memory\?"),
        ("pegasus", "runtime.expr", "2", r"no HTCondor expressions: give the value itself under runtime"),
    ],
)
def test_values_and_names_pilot_cannot_honour_are_refused(tmp_path, ns, key, value, message):
    with pytest.raises(ConfigError, match=message):
        plan_of(tmp_path, one_job(tmp_path, ns, key, value))


def test_a_job_selector_on_a_transformation_and_an_unknown_namespace_are_refused(tmp_path):
    with pytest.raises(
        ConfigError, match=r"transformations\[0\].profiles.selector.execution.site: .*set it on the job"
    ):
        plan_of(tmp_path, one_job(tmp_path, "selector", "execution.site", "local", on="transformation"))
    paths = one_job(tmp_path, "", "", "")
    doc = yaml.safe_load(Path(paths["workflow"]).read_text())
    doc["jobs"][0]["profiles"] = {"pegasuss": {"runtime": "1"}}
    Path(paths["workflow"]).write_text(yaml.safe_dump(doc))
    with pytest.raises(
        ConfigError,
        match=r"jobs\[0\].profiles.pegasuss: 'pegasuss' is not a profile namespace.*did " r"you mean pegasus\?",
    ):
        plan_of(tmp_path, paths)


@pytest.mark.parametrize(
    "prop, message",
    [
        ("dagman.pre", r":\d+: dagman.pre = '1' is refused: dagman::pre: pilot runs no PRE scripts"),
        ("pegasus.exitcode.successmsg", r":\d+: pegasus.exitcode.successmsg = '1' is refused: .*exit status alone"),
        ("condor.transfer_input_files", r"condor::transfer_input_files: pilot submits through the site's batch system"),
    ],
)
def test_properties_that_carry_refused_profiles_are_refused_naming_the_line(tmp_path, prop, message):
    with pytest.raises(ConfigError, match=message):
        plan_of(tmp_path, one_job(tmp_path, "", "", "", props={prop: "1"}))


def plan_of(tmp_path: Path, paths: dict, name: str = "s", site: str = "local", sets: dict | None = None, **kw):
    return plan(
        PlanRequest(
            workflow=paths["workflow"],
            site=load_site(site, sets),
            cluster=kw.pop("cluster", ["whole"]),
            submit_dir=str(tmp_path / name),
            tc=paths.get("tc"),
            conf=paths.get("conf"),
            **kw,
        )
    )


def planned(tmp_path: Path, name: str, paths: dict, **kw) -> list[str]:
    """The plan's DAGs, scripts and clusters.yml, with its directory's name taken out."""
    result = plan_of(tmp_path, paths, name, **kw)
    texts = [Path(e.dag).read_text() + Path(e.script).read_text() for e in result.emitted]
    texts.append((tmp_path / name / "clusters.yml").read_text())
    return [t.replace(str(tmp_path / name), "DIR").replace(f"/{name}", "/NAME") for t in texts]


ACCEPT = [
    (ns, concrete(key), "1")
    for ns, key, e in entries()
    if e.verdict in (keytable.NO_EFFECT, keytable.REPLACED) and ns != "properties"
]
ACCEPT += [
    ("pegasus", "style", "glite"),
    ("pegasus", "style", "ssh"),
    ("pegasus", "auxillary.local", "true"),
    ("pegasus", "nodes", "1"),
    ("globus", "hostcount", "1"),
    ("pegasus", "job.aggregator", "mpiexec"),
    ("dagman", "stagein.maxjobs", "3"),
]


@pytest.mark.parametrize("ns, key, value", ACCEPT)
def test_keys_pegasus_ignores_here_or_pilot_does_already_leave_the_plan_unchanged(tmp_path, ns, key, value):
    """NO_EFFECT keys (the Pegasus source that ignores them is named in the table), REPLACED keys (pilot reaches
    their result its own way), and the values of honoured keys that ask for what pilot does anyway: style glite
    or ssh (the site's batch system), auxillary.local (pilot runs on the site), one node, the mpiexec aggregator.
    The first two give the plan one warning line naming the key; the last none."""
    plain = planned(
        tmp_path, "plain", one_job(tmp_path / "a", "", "", ""), site="container", sets={"pegasus_site": "local"}
    )
    assert (
        planned(
            tmp_path, "keyed", one_job(tmp_path / "b", ns, key, value), site="container", sets={"pegasus_site": "local"}
        )
        == plain
    )
    said = plan_of(tmp_path, one_job(tmp_path / "c", ns, key, value), "said").warnings
    entry = profilekeys.lookup(ns, key)[1]
    if entry is not None and entry.verdict in (keytable.NO_EFFECT, keytable.REPLACED):
        assert len(said) == 1 and said[0].startswith(f"warning: {ns}::{key} (") and "jobs[0].profiles" in said[0], said
    else:
        assert said == []


def test_globus_and_walltime_keys_stand_for_the_pegasus_keys_as_pegasus_maps_them(tmp_path):
    """globus maxwalltime and pegasus maxwalltime (minutes) are the runtime, count the cores, totalmemory the memory
    (MB), where the pegasus keys are unset (Globus.java rslToPegasusProfiles)."""
    wf = api.Workflow("walls", infer_dependencies=False)
    for n, minutes in enumerate((2, 2, 1)):
        j = api.Job("T", _id=f"j{n}").add_args(str(n))
        j.add_profiles(api.Namespace.GLOBUS if n else api.Namespace.PEGASUS, key="maxwalltime", value=minutes)
        j.add_profiles(api.Namespace.GLOBUS, key="count", value=2).add_profiles(
            api.Namespace.GLOBUS, key="totalmemory", value=300
        )
        wf.add_jobs(j)
    wf.get_job("j0").add_pegasus_profile(cores=3)  # the pegasus key wins over globus count
    paths = write(
        tmp_path,
        wf,
        transformations("local", {"T": "/bin/echo"}, profiles={"T": {"clusters.maxruntime": 200}}),
        props={"pegasus.clusterer.preference": "Runtime"},
    )
    result = plan_of(tmp_path, paths, cluster=["horizontal"])
    sizes = sorted(
        len([j for j in e.cluster.jobs if j.command is None]) for e in result.emitted if e.cluster.kind != "data"
    )
    assert sizes == [1, 2]  # 120 s, 120 s and 60 s of work in clusters of at most 200 s
    tasks = {name: t for e in result.emitted for name, t in read_dag(e.dag).tasks.items() if name.startswith("T_")}
    assert {name: (t.cpus, t.memory) for name, t in tasks.items()} == {
        "T_j0": (3, 300),
        "T_j1": (2, 300),
        "T_j2": (2, 300),
    }


def test_globus_queue_and_project_and_condor_batch_queue_reach_the_batch_script(tmp_path):
    for name, profiles, lines in (
        (
            "g",
            {"globus": {"queue": "debug", "project": "m42"}, "condor": {"batch_queue": "other"}},
            ["#SBATCH --partition=debug", "#SBATCH --account=m42"],
        ),
        ("c", {"condor": {"batch_queue": "other"}}, ["#SBATCH --partition=other"]),
    ):
        wf = api.Workflow("q", infer_dependencies=False)
        job = api.Job("T", _id="a")
        for ns, keys in profiles.items():
            for key, value in keys.items():
                job.add_profiles(getattr(api.Namespace, ns.upper()), key=key, value=value)
        (tmp_path / name).mkdir()
        paths = write(tmp_path / name, wf.add_jobs(job), transformations("local", {"T": "/bin/true"}))
        (e,) = [
            e
            for e in plan_of(tmp_path, paths, f"s{name}", site="container", sets={"pegasus_site": "local"}).emitted
            if e.cluster.kind != "data"
        ]
        script = Path(e.script).read_text().splitlines()
        assert all(line in script for line in lines), script


def test_hints_execution_site_places_the_job_as_selector_does(tmp_path):
    wf = api.Workflow("h", infer_dependencies=False)
    wf.add_jobs(*(api.Job("T", _id=i).add_pegasus_profile(label="one") for i in "ab"))
    tc = transformations("local", {"T": "/bin/echo"})
    tc.transformations[next(iter(tc.transformations))].add_sites(
        api.TransformationSite("other", "/bin/echo", is_stageable=False)
    )
    paths = write(tmp_path, wf, tc)
    doc = yaml.safe_load(Path(paths["workflow"]).read_text())
    doc["jobs"][1]["profiles"]["hints"] = {"execution.site": "other"}
    Path(paths["workflow"]).write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError, match=r"jobs of label 'one' are on sites"):
        plan_of(tmp_path, paths, cluster=["label"])


def test_transfer_properties_reach_pegasus_transfer(tmp_path):
    paths = data_workflow(tmp_path, props={"pegasus.transfer.threads": "3"}, transfer_args="--debug")
    result = plan(
        PlanRequest(
            workflow=paths["workflow"],
            site=load_site("local"),
            cluster=["none"],
            submit_dir=str(tmp_path / "s"),
            conf=paths.get("conf"),
        )
    )
    job = next(e.cluster.jobs[0] for e in result.emitted if e.cluster.jobs[0].id.startswith("stage_in_"))
    words = " ".join(job.command)
    assert "--threads 3" in words and "--debug" in words


def test_transfer_arguments_profile_reaches_pegasus_transfer(tmp_path):
    """On the execution site's entry it comes before the property, as pegasus::transfer.threads does."""
    paths = data_workflow(tmp_path, transfer_args="--debug")
    doc = yaml.safe_load(Path(paths["workflow"]).read_text())
    doc["siteCatalog"]["sites"][0]["profiles"] = {"pegasus": {"transfer.arguments": "--symlink"}}
    Path(paths["workflow"]).write_text(yaml.safe_dump(doc))
    result = plan(
        PlanRequest(
            workflow=paths["workflow"],
            site=load_site("local"),
            cluster=["none"],
            submit_dir=str(tmp_path / "s"),
            conf=paths.get("conf"),
        )
    )
    job = next(e.cluster.jobs[0] for e in result.emitted if e.cluster.jobs[0].id.startswith("stage_in_"))
    assert "--symlink" in job.command and "--debug" not in job.command


def test_partial_data_reuse_considers_only_jobs_enabled_for_it(tmp_path):
    paths = data_workflow(tmp_path, props={"pegasus.data.reuse.scope": "partial"})
    doc = yaml.safe_load(Path(paths["workflow"]).read_text())
    doc["replicaCatalog"]["replicas"].append({"lfn": "f.b", "pfns": [{"site": "local", "pfn": f"{tmp_path}/old/f.b"}]})
    Path(paths["workflow"]).write_text(yaml.safe_dump(doc))
    assert plan_of(tmp_path, paths, "kept", cluster=["none"]).pruned == 0
    doc["jobs"][0].setdefault("profiles", {}).setdefault("pegasus", {})["enable_for_data_reuse"] = "true"
    Path(paths["workflow"]).write_text(yaml.safe_dump(doc))
    assert plan_of(tmp_path, paths, "pruned", cluster=["none"]).pruned == 1


def test_a_custom_label_key_is_the_one_unknown_pegasus_key_accepted(tmp_path):
    paths = one_job(tmp_path, "pegasus", "my_label", "x", props={"pegasus.clusterer.label.key": "my_label"})
    plan_of(tmp_path, paths, "ok", cluster=["label"])
    with pytest.raises(
        ConfigError, match=re.escape("jobs[0].profiles.pegasus.my_label: pegasus::my_label is not a key")
    ):
        plan_of(tmp_path, one_job(tmp_path / "b", "pegasus", "my_label", "x"), "no")


def test_a_site_entry_with_refused_keys_plans_until_a_job_runs_there(tmp_path):
    """A catalog that also describes sites the plan does not use (a condorpool whose jobs need HTCondor's file
    transfer, and whose style is condor) plans as with Pegasus, without a word about that site; planned for
    that site, its refused keys are refused in one line."""
    condorpool = api.Site("condorpool").add_pegasus_profile(style="condor")
    condorpool.add_profiles(api.Namespace.CONDOR, key="transfer_input_files", value="x")
    sc = api.SiteCatalog().add_sites(
        condorpool,
        api.Site("local").add_directories(
            api.Directory(api.Directory.SHARED_SCRATCH, str(tmp_path / "scratch")).add_file_servers(
                api.FileServer(f"file://{tmp_path / 'scratch'}", api.Operation.ALL)
            )
        ),
    )
    tx = api.Transformation("true", site="local", pfn="/bin/true", is_stageable=False)
    tx.add_sites(api.TransformationSite("condorpool", "/bin/true", is_stageable=False))
    tc = api.TransformationCatalog().add_transformations(tx)
    wf = api.Workflow("sites").add_jobs(api.Job("true", _id="j"))
    wf.add_site_catalog(sc).add_transformation_catalog(tc).write(str(tmp_path / "sites.yml"))
    assert (
        plan(
            PlanRequest(
                workflow=str(tmp_path / "sites.yml"),
                site=load_site("local"),
                cluster=["whole"],
                submit_dir=str(tmp_path / "local"),
            )
        ).warnings
        == []
    )
    with pytest.raises(ConfigError, match=r"siteCatalog.sites\[0\].profiles.condor.transfer_input_files: "):
        plan(
            PlanRequest(
                workflow=str(tmp_path / "sites.yml"),
                site=load_site("local", {"pegasus_site": "condorpool"}),
                cluster=["whole"],
                submit_dir=str(tmp_path / "condorpool"),
            )
        )
