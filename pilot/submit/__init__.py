"""pilot submit: drive a planned submit directory's cluster DAG through Parsl providers."""
