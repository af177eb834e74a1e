"""Write diamond.yml, the bundled example workflow, with the Pegasus 5 Python API.

    pip install pegasus-wms.api && python make_diamond.py

The Pegasus tutorial's diamond (preprocess, two findrange, analyze) with
standard tools standing in for the programs, so that every job reads and
writes real files: preprocess copies its stdin, f.a, to f.b1 and f.b2 (tee),
each findrange sorts one of them, analyze merges both into f.d (sort). f.a
comes from the replica catalog, inline here, as f.a beside this file (a path
without a scheme is read from the catalog's own directory); f.d is staged out
to the output site and registered. Catalogued for the sites "local" and
"container", with labels so that --cluster label makes three clusters.
"""

from Pegasus.api import (
    File,
    Job,
    Namespace,
    ReplicaCatalog,
    Transformation,
    TransformationCatalog,
    TransformationSite,
    Workflow,
)

SITES = ("local", "container")
PROGRAMS = {"preprocess": "/usr/bin/tee", "findrange": "/usr/bin/sort", "analyze": "/usr/bin/sort"}

tc = TransformationCatalog()
for name, pfn in PROGRAMS.items():
    tx = Transformation(name, namespace="diamond", version="1.0", site=SITES[0], pfn=pfn, is_stageable=False)
    for site in SITES[1:]:
        tx.add_sites(TransformationSite(site, pfn, is_stageable=False))
    tc.add_transformations(tx)

rc = ReplicaCatalog().add_replica("local", "f.a", "f.a")

fa, fb1, fb2, fc1, fc2, fd = (File(n) for n in ("f.a", "f.b1", "f.b2", "f.c1", "f.c2", "f.d"))
wf = Workflow("diamond")
wf.add_transformation_catalog(tc)
wf.add_replica_catalog(rc)
wf.add_jobs(
    Job("preprocess", namespace="diamond", version="1.0", _id="preprocess")
    .add_args(fb1, fb2)
    .set_stdin(fa)
    .add_outputs(fb1, fb2, stage_out=False, register_replica=False)
    .add_profiles(Namespace.PEGASUS, key="label", value="top"),
    Job("findrange", namespace="diamond", version="1.0", _id="left")
    .add_args("-o", fc1, fb1)
    .add_inputs(fb1)
    .add_outputs(fc1, stage_out=False, register_replica=False)
    .add_profiles(Namespace.PEGASUS, key="label", value="middle"),
    Job("findrange", namespace="diamond", version="1.0", _id="right")
    .add_args("-o", fc2, fb2)
    .add_inputs(fb2)
    .add_outputs(fc2, stage_out=False, register_replica=False)
    .add_profiles(Namespace.PEGASUS, key="label", value="middle"),
    Job("analyze", namespace="diamond", version="1.0", _id="analyze")
    .add_args("-o", fd, fc1, fc2)
    .add_inputs(fc1, fc2)
    .add_outputs(fd)
    .add_profiles(Namespace.PEGASUS, key="label", value="bottom"),
)
wf.write("diamond.yml")
