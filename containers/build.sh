#!/usr/bin/env bash
# Build containers/Dockerfile without a Docker engine, and optionally run the demo in it.
#
#   bash containers/build.sh            # image "pilot"
#   bash containers/build.sh --demo     # ... then run `pilot demo --site container` inside it (what CI does),
#                                       # and one container job on podman inside it (container-demo.sh),
#                                       # then casa-wind's stand-in (the repository's tests/, mounted read-only)
#
# buildah with chroot isolation (root); FROM debian:bookworm is made here by
# debootstrap and committed locally, so nothing is pulled from a registry. The
# host's CA bundle reaches pip as a build secret: mounted for that one step,
# never stored in the image. The container shares the host's network and processes: a Slurm
# running on the host is stopped first (ports 6817/6818 are fixed), and the
# container's daemons are stopped at the end, since they outlive `buildah run`.
# The container job runs in the image under the host's podman with --privileged, as a laptop's
# docker or podman runs it: podman nested in `buildah run --isolation chroot` starts containers
# (given CAP_SYS_ADMIN, CAP_NET_ADMIN, writable cgroups and a higher nofile limit) but cannot
# enter one it started (`podman exec` lands in the host's root: under chroot isolation the
# image's root is no mount namespace's root), and pilot's workers run their tasks that way.
set -euo pipefail
cd "$(dirname "$0")/.."
IMAGE=${IMAGE:-pilot}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
CA=${HOST_CA:-/etc/ssl/certs/ca-certificates.crt}

missing=""
for tool in buildah debootstrap; do command -v "$tool" >/dev/null || missing="$missing $tool"; done
if [ -n "$missing" ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

if ! buildah inspect --type image debian:bookworm >/dev/null 2>&1; then
  echo "build.sh: making debian:bookworm with debootstrap"
  rootfs=$(mktemp -d)
  debootstrap --variant=minbase bookworm "$rootfs" "$MIRROR" >/dev/null
  ctr=$(buildah from scratch)
  mnt=$(buildah mount "$ctr")
  cp -a "$rootfs"/. "$mnt"/
  buildah umount "$ctr" >/dev/null
  buildah commit --rm "$ctr" debian:bookworm >/dev/null
  rm -rf "$rootfs"
fi

secret=()
[ -s "$CA" ] && secret=(--secret "id=ca,src=$CA")
buildah bud --isolation chroot --pull=false "${secret[@]}" -t "$IMAGE" -f containers/Dockerfile .

if [ "${1:-}" = "--demo" ]; then
  [ -x containers/stop-slurm.sh ] && bash containers/stop-slurm.sh >/dev/null 2>&1 || true
  ctr=$(buildah from "$IMAGE")
  status=0
  buildah run --isolation chroot "$ctr" -- /usr/local/bin/entrypoint.sh pilot demo --site container || status=$?
  buildah run --isolation chroot "$ctr" -- /usr/local/bin/stop-slurm.sh >/dev/null 2>&1 || true
  buildah rm "$ctr" >/dev/null
  if command -v podman >/dev/null; then
    CONTAINERS_CONF=$PWD/containers/containers.conf podman run --rm --privileged --network none \
      -v "$PWD/tests:/opt/repo/tests:ro" --entrypoint /usr/local/bin/container-demo.sh "$IMAGE" \
      --casa-wind /opt/repo || status=$?
  else
    echo "build.sh: podman is not installed here: the container job is not run (apt-get install podman runc)"
  fi
  echo "build.sh: $(buildah images --format '{{.Name}}:{{.Tag}} {{.Size}}' "$IMAGE"); demo exit $status"
  exit $status
fi
