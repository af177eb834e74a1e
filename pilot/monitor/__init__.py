"""Writers of the files that downstream tools read while and after a pilot runs: the summary record, resource
log, jobstate.log (from the run's events), dagman.out, stdio, and the root dagman.out/jobstate.log of a submit
directory (root, joboutput). The formats another part of pilot reads (jobstate.log, the ``[cluster-task]``
record) and the static files a plan writes for monitoring are in pilot.contracts."""
