"""Write diamond.yml, the bundled example workflow, with the Pegasus 5 Python API.

    pip install pegasus-wms.api && python make_diamond.py

The Pegasus tutorial's diamond (preprocess, two findrange, analyze) with
/bin/echo standing in for the programs, catalogued for the sites "local" and
"container", and labels so that --cluster label makes three clusters.
"""

from Pegasus.api import File, Job, Namespace, Transformation, TransformationCatalog, TransformationSite, Workflow

SITES = ("local", "container")

tc = TransformationCatalog()
for name in ("preprocess", "findrange", "analyze"):
    tx = Transformation(name, namespace="diamond", version="1.0", site=SITES[0], pfn="/bin/echo", is_stageable=False)
    for site in SITES[1:]:

        tx.add_sites(TransformationSite(site, "/bin/echo", is_stageable=False))
    tc.add_transformations(tx)

fa, fb1, fb2, fc1, fc2, fd = (File(n) for n in ("f.a", "f.b1", "f.b2", "f.c1", "f.c2", "f.d"))
wf = Workflow("diamond")
wf.add_transformation_catalog(tc)
wf.add_jobs(
    Job("preprocess", namespace="diamond", version="1.0", _id="preprocess")
    .add_args("preprocess", "-i", fa, "-o", fb1, fb2).add_inputs(fa).add_outputs(fb1, fb2)
    .add_profiles(Namespace.PEGASUS, key="label", value="top"),
    Job("findrange", namespace="diamond", version="1.0", _id="left")
    .add_args("findrange", "-i", fb1, "-o", fc1).add_inputs(fb1).add_outputs(fc1)
    .add_profiles(Namespace.PEGASUS, key="label", value="middle"),
    Job("findrange", namespace="diamond", version="1.0", _id="right")
    .add_args("findrange", "-i", fb2, "-o", fc2).add_inputs(fb2).add_outputs(fc2)
    .add_profiles(Namespace.PEGASUS, key="label", value="middle"),
    Job("analyze", namespace="diamond", version="1.0", _id="analyze")
    .add_args("analyze", "-i", fc1, fc2, "-o", fd).add_inputs(fc1, fc2).add_outputs(fd)
    .add_profiles(Namespace.PEGASUS, key="label", value="bottom"),
)
wf.write("diamond.yml")
