"""The MPI pilot (``pilot run``). Never imports the planner, submit or providers."""
