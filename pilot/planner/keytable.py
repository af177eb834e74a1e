"""Every profile key of Pegasus' namespaces, and pilot's verdict on it: honoured, replaced, refused, or no effect.

Pegasus knows a fixed set of keys per namespace (edu/isi/pegasus/planner/namespace/{Pegasus,Globus,Condor,
Dagman,Hints,Selector,ENV}.java, their ``checkKey``). pilot plans what Pegasus plans in its glite style (jobs
reach Slurm or PBS) with the sharedfs data configuration and PMC clustering, so each key gets the meaning Pegasus
gives it there (HONOURED); or it says how HTCondor, glideins, DAGMan, PegasusLite or kickstart would have done
what pilot does its own way, and is accepted with one warning line per plan saying what pilot does instead
(REPLACED, planner.replaced); or running without it would give a wrong result or lose data, and it is refused at
plan time in one line naming ``namespace::key``, the entry it is written on, why and the fix (REFUSED); a key
Pegasus itself ignores in such a plan is accepted without effect, and said as a replaced one is (NO_EFFECT, naming
the Pegasus source that ignores it).

This module is the table alone, one entry per key with the reason that users read in its message, so that a
reviewer checks a verdict against Pegasus' source in one place; pilot.planner.profilekeys reads a key written in
a workflow, a catalog or the properties and rules on it by this table. docs/pegasus-fields.md ("Profile keys")
is the table for users; tests/planner/test_profile_keys.py holds the key lists read from Pegasus' source and
fails on a key this table does not rule on.
"""

from __future__ import annotations

from dataclasses import dataclass

HONOURED, REPLACED, REFUSED, NO_EFFECT = "honoured", "replaced", "refused", "no effect"


@dataclass(frozen=True)
class Key:
    verdict: str
    why: str  # honoured: where it acts; refused: why and the fix; no effect: why, with the Pegasus source
    values: tuple[str, ...] = ()  # honoured for these values only (lower case); any other is refused with `why`
    jobs_only: bool = False  # honoured on jobs only; on any other entry refused with `why`
    replaced: tuple[str, ...] = ()  # values (lower case) accepted as pilot does their work its own way: `instead`
    instead: str = ""  # what pilot does instead of a replaced value


def _h(
    why: str, values: tuple[str, ...] = (), jobs_only: bool = False, replaced: tuple[str, ...] = (), instead: str = ""
) -> Key:
    return Key(HONOURED, why, values, jobs_only, replaced, instead)


def _p(instead: str) -> Key:
    """A key pilot accepts, reaching its result its own way (``instead``), said once per plan (planner.replaced)."""
    return Key(REPLACED, instead)


def _r(why: str) -> Key:
    return Key(REFUSED, why)


def _n(why: str) -> Key:
    return Key(NO_EFFECT, why)


_CONDOR = "pilot submits through the site's batch system, not HTCondor: drop it"
_BATCH = "pilot submits to the site's batch system (its site config), not through HTCondor: ignored"
_GRAM = "pilot submits no Globus GRAM jobs: drop it"
_DAGMAN = "pilot submit drives the workflow itself, not DAGMan, and has no such setting: ignored"
_MAXQUEUED = (
    "pilot submit keeps at most the site config's max_queued batch jobs queued or running at a site "
    "(and dagman.<category>.maxjobs data jobs, and the properties dagman.maxjobs and dagman.maxidle over "
    "the workflow): set max_queued there, or those properties"
)
_KICKSTART = "pilot's workers launch each task and write its kickstart record themselves: ignored"
_STYLE = (
    "pilot submits the site's jobs to its batch system (the site config's scheduler), as Pegasus' glite "
    "style does, instead of through HTCondor, a CE or glideins"
)
_THREADS = (
    "pegasus-transfer's {option} in the data jobs: the execution site's entry, else the workflow's "
    "profiles, else the property pegasus.{key} (planner.staging)"
)
# The env keys naming a credential file that pegasus-transfer reads for a site's URLs.
CREDENTIAL_FILE_KEYS = (
    "boto_config",
    "google_pkcs12",
    "irods_environment_file",
    "pegasus_credentials",
    "ssh_private_key",
    "x509_user_proxy",
)
_CREDENTIAL = (
    "on a site's entry: the data jobs' {var}_<site> variable, which pegasus-transfer reads for that "
    "site's URLs (planner.staging)"
)
_LITE = "NO_EFFECT: PegasusLite only (PegasusLite.java), which a sharedfs plan does not use"
_CRED = (
    "pegasus-transfer reads credentials from ~/.pegasus/credentials.conf (or the file PEGASUS_CREDENTIALS "
    "names in pilot's environment): put them there and drop the key"
)
PEGASUS: dict[str, Key] = {
    "clusters.num": _h("horizontal clustering: clusters per level (planner.clustering)"),
    "clusters.size": _h("horizontal clustering: jobs per cluster"),
    "clusters.maxruntime": _h("runtime clustering: the most seconds of work per cluster"),
    "job.aggregator": _h(
        "pilot runs every cluster as pegasus-mpi-cluster does (mpiexec); seqexec or another "
        "aggregator is not available: set mpiexec or drop the key",
        values=("mpiexec",),
    ),
    "job.aggregator.arguments": _p(
        "pilot's options come from its site config and pilot submit, not from "
        "pegasus-mpi-cluster's command line: ignored"
    ),
    "label": _h("label clustering (and the key pegasus.clusterer.label.key names)"),
    "runtime": _h(
        "runtime clustering and the makespan estimate (seconds); on pegasus::mpiexec the clustered "
        "job's walltime (planner.batchopts)"
    ),
    "job.runtime": _h("the old name of runtime, read as runtime"),
    "maxwalltime": _h(
        "the job's runtime in minutes where runtime is unset, as Pegasus sums both for a cluster; on "
        "pegasus::mpiexec the clustered job's walltime"
    ),
    "pmc_request_memory": _h("the task's -m"),
    "pmc_request_cpus": _h("the task's -c"),
    "pmc_priority": _h("the task's -p"),
    "pmc_task_arguments": _h("appended to the task's options"),
    "cores": _h(
        "the task's -c where pmc_request_cpus is unset; on pegasus::mpiexec the clustered job's ranks "
        "(with nodes or ppn, the other, as Pegasus derives them)"
    ),
    "memory": _h("the task's -m (MB) where pmc_request_memory is unset"),
    "gpus": _h("the task's -g, and --nv in a container"),
    "nodes": _h(
        "a task runs on one node: a job asking for more nodes cannot run in a pilot; give it nodes: 1 "
        "and ask for cores (on pegasus::mpiexec, any whole number: the clustered job's nodes)",
        values=("1",),
    ),
    "ppn": _r(
        "pilot asks for a task's CPUs with cores: write cores instead (on pegasus::mpiexec, ppn is the "
        "clustered job's ranks per node)"
    ),
    "diskspace": _n(
        "NO_EFFECT: Pegasus' glite style passes no disk request to Slurm or PBS " "(GLite.java getCERequirementsForJob)"
    ),
    "queue": _h("the batch job's partition or queue (planner.batchopts)"),
    "project": _h("the batch job's account"),
    "glite.arguments": _h("an extra directive line of the batch script"),
    "container.arguments": _h("the container runtime's options (planner.containers)"),
    "container.launcher": _p("pilot runs the container runtime itself: ignored"),
    "container.launcher.arguments": _p("pilot runs the container runtime itself: ignored"),
    "data.configuration": _h(
        "sharedfs: every job runs in the workflow's directory on the shared scratch; "
        "nonsharedfs, condorio: each compute task in a directory of its own on node-local "
        "storage, its files linked in and moved back (docs/data.md); a value that is no data "
        "configuration is refused: use sharedfs, nonsharedfs or condorio",
        values=("sharedfs", "nonsharedfs", "condorio"),
    ),
    "enable_for_data_reuse": _h("partial data reuse (planner.reduce)"),
    "style": _h(
        "pilot reaches the site's batch system as Pegasus' glite (and ssh) style does; a value that is "
        "no style of Pegasus' is refused: use glite (or condor, glidein, condorc, creamce, planned as glite)",
        values=("glite", "ssh"),
        replaced=("condor", "condorc", "glidein", "glideinwms", "creamce"),
        instead=_STYLE,
    ),
    "auxillary.local": _h(
        "it says the site's file system is visible where auxiliary jobs run; pilot runs on the "
        "site, so its data jobs always see it",
        values=("true", "false"),
    ),
    "change.dir": _n(
        "NO_EFFECT: Pegasus' PMC code generator sets change.dir=true on every job (PMC.java); "
        "tasks run in the workflow's directory"
    ),
    "change_dir": _n("NO_EFFECT: the old name of change.dir, which the PMC code generator sets (PMC.java)"),
    "create.dir": _p("pilot's create-dir job makes the workflow's directory, where every task runs: ignored"),
    "gridstart": _p(_KICKSTART),
    "gridstart.path": _p(_KICKSTART),
    "gridstart.arguments": _p(_KICKSTART),
    "gridstart.launcher": _p(_KICKSTART),
    "gridstart.launcher.arguments": _p(_KICKSTART),
    "exitcode.failuremsg": _r(
        "pilot decides a task's success by its exit status alone: make the program exit " "non-zero, and drop the key"
    ),
    "exitcode.successmsg": _r("pilot decides a task's success by its exit status alone: drop it"),
    "checkpoint.time": _r("pilot's workers send no checkpoint signal: drop it"),
    "condor.arguments.quote": _n(
        "NO_EFFECT: the PMC code generator writes arguments into the PMC DAG, not a "
        "condor submit file (MPIExec.java)"
    ),
    "stagein.clusters": _n(
        "NO_EFFECT as a profile: Pegasus reads it from the properties only "
        "(BalancedCluster.java ClusterValue.determine logs a site's value)"
    ),
    "stagein.local.clusters": _n("NO_EFFECT as a profile: properties only (BalancedCluster.java)"),
    "stagein.remote.clusters": _n("NO_EFFECT as a profile: properties only (BalancedCluster.java)"),
    "stageout.clusters": _n("NO_EFFECT as a profile: properties only (BalancedCluster.java)"),
    "stageout.local.clusters": _n("NO_EFFECT as a profile: properties only (BalancedCluster.java)"),
    "stageout.remote.clusters": _n("NO_EFFECT as a profile: properties only (BalancedCluster.java)"),
    "bundle.stagein": _n("NO_EFFECT as a profile: the old name of stagein.clusters (BalancedCluster.java)"),
    "chain.stagein": _p("pilot counts its stage-in jobs with pegasus.stagein.clusters, not chains: ignored"),
    "transfer.arguments": _h(_THREADS.format(option="options", key="transfer.arguments")),
    "transfer.threads": _h(_THREADS.format(option="--threads", key="transfer.threads")),
    "transfer.lite.arguments": _n(_LITE),
    "transfer.lite.threads": _n(_LITE),
    "pegasus_lite_env_source": _n(_LITE),
    "wntmp": _n(_LITE),
    "transfer.proxy": _p("pilot submits no grid jobs that need a proxy sent along: ignored"),
    "nosymlink": _r(
        "pilot symlinks inputs only when pegasus.transfer.links is true: set that property, and drop " "the key"
    ),
    "workdir": _r(
        "every job runs in the workflow's directory on the site's sharedScratch: set the directory "
        "there and drop the key"
    ),
    "relative.submit.dir": _p("pilot names the submit directory with pilot plan --dir: ignored"),
    "group": _r("pilot clusters by label: use the label profile"),
    "collapser": _r("Pegasus has no replacement for this old key either: use job.aggregator"),
    "type": _r("a sub-workflow is a job of type pegasusWorkflow in the workflow: drop it"),
    "tag": _r("pilot keeps no job tags: record it as the job's metadata"),
    **{key: _h(_CREDENTIAL.format(var=key.upper())) for key in CREDENTIAL_FILE_KEYS},
    "s3cfg": _r(_CRED),
}
# Keys that act on the data jobs only: on a compute job they act on nothing, as in Pegasus (said once).
DATA_JOB_KEYS = {
    **{
        key: (
            f"no effect on a compute job: the data jobs' pegasus-transfer takes it from the transformation "
            f"pegasus::transfer, the execution site's entry, the workflow's profiles or pegasus.{key}"
        )
        for key in ("transfer.threads", "transfer.arguments")
    },
    **{
        key: "no effect on a compute job: the data jobs get a credential from a site's entry, for that site's URLs"
        for key in CREDENTIAL_FILE_KEYS
    },
}
# The credential keys, and the variable pegasus-transfer reads (NAME_<site label>, NAME; Pegasus' credential
# handlers set the same for transfer jobs: common/credential/impl/*.java).
CREDENTIALS = {
    "boto_config": "BOTO_CONFIG",
    "google_pkcs12": "GOOGLE_PKCS12",
    "irods_environment_file": "IRODS_ENVIRONMENT_FILE",
    "pegasus_credentials": "PEGASUS_CREDENTIALS",
    "ssh_private_key": "SSH_PRIVATE_KEY",
    "x509_user_proxy": "X509_USER_PROXY",
}
_GLITE_NO = (
    "NO_EFFECT: Pegasus' glite style maps only pegasus cores/gpus/memory to Slurm and PBS (GLite.java "
    "getCERequirementsForJob); pilot asks for a task's resources with the pegasus keys"
)
CONDOR: dict[str, Key] = {
    "request_memory": _h("the batch job's memory (planner.batchopts)"),
    "batch_queue": _h(
        "the batch job's partition or queue where pegasus and globus queue are unset, as glite " "passes it"
    ),
    "request_cpus": _n(_GLITE_NO),
    "request_gpus": _n(_GLITE_NO),
    "require_gpus": _n(_GLITE_NO),
    "request_disk": _n(_GLITE_NO),
    "universe": _n("NO_EFFECT: Pegasus' glite style gives every job universe grid (GLite.java apply)"),
    "priority": _p(
        "pilot has no HTCondor queue priority: ignored (order tasks in a cluster with " "pegasus::pmc_priority)"
    ),
    "queue": _r("the batch queue is the pegasus (or globus) profile queue: write it there"),
    "arguments": _r("a job's arguments are its arguments in the workflow: write them there"),
    "environment": _r("a job's environment is its env profiles: write them there"),
    "executable": _r("a job's executable is its transformation's pfn: write it there"),
    "remote_initialdir": _r("every job runs in the workflow's directory on the site's sharedScratch: drop it"),
}
# HTCondor's knobs for its own scheduling and file transfer: the site's batch system schedules, and the files a
# job declares are where it runs (sharedfs), so these are replaced.
for _key in (
    "accounting_group",
    "concurrency_limits",
    "copy_to_spool",
    "cream_attributes",
    "condor_collector",
    "encrypt_execute_directory",
    "encrypt_input_files",
    "encrypt_op_files",
    "filesystemdomain",
    "getenv",
    "globusrsl",
    "globusscheduler",
    "grid_resource",
    "grid_type",
    "jobmanager_type",
    "log",
    "notification",
    "periodic_hold",
    "periodic_release",
    "periodic_remove",
    "rank",
    "remote_universe",
    "requirements",
    "should_transfer_files",
    "stream_error",
    "stream_output",
    "transfer_error",
    "transfer_executable",
    "transfer_output",
    "use_x509userproxy",
    "when_to_transfer_output",
    "x509userproxy",
):
    CONDOR.setdefault(_key, _p(_BATCH))
# What HTCondor would have done to the job itself: without it the job would run differently or lack files.
CONDOR["container_image"] = _p(
    "pilot runs the job on the site's nodes, not in the image HTCondor (or an OSG "
    "glidein) starts it in: where the job needs that image, name it as the "
    "transformation's container in the transformation catalog"
)
for _key in (
    "noop_job",
    "noop_job_exit_code",
    "noop_job_exit_signal",
    "preserve_relative_paths",
    "transfer_input_files",
    "transfer_output_remaps",
):
    CONDOR.setdefault(_key, _r(_CONDOR))

GLOBUS: dict[str, Key] = {
    "queue": _h("the batch job's partition or queue where pegasus queue is unset"),
    "project": _h("the batch job's account where pegasus project is unset"),
    "maxwalltime": _h("the job's runtime (minutes) where pegasus runtime is unset, as Globus.java maps them"),
    "count": _h("the job's cores where pegasus cores is unset (Globus.java)"),
    "totalmemory": _h("the job's memory (MB) where pegasus memory is unset (Globus.java)"),
    "hostcount": _h(
        "the job's nodes where pegasus nodes is unset (Globus.java): a task runs on one node, so "
        "only 1 (on pegasus::mpiexec, any whole number: the clustered job's nodes)",
        values=("1",),
    ),
    "xcount": _r(
        "pilot asks for a task's CPUs with cores: write pegasus::cores instead (on pegasus::mpiexec, "
        "xcount is the clustered job's ranks per node, Pegasus' ppn)"
    ),
    "maxmemory": _r("pilot asks for a task's memory as a whole: write pegasus::memory (MB) instead"),
    "arguments": CONDOR["arguments"],
    "environment": CONDOR["environment"],
    "executable": CONDOR["executable"],
    "directory": CONDOR["remote_initialdir"],
    "stdin": _r("a job's stdin is its stdin file in the workflow: set it there"),
    "stdout": _r("a job's stdout is its stdout file in the workflow: set it there"),
    "stderr": _r("a job's stderr is its stderr file in the workflow: set it there"),
}
for _key in ("arch", "dryrun", "grammyjob", "jobtype", "maxcputime", "maxtime", "minmemory", "rsl"):
    GLOBUS[_key] = _r(_GRAM)

DAGMAN: dict[str, Key] = {
    "RETRY": _h("the job's tries: the largest of a cluster's jobs (pilot submit)"),
    "PRE": _r("pilot runs no PRE scripts: make the step a job of the workflow"),
    "PRE.ARGUMENTS": _r("pilot runs no PRE scripts: drop it"),
    "POST": _p("pilot checks a job's exit status itself, as pegasus-exitcode does in Pegasus' POST script: " "ignored"),
    "POST.ARGUMENTS": _p("pilot checks a job's exit status itself: no POST script runs"),
    "POST.SCOPE": _p("pilot checks a job's exit status itself: no POST script runs"),
    "POST.PATH.*": _p("pilot checks a job's exit status itself: no POST script runs"),
    "PRIORITY": _p(
        "pilot submits every ready cluster at once: ignored (order tasks in a cluster with " "pegasus::pmc_priority)"
    ),
    "CATEGORY": _p("pilot throttles its data jobs' categories only: ignored"),
    "NOOP*": _r("pilot runs every job of the workflow; a job DAGMan would skip would run: drop the job instead"),
    "MAX*": _p(_MAXQUEUED),
}
for _key in ("ABORT-DAG-ON", "DIR", "JOB", "OUTPUT", "SUBDAG EXTERNAL", "VARS"):
    DAGMAN[_key] = _p(_DAGMAN)
# dagman.maxjobs and dagman.maxidle (pegasus.properties): the workflow's throttles, which the plan keeps in its
# pegasus.properties for pilot submit (pilot.submit.throttle).
THROTTLES = {
    "MAXJOBS": _h(
        "the most batch jobs of the workflow submitted at once, over all sites, beside each site "
        "config's max_queued (pilot submit; 0: no limit)"
    ),
    "MAXIDLE": _h(
        "the most batch jobs of the workflow waiting in a queue without running, over all sites "
        "(pilot submit; 0: no limit)"
    ),
}
# dagman.<category>.maxjobs (pegasus.properties): the categories pilot throttles (pilot.planner.model).
DAGMAN_CATEGORIES = ("stagein", "stageout", "cleanup", "registration")

SELECTOR: dict[str, Key] = {
    "execution.site": _h("the job's site (planner.plan)", jobs_only=True),
    "pfn": _r("pilot runs the transformation catalog's pfn: name the executable there"),
    "grid.jobtype": _r("pilot reaches the site through its site config, not a gateway of a job type: drop it"),
}
HINTS: dict[str, Key] = {**SELECTOR, "executionpool": SELECTOR["execution.site"], "pfnhint": SELECTOR["pfn"]}
TABLE: dict[str, dict[str, Key]] = {
    "pegasus": PEGASUS,
    "condor": CONDOR,
    "globus": GLOBUS,
    "dagman": DAGMAN,
    "hints": HINTS,
    "selector": SELECTOR,
}
# pegasus.<key> in the properties, where pilot reads it differently than as a profile.
PROPERTIES: dict[str, Key] = {
    "transfer.arguments": _h("the options of every pegasus-transfer call of the data jobs (planner.staging)"),
    "transfer.threads": _h("pegasus-transfer's --threads in the data jobs (planner.staging)"),
    "stagein.clusters": _h("stage-in jobs per level (planner.staging)"),
    "stageout.clusters": _h("stage-out jobs per level (planner.staging)"),
    **{
        k: _r(
            "pilot counts its transfer jobs with pegasus.stagein.clusters and pegasus.stageout.clusters: use " "those"
        )
        for k in (
            "stagein.local.clusters",
            "stagein.remote.clusters",
            "stageout.local.clusters",
            "stageout.remote.clusters",
            "bundle.stagein",
        )
    },
}
# A ClassAd attribute (condor::+<name>) for HTCondor's matchmaking or accounting; one that names a container
# runtime or image is CONDOR["container_image"].
CLASSAD = _p(_BATCH)
