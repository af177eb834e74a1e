"""Files that downstream tools read: records, resource log, jobstate.log, dagman.out, stdio."""
