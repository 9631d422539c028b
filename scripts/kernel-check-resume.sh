#!/usr/bin/env bash
# Rebuilds and resyncs cut short under uraid, finished by the real kernel from uraid's checkpoint.
#
# Rebuilds, for each level: create the array, fill it with random data, leave member 1 out and
# add a fresh image in its place, and stop the rebuild part-way, two ways:
#   stop  `uraid serve --speed-limit-max=4M`, `uraid ctl ... add`, then SIGTERM (a clean stop);
#   kill  `uraid add --speed-limit-max=4M`, then SIGKILL (a crash; the last periodic checkpoint).
# The new member's superblock must then hold a recovery_offset past 0.
# Resyncs, for each level: the array is left dirty (served and killed with SIGKILL after a write),
# then `uraid resync --speed-limit-max=4M` runs and is killed with SIGKILL; the superblocks must
# then hold a resync_offset past 0.
# The md-oracle VM (Linux 6.1, mdadm 4.2) assembles the members read-write with the kernel's pass
# slowed down, reads where it stands a second later (sync_completed), lets it finish, runs a
# check, and hashes the array. Each case must show: the kernel's pass ("recover" or "resync") at
# or past uraid's checkpoint, never from 0; no member missing afterwards; mismatch_cnt 0; and the
# data uraid read before.
# Needs nbdcopy (libnbd-bin).
#
# usage: scripts/kernel-check-resume.sh [NAME-REGEX]   env: URAID, MD_ORACLE (as kernel-check.sh)
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
oracle=${MD_ORACLE:-$repo/../shared/tools/md-oracle}
uraid=${URAID:-$repo/target/release/uraid}
filter=${1:-.}
[ -x "$oracle/run-vm.sh" ] || { echo "md-oracle not found at $oracle (set MD_ORACLE)" >&2; exit 2; }
if [ ! -x "$uraid" ]; then (cd "$repo" && cargo build --release -q -p uraid); fi

# name | create flags | members
levels=(
  "raid1-2|--level=1|2"
  "raid5-4|--level=5 --chunk=64K|4"
  "raid6-5|--level=6 --chunk=64K|5"
  "raid10-4|--level=10 --chunk=64K|4"
)

work=$(mktemp -d)
trap 'kill -9 $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
head -c 40M /dev/urandom >"$work/data"

# Field $2 (recovery_offset or resync_offset, sectors) of the superblock of image $1, or "none".
sb_field() {
  "$uraid" examine --json "$1" | python3 -c 'import json,sys; r=json.load(sys.stdin)[0][sys.argv[1]]; print("none" if r is None else r)' "$2"
}

fail=0
for how in stop kill resync; do
  disks=(); : >"$work/groups-$how"
  for spec in "${levels[@]}"; do
    IFS='|' read -r level flags n <<<"$spec"
    name=$level-$how
    [[ "$name" =~ $filter ]] || continue
    dir=$work/$name; mkdir -p "$dir"
    members=()
    for i in $(seq 0 $((n - 1))); do truncate -s 48M "$dir/disk$i.img"; members+=("$dir/disk$i.img"); done
    # shellcheck disable=SC2086
    "$uraid" create $flags --raid-devices="$n" "${members[@]}" >/dev/null 2>&1
    "$uraid" write --offset=0 "${members[@]}" <"$work/data" 2>/dev/null
    if [ "$how" = resync ]; then
      # Dirty, as a crash under writes leaves it.
      "$uraid" serve --listen="unix:$dir/nbd.sock" "${members[@]}" 2>"$dir/log" &
      pid=$!
      for _ in $(seq 100); do [ -S "$dir/nbd.sock" ] && break; sleep 0.1; done
      head -c 1M "$work/data" | nbdcopy - "nbd+unix:///?socket=$dir/nbd.sock"
      kill -9 "$pid"; wait "$pid" 2>/dev/null || true
      "$uraid" cat "${members[@]}" 2>/dev/null | sha256sum | cut -d' ' -f1 >"$dir/sha"
      "$uraid" resync --speed-limit-max=4M "${members[@]}" >"$dir/log" 2>&1 &
      pid=$!
      sleep 5
      kill -9 "$pid"; wait "$pid" 2>/dev/null || true
      pass=resync field=resync_offset image=$dir/disk0.img
    else
      # Member 1 is lost; a fresh image takes its place.
      rm "$dir/disk1.img"; truncate -s 48M "$dir/disk1.img"
      survivors=("${members[@]:0:1}" "${members[@]:2}")
      "$uraid" cat "${survivors[@]}" 2>/dev/null | sha256sum | cut -d' ' -f1 >"$dir/sha"
      if [ "$how" = stop ]; then
        "$uraid" serve --listen="unix:$dir/nbd.sock" --control="$dir/ctl.sock" --speed-limit-max=4M \
          "${survivors[@]}" 2>"$dir/log" &
        pid=$!
        for _ in $(seq 100); do [ -S "$dir/ctl.sock" ] && break; sleep 0.1; done
        "$uraid" ctl "$dir/ctl.sock" add "$dir/disk1.img" >/dev/null
        sleep 5
        kill -TERM "$pid"; wait "$pid" || true
      else
        "$uraid" add --device="$dir/disk1.img" --speed-limit-max=4M "${survivors[@]}" >"$dir/log" 2>&1 &
        pid=$!
        sleep 5
        kill -9 "$pid"; wait "$pid" 2>/dev/null || true
      fi
      pass=recover field=recovery_offset image=$dir/disk1.img
    fi
    at=$(sb_field "$image" "$field")
    if [ "$at" = none ] || [ "$at" -eq 0 ]; then
      echo "FAIL $name: uraid left no $pass checkpoint ($field $at)"; sed 's/^/    /' "$dir/log"
      fail=1; continue
    fi
    echo "$at" >"$dir/at"
    echo "$name $n $pass" >>"$work/groups-$how"
    disks+=("${members[@]}")
  done
  [ ${#disks[@]} -gt 0 ] || continue
  cat >"$work/guest.sh" <<'GUEST'
md=/sys/block/md0/md
set -- $DISKS
while read -r name n _; do
  devs=""
  for _ in $(seq "$n"); do devs="$devs $1"; shift; done
  # Slow, so where the kernel's rebuild starts can be read a second after it starts.
  echo 1000 >/proc/sys/dev/raid/speed_limit_min
  echo 1000 >/proc/sys/dev/raid/speed_limit_max
  if ! mdadm --assemble /dev/md0 --run $devs >/tmp/asm.log 2>&1; then
    echo "$name assemble FAILED: $(tr '\n' ' ' </tmp/asm.log)"; continue
  fi
  sleep 1
  action=$(cat $md/sync_action)
  start=$(cut -d' ' -f1 $md/sync_completed)
  echo 2000000 >/proc/sys/dev/raid/speed_limit_max
  echo 1000000 >/proc/sys/dev/raid/speed_limit_min
  mdadm --wait /dev/md0 >/dev/null 2>&1
  while [ "$(cat $md/sync_action)" != idle ]; do sleep 0.2; done
  degraded=$(cat $md/degraded)
  echo check >$md/sync_action; sleep 0.5
  mdadm --wait /dev/md0 >/dev/null 2>&1
  while [ "$(cat $md/sync_action)" != idle ]; do sleep 0.2; done
  echo "$name action=$action start=$start degraded=$degraded mismatch_cnt=$(cat $md/mismatch_cnt) sha=$(sha256sum </dev/md0 | cut -d' ' -f1)"
  mdadm --stop /dev/md0 >/dev/null 2>&1
done </in/groups
GUEST
  mkdir -p "$work/in-$how"; cp "$work/groups-$how" "$work/in-$how/groups"
  out=$("$oracle/run-vm.sh" -t 900 -i "$work/in-$how" "$work/guest.sh" "${disks[@]}" 2>/dev/null || true)
  while read -r name _ pass; do
    dir=$work/${name}
    line=$(echo "$out" | grep "^$name " || echo "$name (no result)")
    at=$(cat "$dir/at")
    want_tail="degraded=0 mismatch_cnt=0 sha=$(cat "$dir/sha")"
    start=$(echo "$line" | sed -n 's/.* start=\([0-9]*\) .*/\1/p')
    if [[ "$line" == "$name action=$pass start="*" $want_tail" ]] && [ -n "$start" ] && [ "$start" -ge "$at" ]; then
      echo "PASS $name: uraid's checkpoint at sector $at, the kernel's $pass at $start a second after it began, then whole, clean and the same data"
    else
      echo "FAIL $name: uraid's checkpoint at sector $at; kernel said '$line', wanted action=$pass, start >= $at, '$want_tail'"
      fail=1
    fi
  done <"$work/groups-$how"
done
exit $fail
