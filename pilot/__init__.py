"""pilot: Pegasus-style job clustering and a PMC-compatible MPI pilot for batch systems."""

__version__ = "0.1.0"
