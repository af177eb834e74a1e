"""Tools that a workflow's data jobs run inside the batch job (registration of outputs)."""
