"""The files one part of pilot writes and another reads: each module owns one format, its writer and its reader.

Both sides import the format from here, so neither has to import the other's
package (the planner never imports the driver, the driver never imports the
pilot run):

- ``clusters``: ``clusters.yml``, the cluster DAG; written by ``pilot plan``, read by ``pilot submit``;
- ``submitdir``: ``braindump.yml`` and ``<dag>.static.bp`` of one DAG, what pegasus-monitord needs besides
  dagman.out; written by the planner (or for any PMC DAG), read by pegasus-monitord;
- ``rootfiles``: the submit directory as one Pegasus workflow (root braindump, DAG, static.bp, ``.sub``
  files); written by the planner, read by ``pilot submit``'s monitoring and pegasus-monitord;
- ``result``: ``<dag>.result``, how a pilot run ended; written by ``pilot run``, read by ``pilot submit``.
"""
