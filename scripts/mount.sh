#!/usr/bin/env bash
# mount.sh [--policy FILE] SRC MNT: everything a fresh machine needs, then
# `veilfs mount` in the foreground (Ctrl-C unmounts). Installs fuse3 when run as root
# on a Debian-like system and fusermount3 is missing; builds veilfs in release mode
# (with VEILFS set to a built binary, runs that one instead).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if ! command -v fusermount3 >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fuse3 >/dev/null
fi
veilfs=${VEILFS:-}
if [ -z "$veilfs" ]; then
  cargo build --release --quiet --manifest-path "$root/Cargo.toml"
  veilfs="$root/target/release/veilfs"
fi
if [ $# -gt 0 ]; then mkdir -p "${!#}"; fi
exec "$veilfs" mount "$@"
