#!/usr/bin/env bash
# Level takeovers and raid1 device count changes, handed between uraid and the real kernel.
#
#   uraid:NAME   uraid creates the array, fills it with the md-oracle pattern, and changes it
#                with `uraid grow` (--level, or --raid-devices on a raid1), added devices
#                recorded as to be rebuilt. The kernel must assemble the members uraid leaves in
#                the array, show the new level and device count, recover what is to be
#                rebuilt, read the pattern back, and find mismatch_cnt 0 after a check
#                (redundant levels).
#   served:NAME  as uraid:NAME, but the array runs (`uraid assemble`) and its server makes the
#                change (`uraid grow` given the members sends it there), rebuilds the added
#                devices and makes any restripe the change needs before or after it (`uraid ctl
#                NAME wait` waits for all of it) before `uraid stop`; the kernel then judges the
#                members as for uraid:.
#   kernel:NAME  uraid creates and fills the array; the kernel makes the same change with
#                `mdadm --grow` (and recovers any added device); uraid must then read the
#                pattern back byte for byte, see the new level and device count, and find no
#                mismatch with `uraid check` (redundant levels).
#
# usage: scripts/oracle/kernel-check-takeover.sh [NAME-REGEX]
# env:   URAID (default target/release/uraid, built if missing), MD_ORACLE (default
#        ../shared/tools/md-oracle beside the repository)
set -euo pipefail

source "$(dirname "$0")/oracle-env.sh"
filter=${1:-.}

# name | disk files | uraid create (%N: disk N) | the change (uraid grow, or mdadm --grow in the
# guest) | the devices in the array after uraid's change | level | raid devices | degraded once
# recovered | the layout after, where the change restripes (checked in uraid's detail)
cases=(
  "uraid:raid1-2to3|3|-l1 -n2 %0 %1|-n3 %0 %1 --add %2|%0 %1 %2|raid1|3|0"
  "uraid:raid1-2to3-missing|2|-l1 -n2 %0 %1|-n3 --force %0 %1|%0 %1|raid1|3|1"
  "uraid:raid1-2to3-spare|3|-l1 -n2 -x1 %0 %1 %2|-n3 %0 %1 %2|%0 %1 %2|raid1|3|0"
  "uraid:raid1-3to2|3|-l1 -n3 %0 missing %2|-n2 %0 %2|%0 %2|raid1|2|0"
  "uraid:raid1-to-raid5|2|-l1 -n2 %0 %1|--level=5 %0 %1|%0 %1|raid5|2|0"
  "uraid:raid5-to-raid1|2|-l5 -n2 --chunk=64K %0 %1|--level=1 %0 %1|%0 %1|raid1|2|0"
  "uraid:raid1-to-raid0|2|-l1 -n2 %0 %1|--level=0 %0 %1|%0|raid0|1|0"
  "uraid:raid0-to-raid5|4|-l0 -n3 --chunk=64K %0 %1 %2|--level=5 %0 %1 %2 --add %3|%0 %1 %2 %3|raid5|4|0"
  "uraid:raid0-to-raid4|4|-l0 -n3 --chunk=64K %0 %1 %2|--level=4 %0 %1 %2 --add %3|%0 %1 %2 %3|raid4|4|0"
  "uraid:raid5-to-raid0|4|-l5 -n4 --layout=parity-last --chunk=64K %0 %1 %2 %3|--level=0 %0 %1 %2 %3|%0 %1 %2|raid0|3|0"
  "uraid:raid4-to-raid0|4|-l4 -n4 --chunk=64K %0 %1 %2 %3|--level=0 %0 %1 %2 %3|%0 %1 %2|raid0|3|0"
  "uraid:raid5-spare-to-raid0|5|-l5 -n4 -x1 --layout=parity-last --chunk=64K %0 %1 %2 %3 %4|--level=0 %0 %1 %2 %3 %4|%0 %1 %2|raid0|3|0"
  "uraid:raid4-to-raid5|4|-l4 -n4 --chunk=64K %0 %1 %2 %3|--level=5 %0 %1 %2 %3|%0 %1 %2 %3|raid5|4|0"
  "uraid:raid5-to-raid4|4|-l5 -n4 --layout=parity-last --chunk=64K %0 %1 %2 %3|--level=4 %0 %1 %2 %3|%0 %1 %2 %3|raid4|4|0"
  "uraid:raid5-to-raid6|5|-l5 -n4 --chunk=64K %0 %1 %2 %3|--level=6 %0 %1 %2 %3 --add %4|%0 %1 %2 %3 %4|raid6|5|0"
  "uraid:raid5-to-raid6-normal|5|-l5 -n4 --chunk=64K %0 %1 %2 %3|--level=6 --layout=left-symmetric %0 %1 %2 %3 --add %4|%0 %1 %2 %3 %4|raid6|5|0"
  "uraid:raid6-to-raid5|5|-l6 -n5 --layout=left-symmetric-6 --chunk=64K %0 %1 %2 %3 %4|--level=5 %0 %1 %2 %3 %4|%0 %1 %2 %3 %4|raid5|4|0"
  "uraid:raid6-normal-to-raid5|5|-l6 -n5 --chunk=64K %0 %1 %2 %3 %4|--level=5 %0 %1 %2 %3 %4|%0 %1 %2 %3 %4|raid5|4|0|left-symmetric"
  "uraid:raid5-ls-to-raid0|4|-l5 -n4 --chunk=64K %0 %1 %2 %3|--level=0 %0 %1 %2 %3|%0 %1 %2|raid0|3|0"
  "uraid:raid5-ra-to-raid4|4|-l5 -n4 --layout=right-asymmetric --chunk=64K %0 %1 %2 %3|--level=4 %0 %1 %2 %3|%0 %1 %2 %3|raid4|4|0"
  "uraid:raid0-to-raid5-normal|4|-l0 -n3 --chunk=64K %0 %1 %2|--level=5 --layout=left-symmetric %0 %1 %2 --add %3|%0 %1 %2 %3|raid5|4|0|left-symmetric"
  "uraid:raid4-to-raid5-normal|4|-l4 -n4 --chunk=64K %0 %1 %2 %3|--level=5 --layout=right-symmetric %0 %1 %2 %3|%0 %1 %2 %3|raid5|4|0|right-symmetric"
  "uraid:raid0-to-raid10|4|-l0 -n2 --chunk=64K %0 %1|--level=10 %0 %1 --add %2 --add %3|%0 %1 %2 %3|raid10|4|0"
  "uraid:raid10-to-raid0|4|-l10 -n4 --chunk=64K %0 %1 %2 %3|--level=0 %0 %1 %2 %3|%0 %2|raid0|2|0"
  "served:raid1-2to3|3|-l1 -n2 %0 %1|-n3 %0 %1 --add %2|%0 %1 %2|raid1|3|0"
  "served:raid1-2to4-missing|3|-l1 -n2 %0 %1|-n4 --force %0 %1 --add %2|%0 %1 %2|raid1|4|1"
  "served:raid1-2to3-meta1.0|3|-l1 -n2 --metadata=1.0 %0 %1|-n3 %0 %1 --add %2|%0 %1 %2|raid1|3|0"
  "served:raid0-to-raid5|4|-l0 -n3 --chunk=64K %0 %1 %2|--level=5 %0 %1 %2 --add %3|%0 %1 %2 %3|raid5|4|0"
  "served:raid5-to-raid0|4|-l5 -n4 --layout=parity-last --chunk=64K %0 %1 %2 %3|--level=0 %0 %1 %2 %3|%0 %1 %2|raid0|3|0"
  "served:raid5-spare-to-raid0|5|-l5 -n4 -x1 --layout=parity-last --chunk=64K %0 %1 %2 %3 %4|--level=0 %0 %1 %2 %3 %4|%0 %1 %2|raid0|3|0"
  "served:raid5-to-raid6|5|-l5 -n4 --chunk=64K %0 %1 %2 %3|--level=6 %0 %1 %2 %3 --add %4|%0 %1 %2 %3 %4|raid6|5|0"
  "served:raid6-to-raid5|5|-l6 -n5 --layout=left-symmetric-6 --chunk=64K %0 %1 %2 %3 %4|--level=5 %0 %1 %2 %3 %4|%0 %1 %2 %3 %4|raid5|4|0"
  "served:raid5-to-raid6-normal|5|-l5 -n4 --chunk=64K %0 %1 %2 %3|--level=6 --layout=left-symmetric %0 %1 %2 %3 --add %4|%0 %1 %2 %3 %4|raid6|5|0|left-symmetric"
  "served:raid6-normal-to-raid5|5|-l6 -n5 --chunk=64K %0 %1 %2 %3 %4|--level=5 %0 %1 %2 %3 %4|%0 %1 %2 %3 %4|raid5|4|0|left-symmetric"
  "served:raid5-ls-to-raid0|4|-l5 -n4 --chunk=64K %0 %1 %2 %3|--level=0 %0 %1 %2 %3|%0 %1 %2|raid0|3|0"
  "served:raid0-to-raid5-normal|4|-l0 -n3 --chunk=64K %0 %1 %2|--level=5 --layout=left-symmetric %0 %1 %2 --add %3|%0 %1 %2 %3|raid5|4|0|left-symmetric"
  "served:raid1-to-raid5|2|-l1 -n2 %0 %1|--level=5 %0 %1|%0 %1|raid5|2|0"
  "served:raid0-to-raid10|4|-l0 -n2 --chunk=64K %0 %1|--level=10 %0 %1 --add %2 --add %3|%0 %1 %2 %3|raid10|4|0"
  "served:raid10-to-raid0|4|-l10 -n4 --chunk=64K %0 %1 %2 %3|--level=0 %0 %1 %2 %3|%0 %2|raid0|2|0"
  "uraid:raid1-2to3-meta1.0|3|-l1 -n2 --metadata=1.0 %0 %1|-n3 %0 %1 --add %2|%0 %1 %2|raid1|3|0"
  "uraid:raid0-to-raid5-meta1.0|4|-l0 -n3 --metadata=1.0 --chunk=64K %0 %1 %2|--level=5 %0 %1 %2 --add %3|%0 %1 %2 %3|raid5|4|0"
  "uraid:raid5-to-raid6-meta1.1|5|-l5 -n4 --metadata=1.1 --chunk=64K %0 %1 %2 %3|--level=6 %0 %1 %2 %3 --add %4|%0 %1 %2 %3 %4|raid6|5|0"
  "kernel:raid1-2to3|3|-l1 -n2 %0 %1|--raid-devices=3 --add %2|%0 %1 %2|raid1|3|0"
  "kernel:raid1-to-raid5|2|-l1 -n2 %0 %1|--level=5|%0 %1|raid5|2|0"
  "kernel:raid5-to-raid1|2|-l5 -n2 --chunk=64K %0 %1|--level=1|%0 %1|raid1|2|0"
  "kernel:raid1-to-raid0|2|-l1 -n2 %0 %1|--level=0|%0|raid0|1|0"
  "kernel:raid0-to-raid5|4|-l0 -n3 --chunk=64K %0 %1 %2|--level=5 --layout=parity-last --add %3|%0 %1 %2 %3|raid5|4|0"
  "kernel:raid5-to-raid0|4|-l5 -n4 --layout=parity-last --chunk=64K %0 %1 %2 %3|--level=0|%0 %1 %2|raid0|3|0"
  "kernel:raid5-spare-to-raid0|5|-l5 -n4 -x1 --layout=parity-last --chunk=64K %0 %1 %2 %3 %4|--level=0|%0 %1 %2|raid0|3|0"
  "kernel:raid4-to-raid5|4|-l4 -n4 --chunk=64K %0 %1 %2 %3|--level=5|%0 %1 %2 %3|raid5|4|0"
  "kernel:raid5-to-raid4|4|-l5 -n4 --layout=parity-last --chunk=64K %0 %1 %2 %3|--level=4|%0 %1 %2 %3|raid4|4|0"
  "kernel:raid5-to-raid6|5|-l5 -n4 --chunk=64K %0 %1 %2 %3|--level=6 --layout=preserve --add %4|%0 %1 %2 %3 %4|raid6|5|0"
  "kernel:raid6-to-raid5|5|-l6 -n5 --layout=left-symmetric-6 --chunk=64K %0 %1 %2 %3 %4|--level=5|%0 %1 %2 %3 %4|raid5|4|0"
  "kernel:raid6-normal-to-raid5|5|-l6 -n5 --chunk=64K %0 %1 %2 %3 %4|--level=5|%0 %1 %2 %3 %4|raid5|4|0|left-symmetric"
  "kernel:raid0-to-raid5-normal|4|-l0 -n3 --chunk=64K %0 %1 %2|--level=5 --add %3|%0 %1 %2 %3|raid5|4|0|left-symmetric"
  "kernel:raid0-to-raid10|4|-l0 -n2 --chunk=64K %0 %1|--level=10 --add %2 --add %3|%0 %1 %2 %3|raid10|4|0"
  "kernel:raid10-to-raid0|4|-l10 -n4 --chunk=64K %0 %1 %2 %3|--level=0|%0 %2|raid0|2|0"
)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The VM takes at most 24 disks: cases go to it in batches (batch B: $work/in.B/groups and
# $work/disks.B, one path a line).
batch=0; in_batch=0; : >"$work/expect"
mkdir -p "$work/in.0"; : >"$work/in.0/groups"; : >"$work/disks.0"
# Start a new batch unless $1 more disks fit in this one.
room_for() {
  if [ $((in_batch + $1)) -gt 24 ]; then
    batch=$((batch + 1)); in_batch=0
    mkdir -p "$work/in.$batch"; : >"$work/in.$batch/groups"; : >"$work/disks.$batch"
  fi
  in_batch=$((in_batch + $1))
}

# $1 with every %N replaced by the path of disk N of the case in $2.
expand() {
  local text=$1 dir=$2 i
  for i in 5 4 3 2 1 0; do text=${text//%$i/$dir/disk$i.img}; done
  echo "$text"
}

layout_of() { "$uraid" detail --json "$@" | python3 -c 'import json,sys; print(json.load(sys.stdin)["layout"])'; }
size_of() { "$uraid" detail --json "$@" | python3 -c 'import json,sys; print(json.load(sys.stdin)["array_size_bytes"])'; }

fail=0
num=3300
for spec in "${cases[@]}"; do
  IFS='|' read -r name files create change after level raid degraded layout <<<"$spec"
  num=$((num + 1))
  [[ "$name" =~ $filter ]] || continue
  dir=$work/$num; mkdir -p "$dir"
  for i in $(seq 0 $((files - 1))); do truncate -s 12M "$dir/disk$i.img"; done
  # shellcheck disable=SC2046
  "$uraid" create --name="t$num" $(expand "$create" "$dir") >/dev/null 2>&1
  before=$(expand "$create" "$dir" | tr ' ' '\n' | grep '^/' | tr '\n' ' ')
  # shellcheck disable=SC2086
  bytes=$(size_of $before)
  "$mdpattern" gen "$num" $((bytes / 512)) >"$dir/data"
  # shellcheck disable=SC2086
  "$uraid" write --offset=0 $before <"$dir/data" 2>/dev/null
  sha=$(sha256sum <"$dir/data" | cut -d' ' -f1)
  case $name in
    uraid:* | served:*)
      if [[ $name == served:* ]]; then
        # The array runs under uraid, and its server makes the change and the rebuild.
        run=$dir/run; mkdir -p "$run"
        # shellcheck disable=SC2046,SC2086
        if ! { URAID_RUNTIME_DIR=$run "$uraid" assemble $before &&
          URAID_RUNTIME_DIR=$run "$uraid" grow $(expand "$change" "$dir") &&
          URAID_RUNTIME_DIR=$run "$uraid" ctl "t$num" wait &&
          URAID_RUNTIME_DIR=$run "$uraid" stop "t$num"; } >"$dir/log" 2>&1; then
          echo "FAIL $name: the served change failed"; sed 's/^/    /' "$dir/log"; fail=1
          URAID_RUNTIME_DIR=$run "$uraid" stop "t$num" >/dev/null 2>&1 || true
          continue
        fi
      # shellcheck disable=SC2046
      elif ! "$uraid" grow $(expand "$change" "$dir") >"$dir/log" 2>&1; then
        echo "FAIL $name: uraid grow refused"; sed 's/^/    /' "$dir/log"; fail=1; continue
      fi
      members=$(expand "$after" "$dir")
      # shellcheck disable=SC2086
      if [ -n "$layout" ] && [ "$(layout_of $members)" != "$layout" ]; then
        echo "FAIL $name: uraid's detail after the change names layout '$(layout_of $members)', not $layout"; fail=1; continue
      fi
      # shellcheck disable=SC2086
      if [ "$("$uraid" cat $members 2>/dev/null | head -c "$bytes" | sha256sum | cut -d' ' -f1)" != "$sha" ]; then
        echo "FAIL $name: uraid cat after the change does not read the pattern"; fail=1; continue
      fi
      # The kernel gets the members in the array after the change.
      n=$(echo "$members" | wc -w); room_for "$n"
      for m in $members; do echo "$m" >>"$work/disks.$batch"; done
      echo "$name|$n|$bytes||" >>"$work/in.$batch/groups"
      ;;
    kernel:*)
      # The kernel gets the members before the change, and the devices it adds.
      room_for "$files"
      for i in $(seq 0 $((files - 1))); do echo "$dir/disk$i.img" >>"$work/disks.$batch"; done
      echo "$name|$files|$bytes|$(echo "$before" | wc -w)|$change" >>"$work/in.$batch/groups"
      ;;
  esac
  echo "$name|$num|$bytes|$sha|$level|$raid|$degraded|$after|$change|$layout" >>"$work/expect"
done
[ -s "$work/expect" ] || { echo "no case matches $filter" >&2; exit 2; }

cat >"$work/guest.sh" <<'GUEST'
md=/sys/block/md0/md
set -- $DISKS
echo 500000 >/proc/sys/dev/raid/speed_limit_max
settle() { # wait until no resync, recovery or reshape runs
  for _ in $(seq 3000); do
    # raid0 has no sync_action.
    action=$(cat $md/sync_action 2>/dev/null || echo idle)
    [ "$action" = idle ] && ! grep -q -E 'recovery|resync|reshape' /proc/mdstat && break
    sleep 0.2
  done
}
while IFS='|' read -r name n bytes first change; do
  devs=""; i=0
  for _ in $(seq "$n"); do devs="$devs $1"; eval "d$i=$1"; i=$((i + 1)); shift; done
  if [ -n "$first" ]; then
    # The kernel makes the change: assemble the array as uraid made it, then mdadm --grow.
    asm=""; i=0
    for d in $devs; do [ $i -lt "$first" ] && asm="$asm $d"; i=$((i + 1)); done
    if ! mdadm --assemble /dev/md0 --run $asm >/tmp/asm.log 2>&1; then
      echo "$name assemble FAILED: $(tr '\n' ' ' </tmp/asm.log)"; continue
    fi
    args=$change; i=0
    for d in $devs; do args=$(echo "$args" | sed "s#%$i#$d#g"); i=$((i + 1)); done
    if ! mdadm --grow /dev/md0 $args >/tmp/grow.log 2>&1; then
      echo "$name grow FAILED: $(tr '\n' ' ' </tmp/grow.log)"; mdadm --stop /dev/md0 >/dev/null 2>&1; continue
    fi
    sleep 1; settle
    echo "$name level=$(cat $md/level) raid_disks=$(cat $md/raid_disks) degraded=$(cat $md/degraded 2>/dev/null || echo 0) grow: $(tr '\n' ' ' </tmp/grow.log)"
    mdadm --stop /dev/md0 >/dev/null 2>&1
    continue
  fi
  if ! mdadm --assemble /dev/md0 --run $devs >/tmp/asm.log 2>&1; then
    echo "$name assemble FAILED: $(tr '\n' ' ' </tmp/asm.log)"; continue
  fi
  at_assembly="level=$(cat $md/level) raid_disks=$(cat $md/raid_disks)"
  sleep 0.5; settle
  mismatch=n/a
  if [ "$(cat $md/level)" != raid0 ]; then
    echo check >$md/sync_action; sleep 0.5
    mdadm --wait /dev/md0 >/dev/null 2>&1; settle
    mismatch=$(cat $md/mismatch_cnt)
  fi
  sha=$(head -c "$bytes" /dev/md0 | sha256sum | cut -d' ' -f1)
  echo "$name $at_assembly degraded=$(cat $md/degraded 2>/dev/null || echo 0) mismatch_cnt=$mismatch sha=$sha"
  mdadm --stop /dev/md0 >/dev/null 2>&1
done <"$IN/groups"
GUEST
out=""
for b in $(seq 0 "$batch"); do
  [ -s "$work/in.$b/groups" ] || continue
  mapfile -t disks <"$work/disks.$b"
  out+=$("$oracle/run-vm.sh" -t 1500 -i "$work/in.$b" "$work/guest.sh" "${disks[@]}" 2>/dev/null || true)
  out+=$'\n'
done

while IFS='|' read -r name num bytes sha level raid degraded after change layout; do
  line=$(echo "$out" | grep "^$name " || echo "$name (no result)")
  dir=$work/$num
  case $name in
    uraid:* | served:*)
      redundant=$([ "$level" = raid0 ] && echo n/a || echo 0)
      want="level=$level raid_disks=$raid degraded=$degraded mismatch_cnt=$redundant sha=$sha"
      if [[ "$line" == "$name $want" ]]; then
        if [ "$level" = raid0 ]; then
          echo "PASS $name: the kernel assembles uraid's change as $level of $raid devices, data intact"
        else
          echo "PASS $name: the kernel assembles uraid's change as $level of $raid devices, recovers what is owed (degraded $degraded after), mismatch_cnt 0, data intact"
        fi
      else
        echo "FAIL $name: the kernel said '$line', wanted '$name $want'"; fail=1
      fi
      ;;
    kernel:*)
      want="level=$level raid_disks=$raid degraded=$degraded"
      if [[ "$line" != "$name $want"* ]]; then
        echo "FAIL $name: the kernel said '$line', wanted '$name $want ...'"; fail=1; continue
      fi
      # The devices the kernel kept: those whose superblock has the new level (which device of
      # a raid10 mirror pair mdadm keeps depends on the order it lists them in).
      members=""
      for m in "$dir"/disk*.img; do
        [ "$("$uraid" examine --json "$m" 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["level"])' 2>/dev/null)" = "$level" ] && members="$members $m"
      done
      # shellcheck disable=SC2086
      got=$("$uraid" detail --json $members 2>/dev/null | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["level"], d["raid_devices"])' 2>/dev/null || echo "detail failed")
      # shellcheck disable=SC2086
      read_sha=$("$uraid" cat $members 2>/dev/null | head -c "$bytes" | sha256sum | cut -d' ' -f1)
      checked=n/a
      if [ "$level" != raid0 ]; then
        # shellcheck disable=SC2086
        checked=$("$uraid" check $members 2>&1 | sed -n 's/^mismatch_cnt //p')
      fi
      redundant=$([ "$level" = raid0 ] && echo n/a || echo 0)
      # shellcheck disable=SC2086
      [ -z "$layout" ] || got="$got $(layout_of $members 2>/dev/null)"
      if [ "$got" = "$level $raid${layout:+ $layout}" ] && [ "$read_sha" = "$sha" ] && [ "$checked" = "$redundant" ]; then
        echo "PASS $name: the kernel's change (mdadm --grow ${change//%/disk}) read by uraid as $level of $raid devices, data intact, mismatch_cnt $redundant"
      else
        echo "FAIL $name: uraid saw '$got' (wanted '$level $raid${layout:+ $layout}'), sha ${read_sha:0:12} (wanted ${sha:0:12}), check '$checked'; the kernel said '$line'"; fail=1
      fi
      ;;
  esac
done <"$work/expect"
exit $fail
