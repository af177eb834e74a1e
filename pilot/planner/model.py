"""The abstract workflow as the planner sees it: jobs, edges, catalogs, properties."""

from __future__ import annotations

from dataclasses import dataclass, field

Profiles = dict[str, dict[str, str]]  # namespace -> key -> value


@dataclass(eq=False, slots=True)
class Job:
    """One compute job of the abstract workflow."""

    id: str
    name: str
    namespace: str | None = None
    version: str | None = None
    arguments: list[str] = field(default_factory=list)
    profiles: Profiles = field(default_factory=dict)
    source: str = ""  # the workflow file, for errors
    index: int = 0
    parents: list["Job"] = field(default_factory=list)
    children: list["Job"] = field(default_factory=list)

    @property
    def where(self) -> str:
        """``file: jobs[3] (id X)`` for error messages (built only when one is needed)."""
        return f"{self.source}: jobs[{self.index}] (id {self.id})"

    @property
    def tx_key(self) -> tuple[str | None, str, str | None]:
        return (self.namespace, self.name, self.version)

    @property
    def tx_label(self) -> str:
        """``ns::name:version`` as Pegasus prints a transformation."""
        text = self.name
        if self.namespace:
            text = f"{self.namespace}::{text}"
        if self.version:
            text = f"{text}:{self.version}"
        return text


@dataclass
class TransformationSite:
    site: str
    pfn: str
    profiles: Profiles = field(default_factory=dict)


@dataclass
class Transformation:
    name: str
    namespace: str | None = None
    version: str | None = None
    sites: dict[str, TransformationSite] = field(default_factory=dict)
    profiles: Profiles = field(default_factory=dict)


@dataclass
class Site:
    name: str
    profiles: Profiles = field(default_factory=dict)


@dataclass
class Catalogs:
    transformations: dict[tuple[str | None, str, str | None], Transformation] = field(default_factory=dict)
    sites: dict[str, Site] = field(default_factory=dict)
    properties: dict[str, str] = field(default_factory=dict)

    def find_transformation(self, key: tuple[str | None, str, str | None]) -> Transformation | None:
        tx = self.transformations.get(key)
        if tx is not None:
            return tx
        # A job may leave out namespace or version; match on what it gives.
        ns, name, version = key
        for (tns, tname, tver), t in self.transformations.items():
            if tname == name and (ns is None or ns == tns) and (version is None or version == tver):
                return t
        return None


@dataclass
class Workflow:
    name: str
    path: str
    jobs: list[Job] = field(default_factory=list)
    catalogs: Catalogs = field(default_factory=Catalogs)
