"""Files that downstream tools read: records, resource log, jobstate.log, dagman.out, stdio, and the root files
that make a submit directory one Pegasus workflow (rootfiles, root, joboutput)."""
