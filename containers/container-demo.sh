#!/usr/bin/env bash
# One container job, run in this image by pilot submit --site local on podman: a workflow whose job runs in a
# docker container, its image a busybox image built here, offline (podman import, then podman save to the
# docker-archive tar the workflow names). The job reads a file only the image has and its staged input, and
# writes a declared output, which is staged out; the script checks what it says.
# With --casa-wind REPO (a checkout of the repository, mounted read-only) it then runs the stand-in of casa-wind,
# a workflow pegasus-isi publishes, its container jobs in a busybox image built here (tests/standin.py: every pfn
# a script that checks its inputs and writes its outputs), and checks every output was staged out. The stand-in
# is the repository's test code, run from the mount so that the image holds none of it.
#
#   docker run --rm --privileged pilot container-demo.sh      # (or podman run --privileged)
#   docker run --rm --privileged -v "$PWD/tests:/opt/repo/tests:ro" pilot container-demo.sh --casa-wind /opt/repo
#
# podman runs with /etc/containers/containers.conf (runc, ulimits within the host's) and a vfs store of the
# demo's own (overlay cannot be stacked on the image's own overlay), removed at the end.
set -euo pipefail
repo=""
if [ "${1:-}" = "--casa-wind" ]; then
  repo=${2:?"container-demo.sh: --casa-wind needs the repository's directory (mounted read-only), e.g. /opt/repo"}
  [ -f "$repo/tests/standin.py" ] || { echo "container-demo.sh: $repo/tests/standin.py: no such file; mount the" \
    "repository's tests/ there (-v \"\$PWD/tests:$repo/tests:ro\")" >&2; exit 2; }
fi
dir=$(mktemp -d /tmp/container-demo.XXXXXX)
trap 'podman rm -a -f >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
printf '[storage]\ndriver = "vfs"\ngraphroot = "%s/graph"\nrunroot = "%s/run"\n' "$dir" "$dir" >"$dir/storage.conf"
export CONTAINERS_STORAGE_CONF=$dir/storage.conf

# The image: busybox-static, and a file no host has.
root=$dir/root
mkdir -p "$root"/{bin,etc,srv,tmp,proc,sys,dev}
cp "$(command -v busybox)" "$root/bin/busybox"
for applet in sh cat echo sleep true; do ln -s busybox "$root/bin/$applet"; done
echo 'root:x:0:0:root:/root:/bin/sh' >"$root/etc/passwd"
echo 'this line is only in the image' >"$root/etc/only-in-image"
tar -C "$root" -cf "$dir/rootfs.tar" .
podman import -q "$dir/rootfs.tar" localhost/demo-box:latest >/dev/null
podman save -q --format docker-archive -o "$dir/box.tar" localhost/demo-box:latest
podman rmi -f localhost/demo-box:latest >/dev/null  # only the archive has it now, as a pulled image's save

printf '#!/bin/sh\nset -e\ncat /etc/only-in-image "$1" > "$2"\necho "$GREETING" >> "$2"\n' >"$dir/join.sh"
echo 'staged in' >"$dir/input.txt"
cat >"$dir/workflow.yml" <<EOF
pegasus: 5.0.4
name: boxed
siteCatalog:
  sites:
  - name: local
    directories:
    - type: sharedScratch
      path: $dir/scratch
      fileServers:
      - url: file://$dir/scratch
        operation: all
    - type: localStorage
      path: $dir/output
      fileServers:
      - url: file://$dir/output
        operation: all
replicaCatalog:
  replicas:
  - lfn: input.txt
    pfns:
    - site: local
      pfn: file://$dir/input.txt
transformationCatalog:
  transformations:
  - name: join
    sites:
    - name: local
      pfn: file://$dir/join.sh
      type: stageable
      container: box
  containers:
  - name: box
    type: docker
    image: file://$dir/box.tar
    image.site: local
jobs:
- type: job
  name: join
  id: j1
  arguments: [input.txt, out.txt]
  uses:
  - {lfn: input.txt, type: input}
  - {lfn: out.txt, type: output, stageOut: true, registerReplica: false}
  profiles:
    env: {GREETING: hello}
jobDependencies: []
EOF

cd "$dir"
if ! pilot submit workflow.yml --site local --set container_runtimes=podman --dir "$dir/submit" --poll 0.2 \
    --no-monitord; then
  find "$dir/submit" -name '*.err.*' -type f -exec tail -n 20 {} + >&2  # what the tasks said (removed on exit)
  exit 1
fi
expected=$'this line is only in the image\nstaged in\nhello'
if [ "$(cat "$dir/output/out.txt")" != "$expected" ]; then
  echo "container-demo.sh: out.txt is not what the job in the image writes:" >&2
  cat "$dir/output/out.txt" >&2
  exit 1
fi
echo "container-demo.sh: the container job ran in its image on podman and its output was staged out"

if [ -n "$repo" ]; then  # the failing tasks' stderr, or what is wrong with the outputs, is printed by the stand-in
  (cd "$repo" && PYTHONDONTWRITEBYTECODE=1 python -m tests.standin casa-wind "$dir/casa-wind")
fi
