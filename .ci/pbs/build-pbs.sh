#!/usr/bin/env bash
# Build OpenPBS 23.06.06 from its upstream source on Debian 12 (bookworm) into /opt/pbs and
# cache the result as a tarball, so that start-pbs.sh skips the build next time (about
# 2.5 minutes on 2 cores). start-pbs.sh runs it when there is no cached build.
#
# Inputs (environment, all optional):
#   OPENPBS_SOURCE   the upstream source archive of release v23.06.06, the one input from outside
#                    the repository (default: ../shared/ci/pbs/openpbs-23.06.06-src.tar.gz beside
#                    the repository); upstream's tag archive is
#                    https://github.com/openpbs/openpbs/archive/refs/tags/v23.06.06.tar.gz
#   PBS_PATCH_DIR    patches applied with patch -p1 (default: patches/ beside this script)
#   PBS_CACHE_TAR    output tarball of /opt/pbs
#                    (default: /var/cache/openpbs/opt-pbs-23.06.06-bookworm-amd64.tar.gz)
#   PBS_BUILD_DIR    where it is unpacked and built (default: /var/tmp/openpbs-build)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
OPENPBS_SOURCE=${OPENPBS_SOURCE:-$REPO/../shared/ci/pbs/openpbs-23.06.06-src.tar.gz}
URL=https://github.com/openpbs/openpbs/archive/refs/tags/v23.06.06.tar.gz
[ -f "$OPENPBS_SOURCE" ] || { echo "build-pbs.sh: no OpenPBS source archive at $OPENPBS_SOURCE: download $URL and set OPENPBS_SOURCE to its path" >&2; exit 1; }
OPENPBS_SOURCE=$(realpath "$OPENPBS_SOURCE")
PBS_PATCH_DIR=${PBS_PATCH_DIR:-$HERE/patches}
PBS_CACHE_TAR=${PBS_CACHE_TAR:-/var/cache/openpbs/opt-pbs-23.06.06-bookworm-amd64.tar.gz}
BUILD_DIR=${PBS_BUILD_DIR:-/var/tmp/openpbs-build}
LOGS=$BUILD_DIR/logs
# Use Debian's python3 (python3-dev headers), not a pyenv/conda python on PATH.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export DEBIAN_FRONTEND=noninteractive

t0=$(date +%s)
echo "== build deps (apt)"
apt-get update -q
apt-get install -y -q build-essential autoconf automake libtool pkg-config \
    libssl-dev libxt-dev libpq-dev libexpat1-dev libedit-dev libncurses-dev \
    libical-dev libhwloc-dev tcl-dev tk-dev python3-dev swig expat \
    postgresql postgresql-contrib postgresql-server-dev-all \
    libx11-dev libxext-dev libxft-dev perl
t1=$(date +%s)

echo "== source $OPENPBS_SOURCE"
rm -rf "$BUILD_DIR"; mkdir -p "$LOGS"
tar -xzf "$OPENPBS_SOURCE" -C "$BUILD_DIR"
cd "$BUILD_DIR"/openpbs-*
# v23.06.06 does not compile against Python 3.11 (eval.h removed); these are
# upstream commits 1d17427c0 ("compile with Python 3.11") and dd2a24640
# ("Add support for python 3.10"), both on master after the 23.06.06 tag.
for p in "$PBS_PATCH_DIR"/*.patch; do
    [ -e "$p" ] || continue
    echo "applying $p"; patch -p1 < "$p"
done

echo "== configure"
./autogen.sh > "$LOGS/build-autogen.log" 2>&1
./configure --prefix=/opt/pbs PYTHON=/usr/bin/python3 > "$LOGS/build-configure.log" 2>&1
t2=$(date +%s)
echo "== make -j$(nproc)"
make -j"$(nproc)" > "$LOGS/build-make.log" 2>&1
t3=$(date +%s)
echo "== make install"
rm -rf /opt/pbs
make install > "$LOGS/build-install.log" 2>&1
chmod 4755 /opt/pbs/sbin/pbs_iff /opt/pbs/sbin/pbs_rcp
t4=$(date +%s)

echo "== cache tarball $PBS_CACHE_TAR"
mkdir -p "$(dirname "$PBS_CACHE_TAR")"
tar -C / -czpf "$PBS_CACHE_TAR" opt/pbs
t5=$(date +%s)
echo "timings: apt=$((t1-t0))s autogen+configure=$((t2-t1))s make=$((t3-t2))s install=$((t4-t3))s tar=$((t5-t4))s total=$((t5-t0))s"
du -sh /opt/pbs "$PBS_CACHE_TAR"
