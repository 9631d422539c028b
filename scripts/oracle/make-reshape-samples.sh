#!/usr/bin/env bash
# Arrays the real kernel left part-way through a reshape, for uraid's tests to read without qemu.
#
# For each case the md-oracle VM (Linux 6.1, mdadm 4.2) creates the array on small members, fills
# it with the md-oracle pattern (case number as below), truncates it first for a reshape onto
# fewer members (mdadm --grow --array-size), reads its sha256, adds the new members as spares (if
# the case adds any) and starts `mdadm --grow` (more or fewer members, another chunk size or
# layout), with md's speed limits low. Once the reshape has passed about a third of the array
# (from its end, for fewer members: md runs that reshape backwards) the array is stopped
# (mdadm --stop), so md records reshape_position in every superblock; the
# kernel then assembles it read-only and reads it again mid-reshape.
# The members are written, zstd-compressed, to OUTDIR/NAME/diskK.img.zst with case.txt (the case
# number, the array's size in bytes, its sha256 before the reshape and as the kernel reads it
# assembled read-only mid-reshape, and mdadm --examine of every member).
#
# Made this way (mdadm killed while it watches the reshape, then the array stopped), the
# restripes on the same members (the chunk and layout cases) read differently just after the
# recorded position from the pattern written before, mid-reshape and once the kernel finishes
# them itself (both ways of stopping tried: sync_action frozen, and mdadm --stop). Why is not
# established (see docs/kernel-interop.md); their sha256-mid-reshape is what the kernel makes
# of them, and what uraid must make of them too. (A restripe that also adds a member, mdadm
# --grow --raid-devices with --chunk, hung the kernel's reads of it mid-reshape.) The raid10 grow
# reads differently mid-reshape too, assembled read-only, though it moves no chunk within a
# member's rows differently from a raid5 grow; assembled read-write, the kernel finishes that
# reshape and then reads the data written before (checked on raid10-4to5), so uraid's tests
# judge it against that.
#
# usage: scripts/oracle/make-reshape-samples.sh OUTDIR [NAME-REGEX]
# env:   MD_ORACLE (default ../shared/tools/md-oracle beside the repository)
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
oracle=${MD_ORACLE:-$repo/../shared/tools/md-oracle}
out=${1:?usage: make-reshape-samples.sh OUTDIR [NAME-REGEX]}
filter=${2:-.}
[ -x "$oracle/run-vm.sh" ] || { echo "md-oracle not found at $oracle (set MD_ORACLE)" >&2; exit 2; }

# name | case number | members before | members added | create flags | grow flags (or
# sysfs-fewer:N:SECTORS, N members with the data moved up so far, through sysfs) | member size
# | array size to truncate to first (KiB; for fewer members, as mdadm wants it)
# (1.2 metadata: mdadm moves the data offset, down here, or up for fewer members, which the
# members' room after their data allows, so no backup file is involved; 1.0 metadata: no room
# before the data, so mdadm grows it in place, its critical section backed up on the added
# member, and the sample is left well past that section)
cases=(
  "raid5-4to5|2201|4|1|--level=5 --chunk=64|--raid-devices=5|3M|"
  "raid6-5to6|2202|5|1|--level=6 --chunk=64|--raid-devices=6|3M|"
  "raid5-chunk-64to128|2203|4|0|--level=5 --chunk=64|--chunk=128|3M|"
  "raid6-layout-ls-to-ra|2204|5|0|--level=6 --chunk=64|--layout=right-asymmetric|3M|"
  "raid5-5to4|2205|5|0|--level=5 --chunk=64 --size=2048|sysfs-fewer:4:1024|4M|6144"
  "raid10-4to5|2206|4|1|--level=10 --chunk=64|--raid-devices=5|3M|"
  "raid5-1.0-4to5|2207|4|1|--level=5 --chunk=64 --metadata=1.0|--raid-devices=5|3M|"
  "raid5-0.90-4to5|2208|4|1|--level=5 --chunk=64 --metadata=0.90|--raid-devices=5|3M|"
)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
disks=(); : >"$work/cases"
for spec in "${cases[@]}"; do
  IFS='|' read -r name num n added create grow size truncate_to <<<"$spec"
  [[ "$name" =~ $filter ]] || continue
  mkdir -p "$work/$name"
  for i in $(seq 0 $((n + added - 1))); do truncate -s "$size" "$work/$name/disk$i.img"; disks+=("$work/$name/disk$i.img"); done
  echo "$name|$num|$n|$added|$create|$grow|$truncate_to" >>"$work/cases"
done
[ ${#disks[@]} -gt 0 ] || { echo "no case matches $filter" >&2; exit 2; }
cp "$work/cases" "$work/in-cases"
mkdir -p "$work/in"; cp "$work/cases" "$work/in/cases"

cat >"$work/guest.sh" <<'GUEST'
md=/sys/block/md0/md
set -- $DISKS
while IFS='|' read -r name num n added create grow truncate_to; do
  devs=""
  for _ in $(seq "$n"); do devs="$devs $1"; shift; done
  new=""
  for _ in $(seq "$added"); do new="$new $1"; shift; done
  mdadm --create /dev/md0 --run --homehost=oracle --name="$name" --raid-devices="$n" $create $devs >/tmp/create.log 2>&1 \
    || { echo "$name create FAILED: $(tr '\n' ' ' </tmp/create.log)"; continue; }
  mdadm --wait /dev/md0 >/dev/null 2>&1
  mdpattern write /dev/md0 "$num" >/dev/null
  sync; blockdev --flushbufs /dev/md0
  # Onto fewer members, mdadm wants the array truncated first; what lies past it is given up.
  [ -z "$truncate_to" ] || mdadm --grow /dev/md0 --array-size="$truncate_to" >/dev/null 2>&1
  bytes=$(blockdev --getsize64 /dev/md0)
  before=$(sha256sum </dev/md0 | cut -d' ' -f1)
  echo 20 >/proc/sys/dev/raid/speed_limit_min
  echo 40 >/proc/sys/dev/raid/speed_limit_max
  [ -z "$new" ] || mdadm /dev/md0 --add $new >/dev/null 2>&1
  readback=yes
  # Grown in place (1.0 and 0.90 metadata), the kernel's reads of the array assembled read-only
  # mid-reshape hang (Linux 6.1, as for the shrink below): not read back, judged against the
  # data before.
  case $create in *--metadata=1.0* | *--metadata=0.90*) [ -z "$new" ] || readback=no ;; esac
  case $grow in
    sysfs-fewer:*)
      # Onto fewer members without a backup file, the data offset moving up: mdadm 4.2 sets
      # new_offset before the reshape direction for raid5 (md refuses it: "Cannot set
      # new_offset"), so the reshape is asked of md through sysfs in the order mdadm uses for
      # raid10, the kernel's own path for it.
      : >/tmp/grow.log
      # Assembled read-only mid-reshape, the kernel's reads of such an array hang (Linux 6.1,
      # sha256sum blocked in D state past its timeout), so it is not read back: its
      # sha256-mid-reshape is "unread", and it is judged against the data before.
      readback=no
      echo backwards >$md/reshape_direction
      for d in $md/dev-*; do echo $(( $(cat "$d/offset") + ${grow#*:*:} )) >"$d/new_offset" 2>>/tmp/grow.log; done
      grow=${grow#sysfs-fewer:}
      echo "${grow%%:*}" >$md/raid_disks 2>>/tmp/grow.log
      echo reshape >$md/sync_action 2>>/tmp/grow.log
      sleep 1 & grower=$! ;;
    *)
      # mdadm stays to watch the reshape it starts; it is stopped once the reshape is frozen.
      mdadm --grow /dev/md0 $grow >/tmp/grow.log 2>&1 &
      grower=$! ;;
  esac
  total=$(( bytes / 512 ))
  for _ in $(seq 600); do
    pos=$(cat $md/reshape_position)
    # A third of the way: from the start, or from the end for a reshape run backwards.
    if [ "$(cat $md/reshape_direction 2>/dev/null)" = backwards ]; then
      [ "$pos" != none ] && [ "$pos" -lt $(( total * 2 / 3 )) ] && break
    else
      [ "$pos" != none ] && [ "$pos" -gt $(( total / 3 )) ] && break
    fi
    sleep 0.2
  done
  kill $grower 2>/dev/null; wait $grower 2>/dev/null
  [ "$pos" = none ] && { echo "$name grow FAILED: $(tr '\n' ' ' </tmp/grow.log)"; mdadm --stop /dev/md0; continue; }
  # mdadm --stop of a reshaping array freezes it, lets it run on to a boundary it records,
  # and stops it there. (Frozen through sysfs and stopped instead, a restripe on the same
  # members read back differently just after the recorded position, as it does this way too.)
  mdadm --stop /dev/md0 >/dev/null 2>&1
  echo 1000000 >/proc/sys/dev/raid/speed_limit_max
  echo 1000 >/proc/sys/dev/raid/speed_limit_min
  # Read back mid-reshape, as the kernel assembles it from the members (read-only: the reshape
  # does not go on, and nothing is written).
  during=unread
  if [ "$readback" = no ]; then
    # The position md recorded at the stop, from the superblock (mdadm prints it in KiB).
    first=$(echo $devs | cut -d' ' -f1)
    pos=$(( $(mdadm --examine "$first" | sed -n "s/.*Reshape pos'n : \([0-9]*\).*/\1/p") * 2 ))
  elif mdadm --assemble /dev/md0 --readonly $devs $new >/tmp/asm.log 2>&1; then
    pos=$(cat $md/reshape_position)
    during=$(timeout 300 sha256sum </dev/md0 | cut -d' ' -f1)
    mdadm --stop /dev/md0 >/dev/null 2>&1
  else
    echo "$name read-only assemble FAILED: $(tr '\n' ' ' </tmp/asm.log)"
  fi
  {
    echo "case $num"
    echo "bytes $bytes"
    echo "sha256 $before"
    echo "sha256-mid-reshape $during"
    echo "reshape_position $pos"
    echo "grow: $(tr '\n' ' ' </tmp/grow.log)"
    for d in $devs $new; do echo "### $d"; mdadm --examine "$d" 2>&1; done
  } >"$OUT/$name.txt"
  echo "$name pos=$pos before=$before during=$during"
done <"$IN/cases"
GUEST

"$oracle/run-vm.sh" -t 1500 -i "$work/in" -o "$work/result" "$work/guest.sh" "${disks[@]}"
while IFS='|' read -r name num n added _; do
  [ -f "$work/result/$name.txt" ] || { echo "FAIL $name: no result" >&2; continue; }
  mkdir -p "$out/$name"
  cp "$work/result/$name.txt" "$out/$name/case.txt"
  for i in $(seq 0 $((n + added - 1))); do zstd -q -19 -f "$work/$name/disk$i.img" -o "$out/$name/disk$i.img.zst"; done
done <"$work/cases"
du -sh "$out"
