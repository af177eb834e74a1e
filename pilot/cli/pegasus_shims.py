"""``pilot pegasus-shims DIR``: executables named pegasus-plan, pegasus-run, ... in DIR/bin that pilot answers.

A Pegasus.api script (``wf.plan(submit=True).wait()``) runs the Pegasus tools of the PEGASUS_HOME
whose ``bin/pegasus-version`` comes first in PATH. Putting DIR/bin first in PATH is the user's explicit
choice to run such scripts through pilot; nothing is written into PATH by pilot itself, so a real
Pegasus install is never shadowed unless asked. Each executable calls pilot.cli.pegasus_tools with
the interpreter pilot is installed in.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Sequence

from pilot.cli.pegasus_tools import SITE_ENV, TOOLS
from pilot.errors import UsageError
from pilot.util.cmdline import Parser

_SCRIPT = """#!{python}
# Written by pilot pegasus-shims: {name} answered by pilot (see pilot pegasus-shims --help).
import os
import sys
{site}
from pilot.cli.pegasus_tools import tool

sys.exit(tool({name!r}, sys.argv[1:]))
"""


def script(name: str, python: str, site: str | None) -> str:
    """The text of the executable NAME; ``site``: the pilot site config its pegasus-plan plans for."""
    setting = f"os.environ.setdefault({SITE_ENV!r}, {site!r})" if site else ""
    return _SCRIPT.format(python=python, name=name, site=setting)


def write_shims(target: str, site: str | None, python: str = sys.executable) -> str:
    """Write TARGET/bin/<tool> for every tool; returns the bin directory."""
    bindir = os.path.join(os.path.abspath(target), "bin")
    try:
        os.makedirs(bindir, exist_ok=True)
        for name in TOOLS:
            path = os.path.join(bindir, name)
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(script(name, python, site))
            os.chmod(path, 0o755)
    except OSError as exc:
        raise UsageError(
            f"pilot pegasus-shims: cannot write {exc.filename or bindir}: {exc.strerror}; "
            "choose a directory you can write"
        ) from None
    return bindir


def main(argv: Sequence[str]) -> int:
    p = Parser(
        prog="pilot pegasus-shims",
        description="Write DIR/bin/pegasus-plan, pegasus-run, pegasus-status, "
        "pegasus-remove (and pegasus-version, pegasus-analyzer, pegasus-statistics, condor_q) answered by "
        "pilot, so that a Pegasus.api script's wf.plan(submit=True).wait() runs its workflow through pilot: "
        "put DIR/bin first in PATH (the line printed) and run the script unchanged.",
    )
    p.add_argument("dir", help="directory to write bin/ into (created if missing)")
    p.add_argument(
        "--site",
        help="pilot site config pegasus-plan plans for (a name from 'pilot sites' or a YAML "
        "path; default: the first of the script's sites=[...] as a pilot site name)",
    )
    p.add_argument("-v", "--verbose", action="count", default=0, help="show tracebacks of errors")
    ns = p.parse_args(list(argv))
    site = (
        os.path.abspath(ns.site) if ns.site and (os.sep in ns.site or ns.site.endswith((".yml", ".yaml"))) else ns.site
    )
    bindir = write_shims(ns.dir, site)
    print(f'export PATH={shlex.quote(bindir)}:"$PATH"')
    return 0
