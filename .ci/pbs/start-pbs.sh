#!/usr/bin/env bash
# Start a single-node OpenPBS (server + scheduler + comm + MoM) on Debian 12 without systemd,
# as root. Idempotent: safe to run again while PBS is running.
#
#   start-pbs.sh           # install (from cache or build), configure, start
#   start-pbs.sh --test    # ... and run a smoke-test job
#
# Uses /var/cache/openpbs/opt-pbs-23.06.06-bookworm-amd64.tar.gz (PBS_CACHE_TAR) if present,
# made by build-pbs.sh; otherwise runs build-pbs.sh first, which needs the upstream source
# archive (OPENPBS_SOURCE, see build-pbs.sh). Put /opt/pbs/bin FIRST in PATH for clients:
# slurm-wlm-torque installs its own qsub/qstat/qdel wrappers in /usr/bin.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
PBS_CACHE_TAR=${PBS_CACHE_TAR:-/var/cache/openpbs/opt-pbs-23.06.06-bookworm-amd64.tar.gz}
export PBS_CACHE_TAR
STATE=/var/cache/openpbs; mkdir -p "$STATE"
export PATH=/opt/pbs/bin:/opt/pbs/sbin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export DEBIAN_FRONTEND=noninteractive
HOST=$(hostname)
t0=$(date +%s.%N)
log() { echo "[start-pbs $(date +%T)] $*"; }

# 1. Runtime packages (only the ones missing).
RUNTIME_PKGS=(postgresql postgresql-contrib libpq5 libical3 libhwloc15 libedit2 libexpat1 expat
  libtcl8.6 libtk8.6 libpython3.11 python3 libssl3 libx11-6 libxext6 libxft2 libxss1 openssh-client)
missing=()
for p in "${RUNTIME_PKGS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ "${#missing[@]}" -gt 0 ]; then
    log "apt-get install ${missing[*]}"
    apt-get update -q && apt-get install -y -q "${missing[@]}"
fi

# 2. Binaries in /opt/pbs.
if [ ! -x /opt/pbs/sbin/pbs_server.bin ]; then
    if [ -f "$PBS_CACHE_TAR" ]; then
        log "extracting $PBS_CACHE_TAR"
        tar -C / -xzpf "$PBS_CACHE_TAR"
    else
        log "no cached build, building"
        "$HERE/build-pbs.sh"
    fi
fi
chmod 4755 /opt/pbs/sbin/pbs_iff /opt/pbs/sbin/pbs_rcp

# 3. PBS refuses loopback addresses (hnls.c get_host_ips / TPP skip 127.0.0.0/8):
#    the hostname must resolve to a non-loopback IPv4 address.
if ! getent ahostsv4 "$HOST" | awk '{print $1}' | grep -qv '^127\.'; then
    IP=$(hostname -I 2>/dev/null | tr ' ' '\n' | grep -E '^[0-9]+\.' | grep -v '^127\.' | head -1 || true)
    [ -n "$IP" ] || IP=$(ip -4 -o addr show scope global 2>/dev/null | awk '{sub(/\/.*/,"",$4); print $4; exit}')
    [ -n "$IP" ] || { echo "no non-loopback IPv4 address found" >&2; exit 1; }
    log "/etc/hosts: $HOST -> $IP (was loopback only); backup in $STATE/hosts.orig"
    [ -f "$STATE/hosts.orig" ] || cp -p /etc/hosts "$STATE/hosts.orig"
    awk -v h="$HOST" '{ if ($1 ~ /^127\./) { o=$1; for (i=2;i<=NF;i++) if ($i!=h) o=o" "$i; if (o!=$1) print o } else print }' \
        /etc/hosts > "$STATE/hosts.new"
    echo "$IP $HOST" >> "$STATE/hosts.new"
    cat "$STATE/hosts.new" > /etc/hosts      # overwrite in place (bind mounts)
fi

# 4. PBS_HOME + /etc/pbs.conf + /etc/init.d/pbs (pbs_postinstall; its systemctl /
#    update-rc.d errors are harmless without systemd).
if [ ! -f /etc/pbs.conf ] || [ ! -d /var/spool/pbs/server_priv ]; then
    log "pbs_postinstall"
    /opt/pbs/libexec/pbs_postinstall > "$STATE/postinstall.last.log" 2>&1 || { cat "$STATE/postinstall.last.log"; exit 1; }
fi
cat > /etc/pbs.conf.new <<CONF
PBS_SERVER=$HOST
PBS_START_SERVER=1
PBS_START_SCHED=1
PBS_START_COMM=1
PBS_START_MOM=1
PBS_EXEC=/opt/pbs
PBS_HOME=/var/spool/pbs
PBS_CORE_LIMIT=unlimited
PBS_SCP=/usr/bin/scp
CONF
if ! cmp -s /etc/pbs.conf.new /etc/pbs.conf; then mv /etc/pbs.conf.new /etc/pbs.conf; else rm -f /etc/pbs.conf.new; fi

# 5. Start daemons (pbs_init.d runs pbs_habitat on first start: creates the
#    datastore (PostgreSQL as user postgres, port 15007), queue workq, node).
if qstat -B >/dev/null 2>&1; then
    log "pbs_server already up"
    /opt/pbs/libexec/pbs_init.d status || true
else
    log "pbs_init.d start"
    /opt/pbs/libexec/pbs_init.d start 2>&1 | grep -vE 'ulimit: .*cannot modify limit|OOM killer' || true
fi
for i in $(seq 1 60); do qstat -B >/dev/null 2>&1 && break; sleep 1; done
qstat -B >/dev/null 2>&1 || { echo "pbs_server did not come up; see /var/spool/pbs/server_logs" >&2; exit 1; }

# 6. Server settings (idempotent).
qmgr -c "set server acl_roots = root@*"       # allow jobs owned by root (else 'Bad UID for job execution')
qmgr -c "set server flatuid = true"
qmgr -c "set server job_history_enable = true" # needed for qstat -x on finished jobs (job_state F)
qmgr -c "set server scheduler_iteration = 10"
pbsnodes "$HOST" >/dev/null 2>&1 || qmgr -c "create node $HOST"
st=
for i in $(seq 1 60); do
    st=$(pbsnodes "$HOST" 2>/dev/null | awk '/^ *state =/{print $3}')
    [ "$st" = free ] && break; sleep 1
done
log "node $HOST state=$st"
[ "$st" = free ] || { pbsnodes -a; exit 1; }
log "PBS up in $(echo "$(date +%s.%N) - $t0" | bc) s"

# 7. Optional smoke test.
if [ "${1:-}" = "--test" ]; then
    d=$(mktemp -d /tmp/pbs-smoke.XXXX); cd "$d"
    j=$(echo 'hostname; echo NODEFILE=$PBS_NODEFILE' | qsub -l select=1:ncpus=1 -l walltime=00:01:00 -N smoke)
    for i in $(seq 1 60); do
        [ "$(qstat -x -f -F json "$j" | python3 -c 'import json,sys; print(list(json.load(sys.stdin)["Jobs"].values())[0]["job_state"])')" = F ] && break
        sleep 1
    done
    for i in $(seq 1 10); do [ -s "smoke.o${j%%.*}" ] && break; sleep 1; done
    log "smoke job $j output: $(tr '\n' ' ' < "smoke.o${j%%.*}")"
fi
