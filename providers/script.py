"""Render a scheduler's batch-script template (``providers/templates/*.sh``) for one job request.

Templates use ``${name}`` placeholders. A line naming a value the request
does not have (None: no account, not exclusive, ...) is left out, so a
template lists every directive a scheduler can get. Every value is passed
through ``shlex.quote`` (pilot.util.safetext.shell_word, which refuses a
newline); values in directive lines (``#SBATCH``/``#PBS``,
which schedulers parse themselves, not a shell) must come out of it
unchanged, i.e. be plain words: the site config loader checks that, and
``render`` refuses anything else. Multi-line parts (the site's extra
directive lines, its worker_init, the pilot's command) are assembled from
checked or quoted pieces before they are placed.
"""

from __future__ import annotations

import functools
import re
from importlib import resources
from typing import TYPE_CHECKING

from pilot.errors import ConfigError
from pilot.util.safetext import is_plain, shell_word
from providers.inputs import Request

if TYPE_CHECKING:
    from providers.base import Scheduler

_PLACEHOLDER = re.compile(r"\$\{(\w+)\}")


@functools.cache
def _template(name: str) -> str:
    return (resources.files("providers") / "templates" / name).read_text(encoding="utf-8")


@functools.cache
def _parsed(name: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The template's lines, each with the placeholders it names."""
    return tuple((line, tuple(_PLACEHOLDER.findall(line))) for line in _template(name).splitlines())


def output_files(req: Request, job_name: str) -> tuple[str, str]:
    """The batch job's stdout/stderr next to the DAG; relative when the directory is not a plain word."""
    base = f"{req.workdir}/{job_name}" if is_plain(req.workdir) else job_name
    return base + ".batch.out", base + ".batch.err"


def values(
    scheduler: Scheduler, req: Request, job_name: str, stdout: str | None, stderr: str | None
) -> tuple[dict[str, str | None], dict[str, str | None]]:
    """(words, blocks): words are quoted here; blocks are whole lines already made safe."""
    out, err = output_files(req, job_name)
    words: dict[str, str | None] = {
        "name": job_name,
        "nodes": str(req.nodes),
        "ranks_per_node": str(req.ranks_per_node),
        "ranks": str(req.ranks),
        "walltime": req.walltime,
        "chdir": req.workdir if is_plain(req.workdir) else None,
        "stdout": stdout or out,
        "stderr": stderr or err,
        **scheduler.directives(req),
    }
    blocks: dict[str, str | None] = {
        "scheduler_options": "\n".join(req.scheduler_options) or None,
        "body": req.body(),
    }
    return words, blocks


def render(
    scheduler: Scheduler,
    req: Request,
    job_name: str | None = None,
    stdout: str | None = None,
    stderr: str | None = None,
) -> str:
    """The batch script for ``req`` (named ``job_name``, default the cluster's name)."""
    words, blocks = values(scheduler, req, job_name or req.name, stdout, stderr)
    lines = []
    for line, keys in _parsed(scheduler.template):
        if not keys:
            lines.append(line)
            continue
        if any((words.get(k) if k in words else blocks.get(k)) is None for k in keys if k in words or k in blocks):
            continue
        lines.append(_PLACEHOLDER.sub(lambda m: _value(m.group(1), line, words, blocks), line))  # noqa: B023 - called only within this iteration
    return "\n".join(lines).rstrip("\n") + "\n"


def _value(key: str, line: str, words: dict[str, str | None], blocks: dict[str, str | None]) -> str:
    if key in blocks:
        return blocks[key] or ""
    if key not in words:
        raise KeyError(f"template placeholder ${{{key}}} has no value")
    value = str(words[key])
    quoted = shell_word(value, key) if value else ""
    if line.startswith("#") and quoted != value:
        raise ConfigError(f"{key} {value!r} cannot go into a batch directive: use letters, digits and _.,:=@+/%- only")
    return quoted
