"""``pilot plan``: cluster a Pegasus workflow into PMC DAGs and batch scripts."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pilot.contracts.clusters import clusters_path
from pilot.errors import ConfigError, OutOfSpace, UsageError
from pilot.planner.cleanup import MODES
from pilot.planner.clustering import DEFAULT_CLUSTER
from pilot.planner.datalayout import DEFAULT_OUTPUT_SITE
from pilot.util import stdstreams
from pilot.util.cmdline import Parser

if TYPE_CHECKING:  # the planner's modules are imported when a plan is made, not to read the options
    from pilot.planner.plan import Plan, PlanRequest
    from pilot.sites import SiteConfig

CLUSTER_HELP = (
    f"how jobs are grouped into batch jobs (default: {DEFAULT_CLUSTER}): whole puts the whole workflow in one batch "
    "job (PMC-only mode, what a pegasus-mpi-cluster user runs); label one batch job per label; horizontal per level "
    "and transformation by the clusters.size/clusters.num/clusters.maxruntime profiles; a comma list applies them in "
    "order (label,horizontal); none makes every job its own batch job"
)


def build_parser(prog: str = "pilot plan") -> argparse.ArgumentParser:
    p = Parser(
        prog=prog,
        description="Cluster a Pegasus 5 workflow (or take a PMC .dag) and write, per cluster, "
        "a PMC DAG and a batch script that runs it with pilot run.",
    )
    add_plan_arguments(p)
    p.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="also log the planner's reasons (such as why runtime clustering left jobs single), "
        "and show tracebacks of errors",
    )
    return p


def add_plan_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("workflow", help="Pegasus 5 YAML workflow (as Pegasus.api writes it), or a PMC .dag")
    p.add_argument("--site", required=True, help="site config: a name from 'pilot sites' or a path to a YAML file")
    p.add_argument(
        "--sites",
        "-s",
        dest="set",
        action="append",
        default=[],
        type=pegasus_site,
        metavar="SITE",
        help="the catalogs' execution site, as pegasus-plan --sites: the same as --set pegasus_site=SITE",
    )
    p.add_argument("--cluster", "-C", default=DEFAULT_CLUSTER, metavar="TECHNIQUES", help=CLUSTER_HELP)
    p.add_argument("--dir", dest="submit_dir", help="submit directory to write (default: ./<workflow>.runNNNN)")
    p.add_argument("--conf", help="Pegasus properties file (default: ./pegasus.properties if present)")
    p.add_argument(
        "-D",
        dest="properties",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Pegasus property over the properties file, as pegasus-plan's -D (repeatable; -Dkey=value too)",
    )
    p.add_argument("--tc", help="transformation catalog YAML (default: inline, else ./transformations.yml)")
    p.add_argument("--sc", help="site catalog YAML (default: inline, else ./sites.yml)")
    p.add_argument(
        "--replicas",
        metavar="FILE",
        help="replica catalog: where the workflow's input files are (default: "
        "inline, else the property pegasus.catalog.replica.file, else ./replicas.yml, else ./rc.txt)",
    )
    p.add_argument(
        "--output-sites",
        "--output-site",
        "-o",
        default=DEFAULT_OUTPUT_SITE,
        metavar="SITE",
        help=f"site whose storage directory outputs marked stageOut go to, and are registered at (default: "
        f"{DEFAULT_OUTPUT_SITE}, as Pegasus.api's Workflow.plan(); none: stage nothing out)",
    )
    p.add_argument(
        "--cleanup",
        choices=MODES,
        default=None,
        help="remove files from the workflow's scratch directory: inplace (default) as soon as no job needs "
        "them, then the directory; leaf: the directory at the end; none: keep everything",
    )
    p.add_argument(
        "--cache",
        action="append",
        default=[],
        metavar="FILE",
        help="more replica files, read after the catalog (repeatable), as pegasus-plan --cache; pilot submit "
        "passes a sub-workflow the outputs of its parent's jobs this way",
    )
    p.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="override a site config key (repeatable)"
    )
    p.add_argument(
        "--cluster-static-bp",
        action="store_true",
        help="also write each cluster's own <cluster>.static.bp, which pegasus-monitord needs to follow a "
        "cluster run by hand with pilot run --monitord-hack (written anyway when the site's pilot_options "
        "hold --monitord-hack; the submit directory's root static.bp maps every task)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="write into a non-empty --dir, and plan every job even where its "
        "outputs are in the replica catalog (no data reuse), as pegasus-plan --force",
    )


def pegasus_site(spec: str) -> str:
    """``--sites SITE``, pegasus-plan's spelling of the execution site, as the override ``pegasus_site=SITE``.

    pegasus-plan takes a comma list and spreads the jobs over its sites; a pilot plan runs on one site, so a list
    is refused rather than cut to its first name.
    """
    names = [n.strip() for n in spec.split(",") if n.strip()]
    if len(names) != 1:
        raise UsageError(f"--sites {spec!r}: pilot plans for one execution site; name one (e.g. --sites condorpool)")
    return f"pegasus_site={names[0]}"


def site_overrides(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--set {pair!r}: expected KEY=VALUE, e.g. --set account=m1234")
        out[key] = value
    return out


def output_site(spec: str) -> str | None:
    """``--output-sites``: one site (pilot stages to one), or none."""
    names = [n.strip() for n in spec.split(",") if n.strip()]
    if not names or names == ["none"]:
        return None
    if len(names) > 1:
        raise UsageError(f"--output-sites {spec}: pilot stages outputs to one site; name one (or none)")
    return names[0]


def plan_request(ns: argparse.Namespace, argv: Sequence[str], site: SiteConfig) -> PlanRequest:
    """The plan the options ask for, on ``site`` (pilot submit's first site), with its estimate."""
    from pilot.planner.plan import PlanRequest

    return PlanRequest(
        workflow=ns.workflow,
        site=site,
        cluster=ns.cluster.split(","),
        submit_dir=ns.submit_dir,
        conf=ns.conf,
        tc=ns.tc,
        sc=ns.sc,
        force=ns.force,
        argv=list(argv),
        replicas=ns.replicas,
        output_site=output_site(ns.output_sites),
        cleanup=ns.cleanup,
        cache=ns.cache,
        cluster_static_bp=ns.cluster_static_bp,
        estimate=True,
        properties=ns.properties,
    )


def planned(req: PlanRequest, prog: str = "pilot plan") -> Plan:
    """The plan; one cut short by a full disk is exit 1, saying what to run once there is room.

    The planner says "cannot write the plan" for any OSError in the submit directory, with the OSError as the
    error's context: a full disk is not the wrong directory it suggests, and the partial plan it leaves makes
    the directory non-empty, so planning again into it needs --force.
    """
    from pilot.planner.plan import plan

    try:
        return plan(req)
    except ConfigError as exc:
        cause = exc.__context__
        if not isinstance(cause, OSError) or not stdstreams.is_no_space(cause):
            raise
        where = req.submit_dir or "the submit directory"
        again = f"--dir {req.submit_dir} --force" if req.submit_dir else "--force and the same --dir"
        raise OutOfSpace(
            f"{prog}: cannot write the plan in {where}: {cause.strerror}; free space and plan again "
            f"with {again} (over the partial plan)"
        ) from None


def main(argv: Sequence[str]) -> int:
    from pilot.sites import load_site

    ns = build_parser().parse_args(list(argv))
    # The planner's warnings (and with -v its reasons) as "pilot plan: ..." lines on stderr.
    logging.basicConfig(
        level=logging.INFO if ns.verbose else logging.WARNING, stream=sys.stderr, format="pilot plan: %(message)s"
    )
    result = planned(plan_request(ns, argv, load_site(ns.site, site_overrides(ns.set))))
    print(
        "\n".join(
            [
                *result.lines(),
                f"cluster DAG: {clusters_path(result.submit_dir)}; submit with: "
                f"pilot submit --site SITE {result.submit_dir}",
            ]
        )
    )
    return 0
