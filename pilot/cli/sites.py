"""``pilot sites``: the shipped site configs, or what one of them sets."""

from __future__ import annotations

from collections.abc import Sequence

from pilot.errors import UsageError
from pilot.util.cmdline import Parser
from pilot.util.tables import table


def main(argv: Sequence[str]) -> int:
    from pilot.sites import shipped_sites, site_path

    p = Parser(prog="pilot sites", description="List the shipped site configs, or show one.")
    p.add_argument("action", nargs="?", choices=["list", "show"], default="list")
    p.add_argument("name", nargs="?")
    p.add_argument("--yaml", action="store_true", help="show: print the site file itself")
    p.add_argument("-v", "--verbose", action="count", default=0)
    ns = p.parse_args(list(argv))
    if ns.action == "show":
        if not ns.name:
            raise UsageError("pilot sites show NAME: which site? (see pilot sites)")
        if ns.yaml:
            with open(site_path(ns.name), encoding="utf-8") as fh:
                print(fh.read(), end="")
        else:
            print(site_summary(ns.name))
        return 0
    from pilot.sites import read_site_file

    rows = []
    for name, path in shipped_sites().items():
        data, _ = read_site_file(path)
        rows.append((name, str(data.get("scheduler", "local")), str(data.get("description", ""))))
    print("\n".join(table(rows)))
    return 0


def site_summary(name: str) -> str:
    """What a user needs to know before submitting to a site, one fact a line."""
    from pilot.sites import load_site

    site = load_site(name, need_required=False)

    def size(mb: int | None) -> str:
        return "-" if mb is None else (f"{mb / 1024:g} GiB" if mb >= 1024 else f"{mb} MiB")

    launcher = site.launcher + (" (from the job's PATH after worker_init)" if site.launcher_from == "path" else "")
    rows = [
        ("site", f"{site.name}: {site.description}" if site.description else site.name),
        ("scheduler", site.scheduler),
        (
            "queue",
            ", ".join(
                f"{k} {v}"
                for k, v in (
                    ("partition", site.partition),
                    ("queue", site.queue),
                    ("qos", site.qos),
                    ("constraint", site.constraint),
                )
                if v
            )
            or "-",
        ),
        ("launcher", f"{launcher} {site.launcher_options}".rstrip()),
        (
            "per node",
            f"{site.cores_per_node or '?'} cores, {size(site.memory_per_node_mb)} memory, "
            f"{site.gpus_per_node if site.gpus_per_node is not None else '?'} GPUs; {site.ranks_per_node} ranks",
        ),
        ("nodes", f"{site.nodes} per job{', whole nodes' if site.exclusive else ''}"),
        ("walltime", f"{site.walltime} per job; max walltime {site.max_walltime or 'not stated'}"),
        ("worker_init", "; ".join(site.worker_init) or "-"),
        ("containers", ", ".join(site.container_runtimes) or "none (jobs in containers are refused)"),
        ("required", ", ".join(f"{k} (pass --set {k}=VALUE)" for k in site.required) or "nothing"),
        ("max queued", str(site.max_queued)),
        ("sources", "\n".join(site.sources) or "-"),
        ("file", site.path),
    ]
    cells = []
    for key, value in rows:
        first, *rest = value.split("\n")
        cells += [(key + ":", first)] + [("", more) for more in rest]
    return "\n".join(table(cells, sep=" "))
