#!/usr/bin/env bash
# A file system made through uraid, judged by the real kernel.
#
# Creates a 4-member raid5, mounts it with `uraid mount` + losetup, makes ext4, copies a
# directory tree in, unmounts and fscks; then does it again with one member left out (degraded
# writes). After each phase the member images go to the md-oracle (Linux md in qemu): it must
# assemble them, read the same sha256 as `uraid cat`, and (healthy phase, strict) find
# mismatch_cnt 0. e2fsck checks the image that `uraid cat` reads too.
#
# Needs root (loop devices, mount), /dev/fuse, e2fsprogs and the md-oracle; slow (about a
# minute). usage: scripts/kernel-check-fs.sh   env: URAID, MD_ORACLE as for kernel-check.sh
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
oracle=${MD_ORACLE:-$repo/../shared/tools/md-oracle}
uraid=${URAID:-$repo/target/release/uraid}
[ -x "$oracle/check-images.sh" ] || { echo "md-oracle not found at $oracle (set MD_ORACLE)" >&2; exit 2; }
if [ ! -x "$uraid" ]; then (cd "$repo" && cargo build --release -q -p uraid); fi

work=$(mktemp -d)
mount_pid=; loop=
cleanup() {
  mountpoint -q "$work/mnt" 2>/dev/null && umount "$work/mnt"
  [ -n "$loop" ] && losetup -d "$loop" 2>/dev/null
  [ -n "$mount_pid" ] && kill "$mount_pid" 2>/dev/null && wait "$mount_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
trap 'echo "FAIL at line $LINENO: $BASH_COMMAND" >&2' ERR
mkdir -p "$work/mnt" "$work/disks"
members=()
for i in 0 1 2 3; do truncate -s 48M "$work/disks/disk$i.img"; members+=("$work/disks/disk$i.img"); done
"$uraid" create --level=5 --raid-devices=4 --chunk=64K "${members[@]}" >/dev/null

# Mount the array given by "$@", run "$phase" on the file system, unmount, fsck, stop.
with_fs() {
  local phase=$1; shift
  "$uraid" mount "$@" "$work/array" 2>>"$work/mount.log" &
  mount_pid=$!
  for _ in $(seq 100); do [ "$(stat -c %s "$work/array" 2>/dev/null || echo 0)" -gt 0 ] && break; sleep 0.1; done
  loop=$(losetup -f --show "$work/array")
  $phase
  umount "$work/mnt"
  e2fsck -fn "$loop" >/dev/null
  losetup -d "$loop"; loop=
  kill -TERM "$mount_pid"; wait "$mount_pid"; mount_pid=
}
make_fs() { mkfs.ext4 -q "$loop"; mount "$loop" "$work/mnt"; cp -a "$repo/crates" "$work/mnt/"; }
add_files() { mount "$loop" "$work/mnt"; cp -a "$repo/docs" "$work/mnt/"; diff -r "$repo/crates" "$work/mnt/crates" >/dev/null; }

judge() { # name, strict flag, images...
  local name=$1 strict=$2; shift 2
  local sha dir=$work/judge-$name
  sha=$("$uraid" cat "$@" 2>/dev/null | sha256sum | cut -d' ' -f1)
  "$uraid" cat "$@" 2>/dev/null >"$work/fs.img"
  e2fsck -fn "$work/fs.img" >/dev/null || { echo "FAIL $name: e2fsck of uraid cat output"; return 1; }
  rm -f "$work/fs.img"
  mkdir -p "$dir"; cp --sparse=always "$@" "$dir/"
  if out=$("$oracle/check-images.sh" $strict -e "$sha" "$dir" 2>&1); then
    echo "PASS $name ($(echo "$out" | grep -m1 -o 'mismatch_cnt[^,]*' || echo degraded: no check))"
  else
    echo "FAIL $name"; echo "$out" | tail -20 | sed 's/^/    /'; return 1
  fi
  rm -rf "$dir"
}

with_fs make_fs "${members[@]}"
judge raid5-ext4-healthy -S "${members[@]}"
with_fs add_files "${members[0]}" "${members[1]}" "${members[3]}"
judge raid5-ext4-degraded "" "${members[0]}" "${members[1]}" "${members[3]}"
