"""Small pieces of plumbing every layer may use: one copy each, no pilot imports but the base
(``pilot.errors``, ``pilot.yamlerrors``).

- ``cmdline``: the argument parser whose errors are one line and exit status 2;
- ``argtypes``: the number converters of every command's options;
- ``tables``: aligned text columns;
- ``atomic``: replace a file so that a reader, a crash or a power loss never leaves half of it;
- ``gcpause``: pause the cyclic garbage collector while millions of long-lived objects are built;
- ``flock``: whole-file advisory locks held for a process's life;
- ``graphs``: topological orders, levels and longest paths, and cycles (graphlib) with the cycle named;
- ``boundedload`` (with its event reader ``yamlstream``, and ``yamllines``, the quick line reader of the block
  YAML that Pegasus.api writes): the one way a YAML or JSON file is parsed, bounded in size, nesting, aliases
  and encoding, every problem one line;
- ``safeopen``: files opened only when they are regular files, and written never through a symbolic link;
  ``read_at_most``, the bounded read of any other file whose size pilot does not control;
- ``tail``: the new lines of an append-only file;
- ``procs``: what a process runs (before a pid is signalled);
- ``safetext``: what a user's value may hold for each reader it is written for (a DAG, a .sub file, a
  shell, pegasus-transfer), and its quoting for a shell.
"""
