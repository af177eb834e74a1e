#!/usr/bin/env bash
# Start the container's single-node Slurm (the same script CI uses), then run the command.
set -euo pipefail
start-slurm.sh >/tmp/start-slurm.log 2>&1 || { cat /tmp/start-slurm.log >&2; exit 1; }
exec "$@"
