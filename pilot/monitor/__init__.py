"""Writers of the files that downstream tools read while and after a pilot runs: records, resource log,
jobstate.log, dagman.out, stdio, and the root dagman.out/jobstate.log of a submit directory (root,
joboutput). The static files a plan writes for monitoring are in pilot.contracts."""
