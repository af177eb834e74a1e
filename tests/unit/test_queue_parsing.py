"""Queue answers parsed from output captured on the real Slurm 22.05 and OpenPBS 23.06 (no scheduler needed).

The files in queue_output/ are real command output; the PBS JSON keeps only
the attributes the parser reads (qstat -f also lists the job's environment).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pilot.contracts.queue import QueueState, QueueStatus
from pilot.errors import SubmitError
from providers import SCHEDULERS
from providers.commands import Output

DATA = Path(__file__).parent / "queue_output"
# Each plug-in's parser of its queue command's output.
parse_squeue = SCHEDULERS["slurm"].parse_query
parse_qstat_json = SCHEDULERS["pbspro"].parse_query
parse_qstat = SCHEDULERS["torque"].parse_query
parse_ps = SCHEDULERS["local"].parse_query


def out(argv: str, rc: int, stdout: str, stderr: str = "") -> Output:
    return Output(tuple(argv.split()), rc, stdout, stderr)


def test_squeue_states_reasons_and_never_starts():
    text = (DATA / "slurm_squeue.txt").read_text()
    got = parse_squeue(["1", "2", "4", "5", "77"], out("squeue -h -j 1,2,4,5,77", 0, text))
    assert got["1"] == QueueStatus(QueueState.RUNNING, "RUNNING")
    assert got["2"].state is QueueState.HELD and got["2"].reason == "JobHeldUser" and not got["2"].never_starts
    assert got["4"] == QueueStatus(QueueState.PENDING, "PartitionNodeLimit", True)  # sbatch -N 3 on one node
    assert got["5"] == QueueStatus(QueueState.PENDING, "PartitionConfig", True)  # -n 100 on 8 CPUs
    assert got["77"].state is QueueState.FINISHED  # squeue forgets ended jobs
    assert set(got) == {"1", "2", "4", "5", "77"}


def test_squeue_curable_reasons_wait():
    text = "9|PENDING|Priority\n10|PENDING|ReqNodeNotAvail, UnavailableNodes:node2\n11|PENDING|Resources\n"
    got = parse_squeue(["9", "10", "11"], out("squeue", 0, text))
    assert all(s.state is QueueState.PENDING and not s.never_starts for s in got.values())
    assert got["10"].reason == "ReqNodeNotAvail, UnavailableNodes:node2"


def test_squeue_single_unknown_id_is_finished_other_failures_raise():
    gone = parse_squeue(["99999"], out("squeue", 1, "", "slurm_load_jobs error: Invalid job id specified\n"))
    assert gone["99999"].state is QueueState.FINISHED
    with pytest.raises(SubmitError) as err:
        parse_squeue(
            ["1"], out("squeue", 1, "", "squeue: error: Unable to contact slurm controller (connect failure)\n")
        )
    assert err.value.transient and "Unable to contact slurm controller" in str(err.value) and "\n" not in str(err.value)


def test_qstat_json_pending_running_held_never():
    text = (DATA / "pbs_qstat_pending.json").read_text()
    got = parse_qstat_json(
        ["0.vm", "1.vm", "2", "3.vm", "99999.vm"],
        out("qstat -x -f -F json", 153, text, "qstat: Unknown Job Id 99999.vm\n"),
    )
    assert got["0.vm"].state is QueueState.RUNNING
    assert got["1.vm"] == QueueStatus(QueueState.PENDING, "Not Running: Not enough free nodes available", False)
    assert got["2"].state is QueueState.PENDING and got["2"].never_starts  # short id matches 2.vm
    assert got["2"].reason.startswith("Can Never Run: Insufficient amount of resource: ncpus")
    assert got["3.vm"].state is QueueState.HELD
    assert got["99999.vm"].state is QueueState.FINISHED


def test_qstat_json_finished_jobs_report_exit_status():
    text = (DATA / "pbs_qstat_finished.json").read_text()
    got = parse_qstat_json(["0.vm", "1.vm"], out("qstat -x -f -F json", 0, text))
    assert got["0.vm"] == QueueStatus(QueueState.FINISHED, "Exit_status 0")


def test_qstat_json_failures_raise_with_stderr():
    with pytest.raises(SubmitError, match="Connection refused"):
        parse_qstat_json(
            ["1.vm"], out("qstat", 1, "", "Connection refused\nqstat: cannot connect to server vm (errno=15010)\n")
        )
    with pytest.raises(SubmitError, match="no JSON"):
        parse_qstat_json(["1.vm"], out("qstat", 0, "garbage"))
    gone = parse_qstat_json(
        ["5.vm"],
        out(
            "qstat",
            153,
            '{\n"timestamp":1,\n"pbs_version":"23.06.06",\n"pbs_server":"vm"\n}',
            "qstat: Unknown Job Id 5.vm\n",
        ),
    )
    assert gone["5.vm"].state is QueueState.FINISHED


def test_torque_wrapper_qstat():
    text = (DATA / "torque_wrapper_qstat.txt").read_text()
    got = parse_qstat(["6", "7", "99999"], out("qstat -f 6 7 99999", 0, text))
    assert got["6"].state is QueueState.RUNNING and got["7"].state is QueueState.PENDING
    assert got["99999"].state is QueueState.FINISHED
    assert parse_qstat(["99999"], out("qstat -f 99999", 153, ""))["99999"].state is QueueState.FINISHED
    with pytest.raises(SubmitError, match="cannot connect"):
        parse_qstat(["6"], out("qstat", 1, "", "qstat: cannot connect to server\n"))


def test_ps_for_local_jobs():
    got = parse_ps(["100", "200", "300"], out("ps -o pid=,stat= -p 100,200,300", 0, "  100 S\n  200 Z\n"))
    assert got["100"].state is QueueState.RUNNING
    assert got["200"].state is QueueState.FINISHED and got["300"].state is QueueState.FINISHED
    assert parse_ps(["1"], out("ps", 1, ""))["1"].state is QueueState.FINISHED


def test_every_scheduler_asks_about_its_own_jobs_only():
    for sched in SCHEDULERS.values():
        argv = sched.query_command(["123", "456"])
        assert "123" in " ".join(argv) and "456" in " ".join(argv), sched.name


def test_never_starts_reasons_are_in_each_reason_map():
    assert SCHEDULERS["slurm"].pending("PartitionTimeLimit").never_starts
    assert not SCHEDULERS["slurm"].pending("Priority").never_starts
    assert SCHEDULERS["pbspro"].pending("Can Never Run").never_starts


def test_parsers_judge_by_the_plug_ins_pending_reasons_and_say_what_a_reason_means():
    """The code is found in the reason as printed (details after it), and its entry decides and explains."""
    slurm = parse_squeue(
        ["4", "10", "12"],
        out(
            "squeue",
            0,
            (DATA / "slurm_squeue.txt").read_text()
            + "10|PENDING|ReqNodeNotAvail, UnavailableNodes:node2\n12|PENDING|JobHeldAdmin\n",
        ),
    )
    assert slurm["4"].meaning == "more nodes than the partition allows"
    assert slurm["4"].explained == "PartitionNodeLimit: more nodes than the partition allows"
    assert slurm["10"].meaning.startswith("a node it needs is unavailable") and not slurm["10"].never_starts
    assert slurm["12"].state is QueueState.HELD and slurm["12"].meaning == "held by an administrator"
    pbs = parse_qstat_json(["1.vm", "2.vm", "3.vm"], out("qstat", 0, (DATA / "pbs_qstat_pending.json").read_text()))
    assert pbs["2.vm"].meaning == SCHEDULERS["pbspro"].pending_reasons["Can Never Run"].meaning
    assert pbs["1.vm"].meaning and pbs["3.vm"].reason == "Job held" and pbs["3.vm"].meaning
    assert parse_squeue(["1"], out("squeue", 0, "1|PENDING|SomethingNew\n"))["1"] == QueueStatus(
        QueueState.PENDING, "SomethingNew"
    )


def test_a_plug_ins_own_reason_table_is_what_its_parser_reads():
    from providers.base import Outlook, PendingReason
    from providers.slurm import Slurm

    class Strict(Slurm):  # a site whose priority queue never moves
        pending_reasons = {**Slurm.pending_reasons, "Priority": PendingReason("never your turn", Outlook.NEVER)}

    got = Strict().parse_query(["9"], out("squeue", 0, "9|PENDING|Priority\n"))["9"]
    assert got.never_starts and got.meaning == "never your turn"
    assert not parse_squeue(["9"], out("squeue", 0, "9|PENDING|Priority\n"))["9"].never_starts


def test_slurm_no_node_in_service_never_starts(monkeypatch):
    """Captured on the three-node Slurm with every node drained, then with one drained."""
    from pilot.sites import SiteConfig
    from providers import slurm

    squeue = (DATA / "slurm_squeue_no_node.txt").read_text()
    assert not slurm.in_service((DATA / "slurm_sinfo_no_node.txt").read_text())
    assert slurm.in_service((DATA / "slurm_sinfo_some_node.txt").read_text())
    answers = {"squeue": squeue, "sinfo": (DATA / "slurm_sinfo_no_node.txt").read_text()}
    monkeypatch.setattr(slurm, "run_command", lambda argv, timeout: Output(tuple(argv), 0, answers[argv[0]]))
    monkeypatch.setattr("providers.base.run_command", lambda argv, timeout: Output(tuple(argv), 0, answers[argv[0]]))
    site = SiteConfig(name="mn", scheduler="slurm", partition="mn")
    got = SCHEDULERS["slurm"].query(site, ["14"])["14"]
    assert got.state is QueueState.PENDING and got.never_starts and "Nodes required for job are DOWN" in got.reason
    answers["sinfo"] = (DATA / "slurm_sinfo_some_node.txt").read_text()
    assert not SCHEDULERS["slurm"].query(site, ["14"])["14"].never_starts  # a node may still take it


def test_a_local_job_id_that_is_not_its_scripts_shell_is_never_tracked_for_cancel(tmp_path):
    """A job id in the state file names a pid: pilot cancel stops it only if it runs the job's own script
    (a pid reused since, or written by hand, is some other process)."""
    import os
    import subprocess
    from pathlib import Path
    from types import SimpleNamespace

    from providers.local import Local
    from tests.waiting import wait_for

    script = tmp_path / "pilot-x-c-1.1795000000.5.sh"
    script.write_text("sleep 30\n")
    provider = SimpleNamespace(resources={})
    Local().track(provider, [(str(os.getpid()), str(tmp_path), "pilot-x-c-1")])
    assert provider.resources == {}  # this test's own process
    shell = subprocess.Popen(["/bin/bash", str(script)])
    try:
        wait_for(lambda: Path(f"/proc/{shell.pid}/cmdline").read_bytes().startswith(b"/bin/bash"), 10, "bash to start")
        Local().track(provider, [(str(shell.pid), str(tmp_path), "pilot-x-c-1")])
        assert list(provider.resources) == [str(shell.pid)]
    finally:
        shell.kill()
        shell.wait()
