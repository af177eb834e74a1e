"""What PBS Pro and Torque share: ``qstat -f``'s text, and finding our job in it by name.

Both print ``qstat -f`` as ``Job Id:`` blocks of ``key = value`` lines; Torque
has nothing else (no JSON), and PBS Pro's JSON lacks a job's name before
``-x`` history. After a restart, a job is found by the name it was submitted
under (``providers.base.Scheduler.find``).
"""

from __future__ import annotations

import getpass

from pilot.errors import SubmitError
from providers.commands import run_command
from providers.inputs import Site


def parse_qstat_full(text: str) -> dict[str, dict[str, str]]:
    """``qstat -f`` blocks -> {job id: {key: value}}."""
    jobs: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for line in text.splitlines():
        if line.startswith("Job Id:"):
            current = jobs.setdefault(line.split(":", 1)[1].strip(), {})
        elif current is not None and "=" in line:
            key, value = line.split("=", 1)
            current[key.strip()] = value.strip()
    return jobs


def find_by_name(site: Site, job_name: str) -> str | None:
    """The id of our user's job ``job_name``.<timestamp> ("" if none; None if qstat failed); TorqueProvider
    puts "parsl." in front.

    ``qstat -f`` lists Job_Name in full (plain qstat truncates names) and Job_Owner as user@host.
    """
    try:
        out = run_command(["qstat", "-f"], site.cmd_timeout)
    except SubmitError:
        return None
    if out.returncode != 0:
        return None
    user = getpass.getuser()
    for job_id, job in parse_qstat_full(out.stdout).items():
        name = job.get("Job_Name", "")
        if (
            name.startswith((job_name + ".", "parsl." + job_name + "."))
            and job.get("Job_Owner", "").split("@")[0] == user
        ):
            return job_id
    return ""
