"""What a scheduler plug-in is given: the facts of a site and one batch job's request.

The plug-ins sit below the site layer: ``pilot.sites`` checks a site's
``scheduler``, ``launcher`` and ``scheduler_options`` against their
registries, so they may not import it back. They name what they read here
instead; ``pilot.sites.SiteConfig`` and ``pilot.jobrequest.JobRequest`` are
such objects (tests/planner/test_providers.py checks it). A plug-in that reads
another key of a site or a request adds it here.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class Site(Protocol):
    """The keys of a site config the plug-ins read (``site_configs/*.yaml``)."""

    name: str
    path: str  # the site file ("" for a site made in code): where its errors point
    scheduler: str  # a key of ``providers.SCHEDULERS``
    nodes: int
    ranks_per_node: int | None
    walltime: str  # HH:MM:SS
    partition: str | None
    queue: str | None
    account: str | None
    qos: str | None
    constraint: str | None
    exclusive: bool
    max_queued: int  # at most this many of our jobs queued or running at once
    cmd_timeout: int  # seconds a scheduler command may take


@runtime_checkable
class Request(Protocol):
    """One batch job: what its script asks for and what it runs."""

    name: str
    workdir: str  # the cluster's directory: the job runs there and Parsl writes its files there
    nodes: int
    ranks_per_node: int
    walltime_minutes: float
    queue: str | None
    account: str | None
    qos: str | None
    constraint: str | None
    exclusive: bool
    scheduler_options: list[str]  # whole directive lines, checked by the site layer

    @property
    def ranks(self) -> int: ...

    @property
    def walltime(self) -> str:
        """HH:MM:SS."""

    def command_line(self) -> str:
        """The MPI launch of ``pilot run``, quoted for a shell."""

    def body(self) -> str:
        """What the script runs: the site's worker_init, ``cd`` to ``workdir``, the command line."""
