"""Command-line entry points: one thin module per subcommand over library calls."""
