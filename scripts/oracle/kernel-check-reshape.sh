#!/usr/bin/env bash
# Reshapes (more or fewer members, another chunk size, another layout), handed between uraid and
# the real kernel both ways.
#
#   uraid-killed:NAME  uraid creates the array, fills it with the md-oracle pattern, and starts
#                      `uraid grow` (--raid-devices=N --add NEW, --chunk, --layout; or fewer
#                      members with the --array-size uraid's refusal names) slowed down; once a
#                      reshape position past the start is recorded (past 0, or below the end for
#                      a reshape run backwards) it is killed with SIGKILL. The kernel must
#                      assemble the members, finish the reshape, find N devices, the new chunk
#                      size and layout, the pattern intact (what the array keeps of it, when it
#                      shrinks) and mismatch_cnt 0 after a check.
#   served-killed:NAME uraid serves the array (filled beforehand with another pattern),
#                      reshapes it with `uraid ctl SOCKET grow` slowed down, writes the md-oracle
#                      pattern over the whole array through NBD once a third of it is reshaped
#                      (so on both sides of the position), and is killed with SIGKILL once that
#                      write is flushed, the reshape still running. The kernel must continue it
#                      from the array left dirty and part-way, as for uraid-killed. Onto fewer
#                      members, the grow is first refused, naming the --array-size, which is
#                      then given, and the pattern fills the smaller array.
#   degraded-killed:NAME as uraid-killed, but once the reshape has started a member is cut
#                      short under it (truncated to 1 MiB, so its reads fail): uraid must go on
#                      degraded, recording it faulty, and is killed with SIGKILL part-way
#                      after that. The kernel gets the other members and must continue the
#                      reshape degraded and finish it as for uraid-killed, one member missing
#                      (degraded=1), the pattern intact.
#   critical-killed:NAME a grow in place (1.0 metadata, no room to move the data offset), its
#                      added member reached through nbdkit's delay filter (each write 1 s
#                      late), killed with SIGKILL inside its critical section: the superblocks
#                      record the reshape at 0, some new stripes are written over old ones, and
#                      the data is whole only in uraid's backup on the added member. uraid cat
#                      must refuse it, naming the critical section; the kernel (mdadm
#                      --assemble, restoring the critical section from that backup, as for its
#                      own) must go on past the section and finish as for uraid-killed.
#   kernel-left:NAME   the arrays the kernel left mid-reshape (crates/uraid/tests/testdata/reshape,
#                      made by make-reshape-samples.sh) are finished by `uraid grow --continue`;
#                      the kernel must then assemble them with N devices, the new chunk size and
#                      layout and no reshape, read the data it read from them mid-reshape, and
#                      find mismatch_cnt 0.
#
# usage: scripts/oracle/kernel-check-reshape.sh [NAME-REGEX]
# env:   URAID (default target/release/uraid, built if missing), MD_ORACLE (default
#        ../shared/tools/md-oracle beside the repository)
set -euo pipefail

source "$(dirname "$0")/oracle-env.sh"
filter=${1:-.}
samples=$repo/crates/uraid/tests/testdata/reshape

# name | create flags | members before | members after | member size | grow flags (ASK: the
# --array-size uraid names when it refuses the shrink without one)
killed=(
  "raid5-4to5|--level=5 --chunk=64K|4|5|12M|--raid-devices=5"
  "raid6-5to6|--level=6 --chunk=64K|5|6|12M|--raid-devices=6"
  "raid5-chunk-64to128|--level=5 --chunk=64K|4|4|12M|--chunk=128K"
  "raid6-chunk-64to32|--level=6 --chunk=64K|5|5|12M|--chunk=32K"
  "raid5-layout-ls-to-ra|--level=5 --chunk=64K|4|4|12M|--layout=right-asymmetric"
  "raid6-layout-ls-to-rs|--level=6 --chunk=64K|5|5|12M|--layout=right-symmetric"
  "raid5-5to4|--level=5 --chunk=64K|5|4|12M|--raid-devices=4 --array-size=ASK"
  "raid6-6to5-room-after|--level=6 --chunk=64K --size=10M|6|5|12M|--raid-devices=5 --array-size=ASK"
  "raid10-4to5|--level=10 --chunk=64K|4|5|12M|--raid-devices=5"
  "raid10-n3-3to5|--level=10 --layout=n3 --chunk=64K|3|5|12M|--raid-devices=5"
  "raid10-5to4|--level=10 --chunk=64K|5|4|12M|--raid-devices=4 --array-size=ASK"
  "raid10-n3-5to4|--level=10 --layout=n3 --chunk=64K|5|4|12M|--raid-devices=4 --array-size=ASK"
  "raid5-1.0-chunk-64to32|--level=5 --chunk=64K --metadata=1.0 --size=10M|4|4|12M|--chunk=32K"
  "raid5-1.0-4to5-in-place|--level=5 --chunk=64K --metadata=1.0|4|5|12M|--raid-devices=5"
  "raid6-1.0-5to6-in-place|--level=6 --chunk=64K --metadata=1.0|5|6|12M|--raid-devices=6"
  "raid5-0.90-4to5-in-place|--level=5 --chunk=64K --metadata=0.90|4|5|12M|--raid-devices=5"
  "raid6-0.90-4to6-in-place|--level=6 --chunk=64K --metadata=0.90|4|6|12M|--raid-devices=6"
)
# Grows in place (1.0 metadata: no room to move the data offset) killed inside their critical
# section: the added member is reached through nbdkit's delay filter, so the section's writes
# to it are slow enough to be cut.
critical=("raid5-1.0-4to5-in-place" "raid6-1.0-5to6-in-place" "raid5-0.90-4to5-in-place")

work=$(mktemp -d)
trap 'kill -9 $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
disks=(); : >"$work/groups"

position() { # reshape position (sectors) in the superblock of $1, or "none"
  "$uraid" examine --json "$1" | python3 -c 'import json,sys; r=json.load(sys.stdin)[0]["reshape"]; print("none" if r is None else r["position_sectors"])'
}
backwards() { # "yes" if the reshape recorded in the superblock of $1 runs backwards
  "$uraid" examine --json "$1" | python3 -c 'import json,sys; r=json.load(sys.stdin)[0]["reshape"]; print("yes" if r and r["backwards"] else "no")'
}
started() { # whether reshape position $at of the array of ${members[0]} (of $bytes) is past its
  # start: above 0, or, for a reshape run backwards, below the end it starts from
  [ "$at" != none ] && if [ "$(backwards "${members[0]}")" = yes ]; then [ "$at" -lt $((bytes / 512)) ]; else [ "$at" -gt 0 ]; fi
}
shape() { # chunk bytes and layout number the array of member $1 has once any reshape ends
  "$uraid" examine --json "$1" | python3 -c 'import json,sys; m=json.load(sys.stdin)[0]; r=m["reshape"]
print("chunk=%d layout=%d" % ((m["chunk_bytes"], m["layout_num"]) if r is None else (r["new_chunk_bytes"], r["new_layout_num"])))'
}

# Make $1 member files of $size in $dir, create the array of the first $n of them with $flags,
# and fill it with the md-oracle pattern of case $num (kept in $dir/data): sets members, old and
# bytes.
make_filled() {
  members=()
  for i in $(seq 0 $(($1 - 1))); do truncate -s "$size" "$dir/disk$i.img"; members+=("$dir/disk$i.img"); done
  old=("${members[@]:0:$n}")
  # shellcheck disable=SC2086
  "$uraid" create $flags --raid-devices="$n" --name="r$num" "${old[@]}" >/dev/null 2>&1
  bytes=$("$uraid" detail --json "${old[@]}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["array_size_bytes"])')
  "$mdpattern" gen "$num" $((bytes / 512)) >"$dir/data"
  "$uraid" write --offset=0 "${old[@]}" <"$dir/data" 2>/dev/null
}
wait_started() { # up to 30 s, until the reshape of ${members[0]} is past its start (sets at)
  for _ in $(seq 300); do
    at=$(position "${members[0]}")
    started && return 0
    sleep 0.1
  done
}

fail=0
num=3100
for spec in "${killed[@]}"; do
  IFS='|' read -r name flags n total size grow <<<"$spec"
  name=uraid-killed:$name; num=$((num + 1))
  [[ "$name" =~ $filter ]] || continue
  dir=$work/$num; mkdir -p "$dir"
  count=$((n > total ? n : total))
  make_filled "$count"
  if [[ "$grow" == *ASK* ]]; then
    # Onto fewer members: uraid refuses without the size the array shrinks to, and names it.
    # shellcheck disable=SC2086
    ask=$("$uraid" grow ${grow/ --array-size=ASK/} "${old[@]}" 2>&1 | sed -n 's/.*give --array-size=\([0-9]*\)K.*/\1/p' || true)
    [ -n "$ask" ] || { echo "FAIL $name: uraid did not name the --array-size to give"; fail=1; continue; }
    grow=${grow/ASK/${ask}K}
    bytes=$((ask * 1024))
  fi
  sha=$(head -c "$bytes" "$dir/data" | sha256sum | cut -d' ' -f1)
  add=(); for m in "${members[@]:$n}"; do add+=(--add "$m"); done
  # shellcheck disable=SC2086
  "$uraid" grow $grow --speed-limit-max=4M "${add[@]}" "${old[@]}" 2>"$dir/log" &
  pid=$!
  wait_started || true
  way=$(backwards "${members[0]}")
  kill -9 "$pid"; wait "$pid" 2>/dev/null || true
  at=$(position "${members[0]}")
  if ! started; then
    echo "FAIL $name: uraid recorded no reshape position past the start before the kill ($at)"; sed 's/^/    /' "$dir/log"; fail=1; continue
  fi
  if [ "$("$uraid" cat "${members[@]}" 2>/dev/null | head -c "$bytes" | sha256sum | cut -d' ' -f1)" != "$sha" ]; then
    echo "FAIL $name: uraid cat mid-reshape does not read the pattern"; fail=1; continue
  fi
  echo "$name|$count|$bytes|$sha|$at|$(shape "${members[0]}")|$total|$way" >>"$work/groups"
  disks+=("${members[@]}")
done

for spec in "${killed[@]}"; do
  IFS='|' read -r name flags n total size grow <<<"$spec"
  name=served-killed:$name; num=$((num + 1))
  [[ "$name" =~ $filter ]] || continue
  dir=$work/$num; mkdir -p "$dir"; members=()
  count=$((n > total ? n : total))
  for i in $(seq 0 $((count - 1))); do truncate -s "$size" "$dir/disk$i.img"; members+=("$dir/disk$i.img"); done
  old=("${members[@]:0:$n}")
  # shellcheck disable=SC2086
  "$uraid" create $flags --raid-devices="$n" --name="r$num" "${old[@]}" >/dev/null 2>&1
  bytes=$("$uraid" detail --json "${old[@]}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["array_size_bytes"])')
  "$mdpattern" gen $((num + 50)) $((bytes / 512)) | "$uraid" write --offset=0 "${old[@]}" 2>/dev/null
  "$uraid" serve --listen=unix:"$dir/nbd.sock" --control="$dir/ctl.sock" --speed-limit-max=1M "${old[@]}" 2>"$dir/log" &
  pid=$!
  for _ in $(seq 100); do [ -S "$dir/ctl.sock" ] && "$uraid" ctl "$dir/ctl.sock" status >/dev/null 2>&1 && break; sleep 0.1; done
  if [[ "$grow" == *ASK* ]]; then
    # Onto fewer members: the server refuses without the size the array shrinks to, naming it.
    # shellcheck disable=SC2086
    ask=$("$uraid" ctl "$dir/ctl.sock" grow ${grow/ --array-size=ASK/} 2>&1 | sed -n 's/.*give --array-size=\([0-9]*\)K.*/\1/p' || true)
    [ -n "$ask" ] || { echo "FAIL $name: the server did not name the --array-size to give"; kill -9 "$pid"; fail=1; continue; }
    grow=${grow/ASK/${ask}K}
    bytes=$((ask * 1024))
  fi
  "$mdpattern" gen "$num" $((bytes / 512)) >"$dir/data"
  sha=$(sha256sum <"$dir/data" | cut -d' ' -f1)
  add=(); for m in "${members[@]:$n}"; do add+=(--add "$m"); done
  # shellcheck disable=SC2086
  if ! "$uraid" ctl "$dir/ctl.sock" grow $grow "${add[@]}" >>"$dir/log" 2>&1; then
    echo "FAIL $name: the grow did not start"; sed 's/^/    /' "$dir/log"; kill -9 "$pid"; fail=1; continue
  fi
  way=$(backwards "${members[0]}")
  # Written once a third of the array is reshaped (from its end, for a reshape run backwards):
  # a third of it lands in the new shape.
  third() { [ "$at" != none ] && if [ "$way" = yes ]; then [ "$at" -lt $((bytes / 512 * 2 / 3)) ]; else [ "$at" -gt $((bytes / 512 / 3)) ]; fi; }
  for _ in $(seq 900); do
    at=$(position "${members[0]}")
    third && break
    sleep 0.1
  done
  nbdcopy --flush "$dir/data" "nbd+unix:///?socket=$dir/nbd.sock"
  kill -9 "$pid"; wait "$pid" 2>/dev/null || true
  at=$(position "${members[0]}")
  if ! started; then
    echo "FAIL $name: no reshape part-way at the kill ($at)"; sed 's/^/    /' "$dir/log"; fail=1; continue
  fi
  if [ "$("$uraid" cat "${members[@]}" 2>/dev/null | head -c "$bytes" | sha256sum | cut -d' ' -f1)" != "$sha" ]; then
    echo "FAIL $name: uraid cat mid-reshape does not read the pattern written during the reshape"; fail=1; continue
  fi
  echo "$name|$count|$bytes|$sha|$at|$(shape "${members[0]}")|$total|$way" >>"$work/groups"
  disks+=("${members[@]}")
done

# A member cut short part-way: which of `killed` (the first member dies).
degraded=("raid5-4to5" "raid6-5to6" "raid5-chunk-64to128")
for spec in "${killed[@]}"; do
  IFS='|' read -r base flags n total size grow <<<"$spec"
  name=degraded-killed:$base; num=$((num + 1))
  [[ " ${degraded[*]} " == *" $base "* ]] && [[ "$name" =~ $filter ]] || continue
  dir=$work/$num; mkdir -p "$dir"
  make_filled "$total"
  sha=$(sha256sum <"$dir/data" | cut -d' ' -f1)
  add=(); for m in "${members[@]:$n}"; do add+=(--add "$m"); done
  # shellcheck disable=SC2086
  "$uraid" grow $grow --speed-limit-max=2M "${add[@]}" "${old[@]}" 2>"$dir/log" &
  pid=$!
  wait_started || true
  truncate -s 1M "${members[1]}"
  for _ in $(seq 300); do grep -q "recorded faulty" "$dir/log" && break; sleep 0.1; done
  sleep 1
  kill -9 "$pid"; wait "$pid" 2>/dev/null || true
  at=$(position "${members[0]}")
  if ! grep -q "recorded faulty" "$dir/log" || ! started; then
    echo "FAIL $name: uraid did not go on degraded part-way ($at)"; sed 's/^/    /' "$dir/log"; fail=1; continue
  fi
  survivors=("${members[0]}" "${members[@]:2}")
  echo "$name|${#survivors[@]}|$bytes|$sha|$at|$(shape "${members[0]}")|$total|no" >>"$work/groups"
  disks+=("${survivors[@]}")
done

for spec in "${killed[@]}"; do
  IFS='|' read -r base flags n total size grow <<<"$spec"
  name=critical-killed:$base; num=$((num + 1))
  [[ " ${critical[*]} " == *" $base "* ]] && [[ "$name" =~ $filter ]] || continue
  dir=$work/$num; mkdir -p "$dir"
  make_filled "$total"
  sha=$(sha256sum <"$dir/data" | cut -d' ' -f1)
  new=${members[$n]}
  # The old members' first rows, which the critical section's new stripes overwrite (the
  # first stripe may leave them as they were: the md-oracle pattern is such that a raid5's
  # first parity chunk equals the next data chunk).
  first_rows() { for m in "${old[@]}"; do head -c 262144 "$m"; done; }
  first_rows >"$dir/first-rows"
  nbdkit -f -U "$dir/new.sock" --filter=delay file "$new" wdelay=1 2>"$dir/nbdkit.log" &
  nbd=$!
  for _ in $(seq 100); do [ -S "$dir/new.sock" ] && break; sleep 0.1; done
  # shellcheck disable=SC2086
  "$uraid" grow $grow --add "nbd+unix:///?socket=$dir/new.sock" "${old[@]}" 2>"$dir/log" &
  pid=$!
  for _ in $(seq 600); do at=$(position "${members[0]}"); [ "$at" != none ] && break; sleep 0.1; done
  # The superblocks say a reshape runs: the backup is written; the first new stripes go next.
  # Killed as soon as the first one has overwritten an old stripe (the next steps each wait on
  # the added member's slow writes).
  for _ in $(seq 400); do
    cmp -s <(first_rows) "$dir/first-rows" || break
    sleep 0.05
  done
  kill -9 "$pid"; wait "$pid" 2>/dev/null || true
  kill "$nbd"; wait "$nbd" 2>/dev/null || true
  at=$(position "${members[0]}")
  if [ "$at" != 0 ] || cmp -s <(first_rows) "$dir/first-rows"; then
    echo "FAIL $name: not killed inside the critical section with a new stripe written (position $at)"; sed 's/^/    /' "$dir/log"; fail=1; continue
  fi
  if "$uraid" cat "${members[@]}" >/dev/null 2>"$dir/cat.log" || ! grep -q "critical section" "$dir/cat.log"; then
    echo "FAIL $name: uraid cat did not refuse the array inside its critical section"; sed 's/^/    /' "$dir/cat.log"; fail=1; continue
  fi
  echo "$name|$total|$bytes|$sha|$at|$(shape "${members[0]}")|$total|critical" >>"$work/groups"
  disks+=("${members[@]}")
done

for case_dir in "$samples"/*/; do
  sample=$(basename "$case_dir")
  name=kernel-left:$sample
  [[ "$name" =~ $filter ]] || continue
  dir=$work/$sample; mkdir -p "$dir"; members=()
  for z in "$case_dir"/disk*.img.zst; do
    img=$dir/$(basename "$z" .zst); zstd -q -d -f "$z" -o "$img"; members+=("$img")
  done
  bytes=$(sed -n 's/^bytes //p' "$case_dir/case.txt")
  # What the kernel read of it mid-reshape (the data before it, but not for the restripes the
  # kernel stopped, for a reason not established: see make-reshape-samples.sh).
  sha=$(sed -n 's/^sha256-mid-reshape //p' "$case_dir/case.txt")
  judged="the data it read mid-reshape"
  if [ "$sha" = unread ]; then
    # Not read back mid-reshape (see make-reshape-samples.sh): the data before it.
    sha=$(sed -n 's/^sha256 //p' "$case_dir/case.txt"); judged="the data written before the reshape"
  elif [[ $sample == raid10-* ]]; then
    # The kernel's reads of a raid10 assembled read-only mid-reshape differ from the data
    # written before; the kernel finishing that reshape itself reads the data before (see
    # make-reshape-samples.sh), and so must the one uraid finishes.
    sha=$(sed -n 's/^sha256 //p' "$case_dir/case.txt"); judged="the data written before the reshape"
  fi
  at=$(position "${members[0]}")
  want_shape=$(shape "${members[0]}")
  raid=$("$uraid" examine --json "${members[0]}" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["raid_devices"])')
  if ! "$uraid" grow --continue "${members[@]}" >"$dir/log" 2>&1; then
    echo "FAIL $name: uraid grow --continue failed"; sed 's/^/    /' "$dir/log"; fail=1; continue
  fi
  echo "$name|${#members[@]}|$bytes|$sha|$at|$want_shape|$raid|none|$judged" >>"$work/groups"
  disks+=("${members[@]}")
done
[ ${#disks[@]} -gt 0 ] || { echo "no case matches $filter" >&2; exit 2; }

cat >"$work/guest.sh" <<'GUEST'
md=/sys/block/md0/md
set -- $DISKS
echo 500000 >/proc/sys/dev/raid/speed_limit_max
while IFS='|' read -r name n bytes _ _ _; do
  devs=""
  for _ in $(seq "$n"); do devs="$devs $1"; shift; done
  if ! mdadm --assemble /dev/md0 --run $devs >/tmp/asm.log 2>&1; then
    echo "$name assemble FAILED: $(tr '\n' ' ' </tmp/asm.log)"; continue
  fi
  before=$(cat $md/reshape_position)
  # The kernel finishes a reshape it finds (mdadm --assemble starts it again).
  for _ in $(seq 3000); do
    [ "$(cat $md/reshape_position)" = none ] && [ "$(cat $md/sync_action)" = idle ] && break
    sleep 0.2
  done
  raid=$(cat $md/raid_disks)
  echo check >$md/sync_action; sleep 0.5
  mdadm --wait /dev/md0 >/dev/null 2>&1
  while [ "$(cat $md/sync_action)" != idle ]; do sleep 0.2; done
  sha=$(head -c "$bytes" /dev/md0 | sha256sum | cut -d' ' -f1)
  echo "$name reshape_at_assembly=$before raid_disks=$raid chunk=$(cat $md/chunk_size) layout=$(cat $md/layout) reshape=$(cat $md/reshape_position) degraded=$(cat $md/degraded) mismatch_cnt=$(cat $md/mismatch_cnt) sha=$sha"
  mdadm --stop /dev/md0 >/dev/null 2>&1
done <"$IN/groups"
GUEST
# The VM takes at most 24 member disks: the cases go to it in batches that fit.
max_disks=24
out=""
mkdir -p "$work/in"
run_batch() {
  [ ${#batch[@]} -gt 0 ] || return 0
  out+=$("$oracle/run-vm.sh" -t 1500 -i "$work/in" "$work/guest.sh" "${batch[@]}" </dev/null 2>/dev/null || true)
  out+=$'\n'
}
: >"$work/in/groups"; batch=(); next=0
while IFS= read -r group; do
  n=$(echo "$group" | cut -d'|' -f2)
  if [ $((${#batch[@]} + n)) -gt $max_disks ]; then
    run_batch; : >"$work/in/groups"; batch=()
  fi
  echo "$group" >>"$work/in/groups"
  batch+=("${disks[@]:$next:$n}"); next=$((next + n))
done <"$work/groups"
run_batch
while IFS='|' read -r name _ _ sha at shape raid way judged; do
  line=$(echo "$out" | grep "^$name " || echo "$name (no result)")
  missing=0; [[ $name == degraded-killed:* ]] && missing=1
  want="raid_disks=$raid $shape reshape=none degraded=$missing mismatch_cnt=0 sha=$sha"
  # Where the kernel's reshape stood once assembled: past uraid's record (it has run on a moment
  # already; never back at the start) for uraid's, none for those uraid finished.
  found=$(echo "$line" | sed -n 's/.* reshape_at_assembly=\([^ ]*\) .*/\1/p')
  resumed=no
  case $way in
    no) [[ "$found" =~ ^[0-9]+$ ]] && [ "$found" -ge "$at" ] && resumed=yes ;;
    yes) [[ "$found" =~ ^[0-9]+$ ]] && [ "$found" -le "$at" ] && resumed=yes ;;
    none) [ "$found" = none ] && resumed=yes ;;
    # Restored from the backup, the reshape goes on from past the critical section.
    critical) [[ "$found" =~ ^[0-9]+$ ]] && [ "$found" -gt 0 ] && resumed=yes ;;
  esac
  if [ "$resumed" = yes ] && [[ "$line" == *" $want" ]]; then
    case $name in
      critical-killed:*) echo "PASS $name: uraid killed inside its critical section (recorded at 0, a new stripe written); the kernel restored it from uraid's backup, went on (at $found once assembled) and finished: $raid devices, $shape, mismatch_cnt 0, data intact" ;;
      uraid-killed:* | served-killed:*) echo "PASS $name: uraid killed at reshape position $at; the kernel went on from there (at $found once assembled) and finished: $raid devices, $shape, mismatch_cnt 0, data intact" ;;
      degraded-killed:*) echo "PASS $name: a member died under uraid's reshape, which went on degraded and was killed at position $at; the kernel went on from there degraded (at $found once assembled) and finished: $raid devices, $shape, degraded 1, data intact" ;;
      *) echo "PASS $name: the kernel's reshape (left at $at) finished by uraid; the kernel assembles $raid devices, $shape, no reshape, mismatch_cnt 0, $judged" ;;
    esac
  else
    echo "FAIL $name: the kernel said '$line', wanted the reshape at assembly past $at (uraid-killed) or none, and '$want'"; fail=1
  fi
done <"$work/groups"
exit $fail
