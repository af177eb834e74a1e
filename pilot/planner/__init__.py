"""pilot plan: Pegasus 5 workflows -> clusters -> PMC DAGs and batch scripts."""
