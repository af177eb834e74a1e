"""Parsl providers that submit pilot's own batch script.

Parsl's batch providers fill in their own template; ``OwnScript`` makes them
write the script ``providers.script.render`` makes from the cluster's
job request instead, so what ``pilot submit`` sends is what ``pilot plan``
wrote, differing only in the job name (unique per submission) and its output
files (named after that job name by Parsl).

Their scheduler commands (sbatch, qsub, qdel, ...) run here without a shell,
in the cluster's directory: Slurm's qsub wrapper writes a job's output files
into the directory qsub runs in, whatever the script says.
"""

from __future__ import annotations

import shlex
import subprocess
from typing import TYPE_CHECKING, Any

from providers.commands import run_saying_waits
from providers.inputs import Request

if TYPE_CHECKING:
    from providers.base import Scheduler


class OwnScript:
    """Mixin before a Parsl provider class; ``request`` is set by ``providers.submit`` before each submit of a
    cluster's job, and left None for a pilot job (pilot.submit.blocks), whose script is Parsl's."""

    pilot_scheduler: Scheduler
    request: Request | None = None
    block_ranks: int = 0  # ranks per node of a pilot job (0: none, a cluster's job)

    def _write_submit_script(
        self, template: Any, script_filename: str, job_name: str | None = None, configs: dict[str, Any] | None = None
    ) -> bool:
        from providers.script import render

        if self.request is None:  # a pilot job (block): Parsl's own script, which starts its worker pool
            wrote: bool
            if job_name is None:  # LocalProvider's own takes the script text and file only
                wrote = super()._write_submit_script(template, script_filename)  # type: ignore[misc]  # a mixin: the Parsl provider it is mixed into (see subclass) has it
            else:
                wrote = super()._write_submit_script(template, script_filename, job_name, configs)  # type: ignore[misc]  # a mixin: the Parsl provider it is mixed into (see subclass) has it
            return wrote
        if job_name is None:  # LocalProvider: <script_dir>/<job name>.sh, output captured by Parsl itself
            job_name = script_filename.rsplit("/", 1)[-1][: -len(".sh")]
        configs = configs or {}
        text = render(
            self.pilot_scheduler,
            self.request,
            job_name=job_name,
            stdout=configs.get("job_stdout_path"),
            stderr=configs.get("job_stderr_path"),
        )
        with open(script_filename, "w", encoding="utf-8") as fh:
            fh.write(text)
        return True

    def submit(self, command: str, tasks_per_node: int, job_name: str = "parsl.pilot") -> Any:
        """Parsl's executor asks a block for one task per node (its worker pool); a pilot job holds clusters of
        ``block_ranks`` ranks per node, so that many are asked for (Slurm's --ntasks-per-node), else an MPI
        launch inside it is refused ("More processors requested than permitted")."""
        if self.request is None and self.block_ranks:
            tasks_per_node = self.block_ranks
        return super().submit(command, tasks_per_node, job_name=job_name)  # type: ignore[misc]  # a mixin: the Parsl provider it is mixed into (see subclass) has it

    def execute_wait(self, cmd: str, timeout: float | None = None) -> tuple[int, str, str]:
        """Parsl's command runner without a shell, in ``script_dir`` (its commands are plain words)."""
        argv = shlex.split(cmd)
        limit = timeout if timeout is not None else getattr(self, "cmd_timeout", None)
        try:
            res = run_saying_waits(argv, limit, cwd=getattr(self, "script_dir", None) or None)
        except OSError as exc:  # as a shell would say it (SlurmProvider probes for sacct when it starts)
            return 127, "", f"{argv[0]}: {exc.strerror}"
        except subprocess.TimeoutExpired:  # as timeout(1) says it: a hung controller is a failed command, not a crash
            return 124, "", f"{argv[0]}: no answer within {limit:g} s (site key cmd_timeout)"
        return res.returncode, res.stdout, res.stderr

    @staticmethod
    def subclass(base: type, scheduler: Scheduler) -> type:
        """``base`` with this mixin in front. Its commands run through ``execute_wait`` even where ``base``
        calls ``super().execute_wait`` (Parsl's LSFProvider submits so), which passes over a mixin in front: a
        class right after ``base``, before its parent, hands such calls back to it."""
        parent = base.__mro__[1]
        back = type(f"Own{parent.__name__}", (parent,), {"execute_wait": _execute_wait_of_self})
        return type(f"Pilot{base.__name__}", (OwnScript, base, back), {"pilot_scheduler": scheduler})


def _execute_wait_of_self(self: Any, cmd: str, timeout: float | None = None) -> tuple[int, str, str]:
    result: tuple[int, str, str] = self.execute_wait(cmd, timeout)  # OwnScript's, first in the provider's classes
    return result
