#!/usr/bin/env bash
# Stop the single-node OpenPBS started by start-pbs.sh. Idempotent.
#   stop-pbs.sh            stop daemons (server, sched, MoM, comm, PBS's PostgreSQL),
#                          restore /etc/hosts if start-pbs.sh changed it
#   stop-pbs.sh --purge    ... and remove /var/spool/pbs and /etc/pbs.conf
#                          (keeps /opt/pbs and the cache tarball)
set -euo pipefail
STATE=/var/cache/openpbs
export PATH=/opt/pbs/bin:/opt/pbs/sbin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# Best effort from here on, as before: a daemon that is already down is not an error.
if [ -x /opt/pbs/libexec/pbs_init.d ] && [ -f /etc/pbs.conf ]; then
    /opt/pbs/libexec/pbs_init.d stop || true
fi
# pbs_init.d stop waits for the daemons; make sure PBS's own PostgreSQL is down too.
if [ -d /var/spool/pbs/datastore ] && [ -x /opt/pbs/sbin/pbs_dataservice ]; then
    if /opt/pbs/sbin/pbs_dataservice status >/dev/null 2>&1; then /opt/pbs/sbin/pbs_dataservice stop || true; fi
fi
if [ -f "$STATE/hosts.orig" ]; then
    cat "$STATE/hosts.orig" > /etc/hosts && rm -f "$STATE/hosts.orig" && echo "restored /etc/hosts"
fi
if [ "${1:-}" = "--purge" ]; then
    rm -rf /var/spool/pbs /etc/pbs.conf /etc/pbs.conf.* && echo "removed /var/spool/pbs /etc/pbs.conf"
fi
