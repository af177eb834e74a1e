#!/usr/bin/env bash
# stop-multinode-slurm.sh - stop what start-multinode-slurm.sh started. Idempotent.
# Kills only by PID: the daemons from their pid files (checked: right program AND right hostname,
# i.e. inside our UTS namespaces), then any process left in our UTS namespaces (job steps,
# slurmstepd). Never touches the default-port Slurm or the system munged.
#   --keep-munge  leave the private munged running      --purge  also delete state, logs, spool
# Best effort: a process that is already gone is not an error (hence the `|| true`s).
set -euo pipefail
B=${MNSLURM_DIR:-/var/tmp/multinode-slurm}
export SLURM_CONF=$B/etc/slurm.conf
KEEP_MUNGE=0; PURGE=0
for a in "$@"; do case "$a" in --keep-munge) KEEP_MUNGE=1 ;; --purge) PURGE=1 ;; esac; done

hostof() { nsenter -t "$1" -u hostname 2>/dev/null || true; }
# signal_pidfile PIDFILE COMM HOSTNAME: SIGTERM the daemon if it is ours; prints its pid
signal_pidfile() {
  [ -s "$1" ] || return 0
  local p; p=$(cat "$1")
  if [ "$(cat "/proc/$p/comm" 2>/dev/null)" = "$2" ] && [ "$(hostof "$p")" = "$3" ]; then
    if kill "$p" 2>/dev/null; then echo "$p"; fi
  fi
  rm -f "$1"
}
# waitpids PID...: wait up to 15 s for them to end, then SIGKILL what is left
waitpids() {
  for i in $(seq 1 75); do
    local any=0
    for p in "$@"; do if kill -0 "$p" 2>/dev/null; then any=1; fi; done
    [ "$any" = 0 ] && return 0
    sleep 0.2
  done
  kill -9 "$@" 2>/dev/null || true
}

# 1. cancel our jobs while the controller is still up (only our cluster: SLURM_CONF/port 7817)
if [ -s "$B/state/slurmctld.pid" ] && timeout 5 scontrol ping 2>/dev/null | grep -q 'is UP'; then
  mapfile -t jobs < <(squeue -h -o %i 2>/dev/null || true)
  if [ "${#jobs[@]}" -gt 0 ]; then
    scancel --full "${jobs[@]}" 2>/dev/null || true
    for i in $(seq 1 30); do [ -z "$(squeue -h -o %i 2>/dev/null || true)" ] && break; sleep 0.5; done
  fi
fi
# 2. daemons
mapfile -t pids < <(for n in node1 node2 node3; do signal_pidfile "$B/nodes/$n/slurmd.pid" slurmd "$n"; done)
if [ "${#pids[@]}" -gt 0 ]; then waitpids "${pids[@]}"; fi
mapfile -t pids < <(signal_pidfile "$B/state/slurmctld.pid" slurmctld mnctl)
if [ "${#pids[@]}" -gt 0 ]; then waitpids "${pids[@]}"; fi
# 3. leftovers inside our namespaces (slurmstepd, tasks, slurmscriptd): only processes whose UTS
#    namespace is one that start-multinode-slurm.sh created (inodes recorded in $B/uts-ns.list)
# safety: never the namespace of this shell (or of PID 1, where readable)
if [ -f "$B/uts-ns.list" ]; then
  grep -vxF -e "$(readlink "/proc/$$/ns/uts")" -e "$(readlink /proc/1/ns/uts 2>/dev/null || echo none)" \
    "$B/uts-ns.list" > "$B/uts-ns.safe" || true
  mv -f "$B/uts-ns.safe" "$B/uts-ns.list"
fi
if [ -s "$B/uts-ns.list" ]; then
  for sig in TERM KILL; do
    for d in /proc/[0-9]*; do
      grep -qxF "$(readlink "$d/ns/uts" 2>/dev/null || true)" "$B/uts-ns.list" || continue
      kill "-$sig" "${d#/proc/}" 2>/dev/null || true
    done
    if [ "$sig" = TERM ]; then sleep 1; fi
  done
fi
rm -f "$B/uts-ns.list"
# 4. munged (private socket)
if [ "$KEEP_MUNGE" = 0 ] && [ -s "$B/munge/munged.pid" ]; then
  p=$(cat "$B/munge/munged.pid")
  if [ "$(cat "/proc/$p/comm" 2>/dev/null)" = munged ] && tr '\0' ' ' < "/proc/$p/cmdline" | grep -q "$B/munge/munge.socket"; then
    kill "$p" 2>/dev/null || true
    for i in $(seq 1 25); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
  fi
  rm -f "$B/munge/munged.pid"
fi
if [ "$PURGE" = 1 ]; then
  rm -rf "$B/state" "$B/log" "$B/nodes"
fi
echo "stop-multinode-slurm: stopped"
