"""The files one part of pilot writes and another reads: each module owns one format, its name, writer and reader.

Both sides import the format from here, so neither has to import the other's
package (the planner never imports the driver, the driver never imports the
pilot run), and no other module opens these files by name (tests/unit/test_layout.py
checks it):

- ``clusters``: ``clusters.yml``, the cluster DAG; written by ``pilot plan``, read by ``pilot submit`` and
  ``pilot report``;
- ``rootfiles``: the submit directory as one Pegasus workflow (root braindump, root DAG, static.bp, ``.sub``
  files); written by ``pilot plan``, read by ``pilot submit`` (the root DAG and braindump, pilot.monitor.root)
  and pegasus-monitord;
- ``submitdir``: ``braindump.yml`` and ``<dag>.static.bp`` of one DAG, what pegasus-monitord needs besides
  dagman.out; written by the planner (or for any PMC DAG), read by pegasus-monitord;
- ``submitstate``: ``submit.state.json``, the driver's state; written and read by ``pilot submit``, read by
  ``pilot report``;
- ``result``: ``<dag>.result``, how a pilot run ended; written by ``pilot run`` (and a sub-workflow's nested
  ``pilot submit``), read by ``pilot submit`` and ``pilot report``;
- ``rescue``: ``<dag>.rescue``, the tasks done; written and read whole by ``pilot run``, followed by
  ``pilot submit``;
- ``jobstate``: ``jobstate.log``, job events; written by ``pilot run`` (per task) and ``pilot submit`` (per
  cluster), followed by ``pilot submit``, read by ``pilot report`` and pegasus-monitord;
- ``queue``: ``QueueState`` and ``QueueStatus``, what a scheduler plug-in (providers) answers about a batch
  job; read by ``pilot submit``, which keeps the last state in ``submit.state.json``;
- ``taskrecord``: the ``[cluster-task]`` record of each task attempt; written by ``pilot run`` into the task's
  stdout, read by ``pilot report``, pegasus-exitcode and pegasus-monitord.
"""
