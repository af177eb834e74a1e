"""The script a Parsl provider submits is the planner's script (nothing is submitted here).

Parsl's command runner is replaced by one that records the command; the
provider writes its script for real. Only the job name (unique per
submission) and the output files named after it may differ.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pilot.jobrequest import request_for
from pilot.sites import load_site
from providers import SCHEDULERS, provider_for, script_for, submit
from providers.launchers import LAUNCHERS

pytest.importorskip("parsl")

JOB = "pilot-test-merge_x-1"


def submitted(site, req) -> tuple[str, str]:
    """(submit command, script text) as the provider would have sent them."""
    provider = provider_for(site)
    seen = {}

    def fake_execute_wait(cmd, timeout=None):
        seen["cmd"] = cmd
        # what sbatch, bsub and qsub print: each provider reads the id from its own line (qsub's: the last)
        return 0, "Submitted batch job 4242\nJob <4242> is submitted to queue <normal>.\n4242.server", ""

    provider.execute_wait = fake_execute_wait
    assert submit(provider, site, req, JOB).startswith("4242")
    script = seen["cmd"].split()[-1]  # sbatch/qsub [options] SCRIPT
    return seen["cmd"], Path(script).read_text()


def make(tmp_path, name, **sets):
    site = load_site(name, sets)
    workdir = tmp_path / "merge_x"
    workdir.mkdir()
    req = request_for(site, "merge_x", str(workdir), ["--max-wall-time", "25", "merge_x.dag"], ranks=64)
    return site, req


def same_but_name(planner: str, parsl: str, workdir: Path) -> None:
    """Every directive and command equal once the submission's job name and output files are put back."""
    parsl = re.sub(
        re.escape(str(workdir)) + r"/(parsl\.)?" + re.escape(JOB) + r"\.[0-9.]+\.(stdout|stderr)",
        lambda m: f"{workdir}/merge_x.batch.{'out' if m.group(2) == 'stdout' else 'err'}",
        parsl,
    )
    parsl = re.sub(
        r"(parsl\.)?" + re.escape(JOB) + r"\.[0-9]+(\.[0-9]+)?", "merge_x", parsl
    )  # TorqueProvider adds "parsl."
    assert parsl == planner


@pytest.mark.parametrize(
    "name,sets",
    [
        ("perlmutter-cpu", {"account": "m4242"}),
        ("perlmutter-gpu", {}),
        ("frontier", {"account": "abc123"}),
        ("polaris", {"account": "proj42"}),
        ("aurora", {"account": "proj42"}),
        ("stampede3", {}),
        ("container", {}),
    ],
)
def test_provider_submits_the_planner_script(tmp_path, name, sets):
    site, req = make(tmp_path, name, **sets)
    cmd, parsl_script = submitted(site, req)
    same_but_name(script_for(site, req)[1], parsl_script, tmp_path / "merge_x")
    assert parsl_script.count(req.command_line()) == 1  # one MPI launch of all ranks


def test_every_directive_comes_from_the_request(tmp_path):
    site, req = make(tmp_path, "perlmutter-cpu", account="m4242")
    text = script_for(site, req)[1]
    for directive in (
        "--nodes=1",
        "--ntasks-per-node=64",
        "--time=00:30:00",
        "--account=m4242",
        "--qos=regular",
        "--constraint=cpu",
        f"--chdir={tmp_path}/merge_x",
        f"--output={tmp_path}/merge_x/merge_x.batch.out",
        "--exclusive",
    ):
        assert f"#SBATCH {directive}\n" in text, directive


def test_pbs_qsub_gets_queue_and_account_as_the_script_says(tmp_path):
    site, req = make(tmp_path, "polaris", account="proj42")
    cmd, parsl_script = submitted(site, req)
    assert "-q debug" in cmd and "-A proj42" in cmd
    assert "#PBS -q debug\n" in parsl_script and "#PBS -A proj42\n" in parsl_script


def test_torque_provider(tmp_path):
    p = tmp_path / "torque.yaml"
    p.write_text("scheduler: torque\nlauncher: mpiexec\nnodes: 1\nranks_per_node: 3\nwalltime: '00:05:00'\n")
    site, req = make(tmp_path, str(p))
    cmd, parsl_script = submitted(site, req)
    same_but_name(script_for(site, req)[1], parsl_script, tmp_path / "merge_x")
    assert "#PBS -l nodes=1:ppn=3\n" in parsl_script


def test_each_registered_plug_in_has_every_fact_pilot_asks_of_it():
    """What the registries must hold, not which plug-ins there are (docs/new-scheduler.md adds one)."""
    from pilot.planner.gateways import SCHEDULERS as PEGASUS_SCHEDULERS
    from providers.base import PendingReason, Scheduler

    for name, sched in SCHEDULERS.items():
        assert isinstance(sched, Scheduler) and sched.name == name
        assert (Path(__file__).parents[2] / "providers" / "templates" / sched.template).exists(), name
        assert sched.suffix.startswith(".") and (sched.parsl_suffix == "" or sched.parsl_suffix.startswith(".")), name
        assert sched.pegasus_name in PEGASUS_SCHEDULERS, name
        assert sched.single_host or sched.hosts_command, name  # how a pilot job names its nodes
        if sched.directive_prefix:  # a batch system's directive lines
            assert sched.directive_prefix.startswith("#") and " " not in sched.directive_prefix, name
        if sched.memory_directive is not None:  # the line a memory request becomes, one of its directives
            assert sched.directive_prefix and sched.memory_directive.startswith(sched.directive_prefix + " "), name
            assert sched.memory_directive.format(512) != sched.memory_directive, name
        assert all(isinstance(r, PendingReason) and r.meaning for r in sched.pending_reasons.values()), name
        assert sched.query_command(["7"]) and callable(sched.parse_query), name


def test_every_scheduler_and_launcher_a_site_names_is_registered():
    from pilot.sites import SiteConfig, read_site_file, shipped_sites
    from providers.launchers import SITE_LAUNCHERS

    named = [read_site_file(path)[0] for path in shipped_sites().values()]
    assert {raw.get("scheduler", SiteConfig.scheduler) for raw in named} <= set(SCHEDULERS)
    assert {raw.get("launcher", SiteConfig.launcher) for raw in named} | set(SITE_LAUNCHERS) <= set(LAUNCHERS)
    for name, build in LAUNCHERS.items():
        argv = build(f"/opt/{name}", ["--x"], 8, 4)
        assert argv[:2] == [f"/opt/{name}", "--x"] and "8" in argv, name


def test_a_site_and_its_request_are_what_the_plug_ins_read(tmp_path):
    from providers.inputs import Request, Site

    site, req = make(tmp_path, "polaris", account="proj42")
    assert isinstance(site, Site) and isinstance(req, Request)


def test_scheduler_commands_run_without_a_shell_in_the_cluster_directory(tmp_path):
    """Slurm's qsub wrapper writes job output where qsub runs: never the caller's directory."""
    provider = provider_for(load_site("container"))
    provider.script_dir = str(tmp_path)
    assert provider.execute_wait("pwd") == (0, f"{tmp_path}\n", "")
    assert provider.execute_wait("echo $HOME 'a;b'")[1] == "$HOME a;b\n"  # no shell expansion
    assert provider.execute_wait("no-such-command")[0] == 127


def test_a_provider_calling_its_parents_command_runner_still_runs_without_a_shell(tmp_path):
    """Parsl's LSFProvider submits through super().execute_wait, past a mixin in front."""
    from parsl.providers import LSFProvider

    from providers.parsl_script import OwnScript

    provider = OwnScript.subclass(LSFProvider, SCHEDULERS["slurm"])()
    provider.script_dir = str(tmp_path)
    assert super(LSFProvider, provider).execute_wait("echo $HOME 'a;b'") == (0, "$HOME a;b\n", "")
