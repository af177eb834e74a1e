"""Where a workflow's files live: the execution site's scratch, the output site's storage, the tools.

Every job of the workflow has one directory on the execution site's shared
scratch (``<scratch>/<user>/pegasus/<workflow>/runNNNN``): inputs are staged
into it and outputs staged out of it to the output site's storage. In
Pegasus' sharedfs data configuration, the one its PMC-only mode uses, every
job runs there. In nonsharedfs and condorio (Pegasus 5's default), which
PegasusLite runs in a directory of the worker node's own, each compute task
runs in a directory of its own on node-local storage, its declared inputs
linked in from the workflow's directory and its outputs moved back there
(planner.taskdirs, pilot.runtime.taskdir); the data jobs still run in the
workflow's directory, which plays the part of Pegasus' staging site.

Defaults as pegasus-plan sets them (CPlanner, PegasusConfiguration):

- a site catalog without ``local`` gets one whose shared scratch is
  ``<parent of the submit directory>/wf-scratch/LOCAL`` and whose shared
  storage is ``<parent of the submit directory>/wf-output``;
- the output site (``--output-sites``) is ``local``, as Pegasus.api's
  ``Workflow.plan()`` sets it (pegasus-plan itself stages out only when given
  one; ``--output-sites none`` does that); its local storage directory is
  used, else its shared storage;
- a directory's URL is its file server's (``operation`` all or put/get),
  else ``file://`` and its path.

Beyond Pegasus: an execution site whose catalog entry names no shared
scratch takes the pilot site config's ``shared_scratch``, else
``<parent of the submit directory>/wf-scratch/<site>``: pilot already needs
the submit directory on a file system the compute nodes see.
"""

from __future__ import annotations

import getpass
import importlib.util
import logging
import os
import re
import shutil
import sys
from dataclasses import dataclass

from pilot.errors import ConfigError
from pilot.planner.model import Catalogs, Directory, DirectoryType, Site
from pilot.sites import SiteConfig
from pilot.util import safetext

log = logging.getLogger("pilot.planner")

SHAREDFS = "sharedfs"
CONFIGURATIONS = ("sharedfs", "condorio", "nonsharedfs")
DEFAULT_OUTPUT_SITE = "local"
VOGROUP = "pegasus"  # the middle part of Pegasus' relative directory (PlannerOptions' default vogroup)
RUN_DIR = re.compile(r".*\.(run\d{4,})\Z")


@dataclass(frozen=True)
class Place:
    """A directory as a job sees it (``path``) and as a transfer names it (``url``, no trailing slash)."""

    site: str
    path: str
    url: str

    def file(self, lfn: str) -> tuple[str, str]:
        """(path, URL) of ``lfn`` in this directory."""
        return f"{self.path}/{lfn}", f"{self.url}/{lfn}"


@dataclass(frozen=True)
class DataLayout:
    exec_site: str
    workdir: Place  # the workflow's directory on the execution site: every job runs there
    output_site: str | None
    storage: Place | None  # the output site's storage, as transfers write it; None: the output site has none
    storage_get: Place | None  # the same directory as readers reach it (what registration records)
    transfer: tuple[str, ...]  # the pegasus-transfer command
    replica_db: str  # the output replica catalog registration writes (Pegasus' JDBCRC file)
    workdir_get: Place | None = None  # the workflow's directory as readers reach it (stage-out reads there)
    configuration: str = SHAREDFS  # pegasus.data.configuration, lower case: sharedfs, nonsharedfs or condorio
    local_scratch: str | None = None  # the execution site's localScratch directory (None: the node's $TMPDIR)

    @property
    def workdir_read(self) -> Place:
        return self.workdir_get or self.workdir


def data_configuration(catalogs: Catalogs, handle: str) -> str:
    """The data configuration (lower case), from the site's profile, else the properties, else sharedfs; a
    value that is none is refused."""
    value = catalogs.properties.get("pegasus.data.configuration")
    where = "pegasus.properties: pegasus.data.configuration"
    site = catalogs.sites.get(handle)
    if site is not None:
        profile = site.profiles.get("pegasus", {}).get("data.configuration")
        if profile:
            value, where = profile, f"site {handle}: profile pegasus data.configuration"
    why = None if value is None else unsupported_configuration(value)
    if why:
        raise ConfigError(f"{where} = {value}: {why}")
    return (value or "").strip().lower() or SHAREDFS


def unsupported_configuration(value: str) -> str | None:
    """Why a value is no data configuration (also read for a properties file's line); None: it is one."""
    if value.strip().lower() in ("", *CONFIGURATIONS):
        return None
    return "is not a data configuration: use sharedfs, nonsharedfs or condorio"


def local_scratch(catalogs: Catalogs, handle: str) -> str | None:
    """The execution site's ``localScratch`` directory in the site catalog (None: none; the node's $TMPDIR). A
    ``$VAR`` left in it is pilot run's to read from the job's environment on each node."""
    entry = catalogs.sites.get(handle)
    directory = entry.directories.get(DirectoryType.LOCAL_SCRATCH) if entry is not None else None
    return directory.path.rstrip("/") or "/" if directory is not None else None


def default_local_site(base: str) -> Site:
    """The ``local`` site pegasus-plan adds when the site catalog has none. Its system is Pegasus' default
    (x86_64 linux), the one a transformation entry that names none is for, whatever this machine is: pegasus-plan
    gives it this machine's arch, which on an ARM laptop would refuse every such entry."""
    site = Site(name="local")
    for dtype, path in (
        (DirectoryType.SHARED_SCRATCH, os.path.join(base, "wf-scratch", "LOCAL")),
        (DirectoryType.SHARED_STORAGE, os.path.join(base, "wf-output")),
    ):
        site.directories[dtype] = Directory(
            type=dtype, path=path, servers=[("file://" + path, "all")], where="the default local site"
        )
    return site


def relative_dir(submit_dir: str, workflow: str) -> str:
    """``<user>/pegasus/<workflow>/<run>``: Pegasus' layout, the run named after the submit directory
    (``runNNNN`` of ``<workflow>.runNNNN``, else the submit directory's own name), so two plans never share it."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "user"
    base = os.path.basename(submit_dir.rstrip("/"))
    m = RUN_DIR.match(base)
    return f"{user}/{VOGROUP}/{workflow}/{m.group(1) if m else base}"


def _place(site: str, directory: Directory, operation: str, tail: str = "") -> Place:
    path = directory.path.rstrip("/") or "/"
    url = directory.url(operation)
    for what, text in (("directory", path), ("file server URL", url)):
        why = safetext.problem_staged_path(text) if url.startswith("file:") else safetext.problem_transfer_url(text)
        if why:  # every job runs there, and pegasus-transfer makes, fills and removes it
            raise ConfigError(f"{directory.where or site}: the {what} {text[:120]!r} {why}")
    if tail:
        path, url = f"{path.rstrip('/')}/{tail}", f"{url}/{tail}"
        why = safetext.problem_staged_path(url) or safetext.problem_line_value(path)
        if why:  # the path is every task's "#pilot cwd=" line
            raise ConfigError(
                f"pilot plan: the workflow's directory {path[:160]!r} (from the submit directory's "
                f"name and the user name) {why}"
            )
    return Place(site, path, url)


def scratch_directory(catalogs: Catalogs, site: SiteConfig, base: str) -> Directory:
    """The execution site's shared scratch: the site catalog's, else the site config's, else under ``base``."""
    entry = catalogs.sites.get(site.handle)
    if entry is not None and DirectoryType.SHARED_SCRATCH in entry.directories:
        return entry.directories[DirectoryType.SHARED_SCRATCH]
    if site.shared_scratch:
        path = os.path.expandvars(os.path.expanduser(site.shared_scratch))
        if not os.path.isabs(path):
            raise ConfigError(
                f"{site.path or site.name}: shared_scratch {site.shared_scratch!r} is not an absolute path "
                "(after expanding $VARS): give the site's scratch directory, e.g. $SCRATCH/pilot"
            )
        return Directory(
            type=DirectoryType.SHARED_SCRATCH, path=path, where=f"{site.path or site.name}: shared_scratch"
        )
    path = os.path.join(base, "wf-scratch", site.handle)
    log.info(
        "site %s has no shared scratch in the site catalog or its config (shared_scratch): using %s", site.handle, path
    )
    return Directory(type=DirectoryType.SHARED_SCRATCH, path=path, where="the default scratch")


def storage_place(catalogs: Catalogs, output_site: str, operation: str = "put") -> Place | None:
    """The output site's local storage, else its shared storage (pegasus-plan's order); None: neither."""
    entry = catalogs.sites.get(output_site)
    if entry is None:
        return None
    for dtype in (DirectoryType.LOCAL_STORAGE, DirectoryType.SHARED_STORAGE):
        if dtype in entry.directories:
            return _place(output_site, entry.directories[dtype], operation)
    return None


def transfer_command() -> tuple[str, ...] | None:
    """pegasus-transfer as the jobs will run it: the pegasus-wms.worker package of this Python (what pilot
    installs), else a Pegasus installation's on PATH; None: neither."""
    spec = importlib.util.find_spec("Pegasus")
    if spec is not None and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            script = os.path.join(location, "cli", "pegasus-transfer.py")
            if os.path.exists(script) and os.path.exists(os.path.join(location, "transfer.py")):
                return (os.path.abspath(sys.executable), script)
    found = shutil.which("pegasus-transfer")
    return (found,) if found else None


def layout(
    catalogs: Catalogs, site: SiteConfig, submit_dir: str, workflow: str, output_site: str | None = DEFAULT_OUTPUT_SITE
) -> DataLayout:
    """Where the workflow's directory and outputs go; adds the default ``local`` site where the catalog has none."""
    configuration = data_configuration(catalogs, site.handle)
    base = os.path.dirname(os.path.abspath(submit_dir))
    if "local" not in catalogs.sites:
        catalogs.sites["local"] = default_local_site(base)
    scratch = scratch_directory(catalogs, site, base)
    workdir = _place(site.handle, scratch, "put", relative_dir(submit_dir, workflow))
    storage = storage_place(catalogs, output_site) if output_site else None
    storage_get = storage_place(catalogs, output_site, "get") if output_site else None
    command = transfer_command()
    if command is None:
        raise ConfigError(
            "pegasus-transfer not found, which stages the workflow's files and makes its directory: "
            "pip install 'pegasus-wms.worker==5.1.*' into pilot's environment (or put a Pegasus "
            "installation's bin on PATH)"
        )
    return DataLayout(
        site.handle,
        workdir,
        output_site,
        storage,
        storage_get,
        command,
        os.path.join(os.path.abspath(submit_dir), f"{workflow}-0.replicas.db"),
        _place(site.handle, scratch, "get", relative_dir(submit_dir, workflow)),
        configuration,
        local_scratch(catalogs, site.handle),
    )
