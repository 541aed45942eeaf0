#!/usr/bin/env bash
# mount.sh [--policy FILE] SRC MNT: everything a fresh machine needs, then
# `veilfs mount` in the foreground (Ctrl-C unmounts). Installs fuse3 when run as root
# on a Debian-like system and fusermount3 is missing; builds veilfs in release mode.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if ! command -v fusermount3 >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fuse3 >/dev/null
fi
cargo build --release --quiet --manifest-path "$root/Cargo.toml"
args=("$@")
mnt=${args[${#args[@]}-1]:-}
[ -n "$mnt" ] && mkdir -p "$mnt"
exec "$root/target/release/veilfs" mount "$@"
