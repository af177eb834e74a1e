"""The input files of the data jobs: pegasus-transfer's JSON list and pegasus-rc-client's map lines.

Both readers turn what they read into commands or records: pegasus-transfer
builds shell commands from each URL (pilot.util.safetext says which
characters it cannot take), and the registration job splits each map line
as a shell would (pilot.data.register, shlex). So every URL is checked here
once more before it is written, whatever checked it first with the field's
name (an lfn in the workflow reader, a directory in datalayout, a replica in
staging), and every word of a map line is quoted for its reader.
"""

from __future__ import annotations

import json

from pilot.errors import ConfigError
from pilot.util import safetext


def transfer_input(entries: list[dict]) -> str:
    """pegasus-transfer's JSON input for ``entries`` (transfer, mkdir and remove entries), each URL checked."""
    for entry in entries:
        targets = [entry["target"]] if "target" in entry else [*entry["src_urls"], *entry["dest_urls"]]
        for target in targets:
            why = safetext.problem_transfer_url(target["url"])
            if why:
                raise ConfigError(f"pilot plan: the transfer URL {target['url'][:160]!r} {why}")
    return json.dumps(entries)


def map_line(lfn: str, url: str, site: str, attributes: dict[str, str] | None) -> str:
    """A pegasus-rc-client map line, ``LFN PFN site="SITE"`` and the file's metadata as ``key="value"``, as
    Pegasus' registration writes it: the lfn and URL quoted for the shell-like reader (a space in a name
    stays in it), a value's quote and backslash escaped."""
    words = [f'{key}="{_escaped(value)}"' for key, value in (("site", site), *(attributes or {}).items())]
    return " ".join([safetext.shell_word(lfn), safetext.shell_word(url), *words]) + "\n"


def _escaped(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')
