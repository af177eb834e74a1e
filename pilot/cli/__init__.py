"""Command-line entry points: ``pilot NAME`` is the module ``pilot.cli.NAME``, listed in ``pilot.cli.main.COMMANDS``.

Each parses its command line, calls the library part that does the work,
prints and picks the exit code.
"""
