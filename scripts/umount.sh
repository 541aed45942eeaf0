#!/usr/bin/env bash
# umount.sh MNT: unmount a veilfs mount (the daemon then exits 0).
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 MNT" >&2; exit 2; }
fusermount3 -u "$1" 2>/dev/null || umount "$1"
