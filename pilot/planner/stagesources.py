"""Where a job's input comes from: the job of the workflow that writes it (``producers``), else its copies in
the replica catalog, which a stage-in job hands pegasus-transfer as its sources (``replica_sources``).

A copy on the execution site comes first, each with a priority pegasus-transfer
tries them in; a path on a site no catalog knows is refused, as pilot's jobs
cannot be said to see that file system, and every URL is checked for what
pegasus-transfer cannot take (pilot.util.safetext). ``check_pair`` refuses a
move pegasus-transfer has no protocol pair for, at plan time rather than when
the transfer job runs.
"""

from __future__ import annotations

from pilot.errors import ConfigError
from pilot.planner import replicas
from pilot.planner.model import Catalogs, Job, Use, Workflow
from pilot.util import safetext

LOCAL_SCHEMES = ("file", "symlink")  # a replica's URL that names a path on its site's file system


def producers(wf: Workflow) -> dict[str, Job]:
    """Which job writes each file; two jobs writing one file is an error naming both."""
    out: dict[str, Job] = {}
    for job in wf.jobs:
        for k, use in enumerate(job.uses):
            if not use.writes:
                continue
            other = out.get(use.lfn)
            if other is not None and other is not job:
                raise ConfigError(
                    f"{job.where}: uses[{k}]: writes {use.lfn!r}, which {other.where} writes too: "
                    "two jobs cannot write one file; give one of the outputs another name"
                )
            out[use.lfn] = job
    return out


def replica_sources(
    cat: Catalogs, job: Job, k: int, use: Use, exec_site: str, known_sites: set[str]
) -> tuple[list[dict], dict[str, str]]:
    """The sources of ``job``'s ``uses[k]``, an input no job writes, and the attributes of its copies (the
    execution site's copy's last, so that they win); ([], {}) for an optional file without a copy."""
    copies = replicas.find(cat, use.lfn)
    if not copies and use.optional:
        return [], {}
    if not copies:
        raise ConfigError(
            f"{job.where}: uses[{k}]: input {use.lfn!r} has no replica in the replica catalog and no job of the "
            f"workflow writes it: add one (ReplicaCatalog().add_replica(SITE, {use.lfn!r}, PATH), replicas.yml "
            "or --replicas FILE), or mark it optional"
        )
    ordered = sorted(copies, key=lambda c: c.site != exec_site)  # a copy on the execution site first
    attributes: dict[str, str] = {}
    for copy in reversed(ordered):
        attributes.update(copy.metadata)
    out = []
    for n, copy in enumerate(ordered):
        url = replicas.url_of(copy.pfn)
        if copy.site not in known_sites and replicas.scheme(url) in LOCAL_SCHEMES:
            # A URL names a source pegasus-transfer reads by itself (montage's inputs on ipac over http, an image
            # on docker_hub), as in Pegasus, where the site is a label; a path is on that site's file system,
            # which only a site of the catalog says pilot's jobs see.
            known = ", ".join(sorted(known_sites))
            raise ConfigError(
                f"{copy.where}: replica {url[:120]!r} of {use.lfn!r} is a path on site "
                f"{copy.site!r}, which no catalog knows (sites: {known}): "
                "add the site to the site catalog, correct the replica's site, or give a URL "
                "pegasus-transfer can read (http://, https://, scp://, s3://, ...)"
            )
        why = safetext.problem_transfer_url(url)
        if why:
            raise ConfigError(f"{copy.where}: replica {url[:120]!r} of {use.lfn!r} {why}")
        out.append({"site_label": copy.site, "url": url, "priority": len(ordered) - n})
    return out, attributes


def check_pair(src: str, dest: str, where: str) -> None:
    """Refuse a move from ``src`` to ``dest`` whose pair of URL schemes pegasus-transfer does not speak."""
    pair = f"{replicas.scheme(src)}->{replicas.scheme(dest)}"
    if pair not in replicas.transfer_protocols():  # read from pegasus-transfer once, when a file moves
        raise ConfigError(
            f"{where}: pegasus-transfer cannot move {src} to {dest} ({pair} is not a protocol pair it "
            "speaks): give the file a replica it can read, e.g. file://, http(s)://, scp://, s3://"
        )
