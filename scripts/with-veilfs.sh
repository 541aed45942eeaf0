#!/usr/bin/env bash
# with-veilfs.sh [--policy FILE] SRC -- CMD [ARGS...]
#
# Mounts SRC through veilfs on a temporary mount point, runs CMD there (as its working
# directory, with VEILFS_MNT set to the mount point), unmounts on every exit path
# (also Ctrl-C) and exits with CMD's status.
set -euo pipefail

usage() { echo "usage: $0 [--policy FILE] SRC -- CMD [ARGS...]" >&2; exit 2; }

policy=()
while [ $# -gt 0 ]; do
  case "$1" in
    --policy) [ $# -ge 2 ] || usage; policy=(--policy "$2"); shift 2 ;;
    --) usage ;;
    *) break ;;
  esac
done
[ $# -ge 3 ] || usage
src=$1; shift
[ "$1" = "--" ] || usage
shift

veilfs=${VEILFS:-$(command -v veilfs || true)}
if [ -z "$veilfs" ]; then
  root=$(cd "$(dirname "$0")/.." && pwd)
  cargo build --release --quiet --manifest-path "$root/Cargo.toml"
  veilfs="$root/target/release/veilfs"
fi

mnt=$(mktemp -d "${TMPDIR:-/tmp}/veilfs-mnt.XXXXXX")
log=$(mktemp "${TMPDIR:-/tmp}/veilfs-log.XXXXXX")
pid=
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  if grep -q " $mnt " /proc/self/mountinfo 2>/dev/null; then
    fusermount3 -u "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || true
  fi
  rmdir "$mnt" 2>/dev/null || true
  rm -f "$log"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

"$veilfs" mount "${policy[@]}" "$src" "$mnt" 2>"$log" &
pid=$!
# Wait (bounded) for the ready line, or for the daemon to give up.
for _ in $(seq 1 200); do
  if grep -q "^veilfs: mounted" "$log"; then break; fi
  if ! kill -0 "$pid" 2>/dev/null; then cat "$log" >&2; wait "$pid" || exit $?; exit 1; fi
  sleep 0.05
done
grep -q "^veilfs: mounted" "$log" || { cat "$log" >&2; echo "$0: mount did not become ready" >&2; exit 1; }

status=0
(cd "$mnt" && VEILFS_MNT="$mnt" "$@") || status=$?
exit "$status"
