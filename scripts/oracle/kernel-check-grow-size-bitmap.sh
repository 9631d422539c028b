#!/usr/bin/env bash
# `uraid grow --size` and `uraid grow --bitmap` judged by the real kernel.
#
# For each case uraid creates an array on members filled with random bytes first, using only
# part of each member (`--size`), writes the md-oracle pattern over it, and grows it:
#   size:NAME         --size=max or a size: the kernel must assemble it (read-only first) with
#                     the new component size and array size, its resync point at the old end
#                     (resync_start: member sectors, array sectors for raid10), resync the new
#                     space when made writable (the random bytes there only agree once it has),
#                     find mismatch_cnt 0 after a check and the pattern intact; then take the
#                     pattern over the whole grown array and read it back.
#   size-bitmap:NAME  the same on an array with a bitmap, which md must find resized (its chunk
#                     doubled where the bits no longer fit) with the new space's bits set, or
#                     its resync would skip it.
#   size-clean:NAME   --size with --assume-clean on blank members: no resync owed.
#   control:NAME      --size with --assume-clean over random bytes: the check must find them
#                     disagreeing (mismatch_cnt above 0), or the resync cases prove nothing.
#   bitmap-add:NAME   --bitmap=internal: the kernel must find the bitmap where md keeps it
#                     (bitmap/location, chunk), start no resync of a clean array, and check
#                     clean with the pattern intact.
#   bitmap-remove:NAME  --bitmap=none on an array made with a bitmap: the kernel finds none.
#   served-*:NAME     the same changes asked of the array while `uraid serve` runs it (`uraid ctl
#                     SOCKET grow`), which then resyncs the new space itself before it is
#                     stopped: the kernel must find no resync owed, the bitmap where md keeps
#                     it, and mismatch_cnt 0 over the random bytes (uraid's resync agreed them).
#
# usage: scripts/oracle/kernel-check-grow-size-bitmap.sh [NAME-REGEX]
# env:   URAID (default target/release/uraid, built if missing), MD_ORACLE (default
#        ../shared/tools/md-oracle beside the repository)
set -euo pipefail

source "$(dirname "$0")/oracle-env.sh"
filter=${1:-.}

# name | create flags | members | grow flags | bitmap chunk the kernel must find (bytes, or none)
cases=(
  "size:raid1-1.2|--metadata=1.2 --level=1|2|--size=max|none"
  "size:raid5-1.2|--metadata=1.2 --level=5 --chunk=64K|3|--size=max|none"
  "size:raid6-1.2|--metadata=1.2 --level=6 --chunk=64K|4|--size=10M|none"
  "size:raid10-1.2|--metadata=1.2 --level=10 --chunk=64K|4|--size=max|none"
  "size:raid4-1.1|--metadata=1.1 --level=4 --chunk=64K|3|--size=max|none"
  "size:raid10o2-1.2|--metadata=1.2 --level=10 --layout=o2 --chunk=64K|3|--size=max|none"
  "size:raid1-0.90|--metadata=0.90 --level=1|2|--size=max|none"
  "size:raid5-1.0|--metadata=1.0 --level=5 --chunk=64K|3|--size=max|none"
  "size-bitmap:raid5-1.2|--metadata=1.2 --level=5 --chunk=64K --bitmap=internal --bitmap-chunk=4K|3|--size=max|8192"
  "size-bitmap:raid10-1.0|--metadata=1.0 --level=10 --chunk=64K --bitmap=internal --bitmap-chunk=1M|4|--size=max|1048576"
  "size-bitmap:raid1-0.90|--metadata=0.90 --level=1 --bitmap=internal --bitmap-chunk=64K|2|--size=max|65536"
  "size-clean:raid5-1.2|--metadata=1.2 --level=5 --chunk=64K|3|--size=max --assume-clean|none"
  "control:raid1-1.2|--metadata=1.2 --level=1|2|--size=max --assume-clean|none"
  "bitmap-add:raid5-1.2|--metadata=1.2 --level=5 --chunk=64K|3|--bitmap=internal|67108864"
  "bitmap-add:raid1-1.1|--metadata=1.1 --level=1|2|--bitmap=internal|67108864"
  "bitmap-add:raid1-1.0|--metadata=1.0 --level=1|2|--bitmap=internal --bitmap-chunk=1M|1048576"
  "bitmap-add:raid6-0.90|--metadata=0.90 --level=6 --chunk=64K|4|--bitmap=internal|67108864"
  "bitmap-remove:raid10-1.2|--metadata=1.2 --level=10 --chunk=64K --bitmap=internal|4|--bitmap=none|none"
  "served-size:raid5-1.2|--metadata=1.2 --level=5 --chunk=64K|3|--size=max|none"
  "served-size:raid1-1.0|--metadata=1.0 --level=1|2|--size=10M|none"
  "served-size-bitmap:raid5-1.2|--metadata=1.2 --level=5 --chunk=64K --bitmap=internal --bitmap-chunk=4K|3|--size=max|8192"
  "served-bitmap-add:raid6-1.2|--metadata=1.2 --level=6 --chunk=64K|4|--bitmap=internal|67108864"
)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
disks=(); : >"$work/groups"

json() { # FIELD of `uraid examine --json` of member $2 (python expression on d)
  "$uraid" examine --json "$2" | python3 -c "import json,sys; d=json.load(sys.stdin)[0]; print($1)"
}

fail=0
num=3300
for spec in "${cases[@]}"; do
  IFS='|' read -r name flags n grow chunk <<<"$spec"
  num=$((num + 1))
  [[ "$name" =~ $filter ]] || continue
  dir=$work/$num; mkdir -p "$dir"; members=()
  for i in $(seq 0 $((n - 1))); do
    m=$dir/disk$i.img; members+=("$m")
    # Random bytes beyond the used size: the new space agrees across members only once resynced.
    # Blank members where nothing is to be resynced.
    if [[ $name == size-clean:* ]]; then truncate -s 12M "$m"; else head -c 12M /dev/urandom >"$m"; fi
  done
  # shellcheck disable=SC2086
  if ! "$uraid" create $flags --size=4M --raid-devices="$n" --name="g$num" "${members[@]}" >"$dir/log" 2>&1; then
    echo "FAIL $name: uraid create failed"; sed 's/^/    /' "$dir/log"; fail=1; continue
  fi
  bytes=$("$uraid" detail --json "${members[@]}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["array_size_bytes"])')
  "$mdpattern" gen "$num" $((bytes / 512)) >"$dir/data"
  "$uraid" write --offset=0 "${members[@]}" <"$dir/data" 2>/dev/null
  sha=$(sha256sum <"$dir/data" | cut -d' ' -f1)
  if [[ $name == served-* ]]; then
    # Asked of the running array, which resyncs any new space itself; stopped cleanly after.
    "$uraid" serve --listen=unix:"$dir/nbd.sock" --control="$dir/ctl.sock" "${members[@]}" 2>>"$dir/log" &
    pid=$!
    for _ in $(seq 100); do [ -S "$dir/ctl.sock" ] && "$uraid" ctl "$dir/ctl.sock" status >/dev/null 2>&1 && break; sleep 0.1; done
    done_ok=yes
    # shellcheck disable=SC2086
    "$uraid" ctl "$dir/ctl.sock" grow $grow >>"$dir/log" 2>&1 || done_ok=no
    "$uraid" ctl "$dir/ctl.sock" wait >>"$dir/log" 2>&1 || done_ok=no
    kill -TERM "$pid"; wait "$pid" 2>/dev/null || done_ok=no
    if [ "$done_ok" != yes ]; then
      echo "FAIL $name: uraid ctl grow $grow on the served array failed"; sed 's/^/    /' "$dir/log"; fail=1; continue
    fi
  else
    # shellcheck disable=SC2086
    if ! "$uraid" grow $grow "${members[@]}" >>"$dir/log" 2>&1; then
      echo "FAIL $name: uraid grow $grow failed"; sed 's/^/    /' "$dir/log"; fail=1; continue
    fi
  fi
  if [ "$("$uraid" cat "${members[@]}" 2>/dev/null | head -c "$bytes" | sha256sum | cut -d' ' -f1)" != "$sha" ]; then
    echo "FAIL $name: uraid cat after the grow does not read the pattern"; fail=1; continue
  fi
  grown=$("$uraid" detail --json "${members[@]}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["array_size_bytes"])')
  kib=$(json 'd["component_size_kib"]' "${members[0]}")
  resync=$(json '"none" if d["resync_offset"] is None else d["resync_offset"]' "${members[0]}")
  location=$(json '"none" if d["bitmap_offset_sectors"] is None else "%+d" % d["bitmap_offset_sectors"]' "${members[0]}")
  case $name in
    size:* | size-bitmap:*)
      # md resyncs from the old end: 4 MiB of each member, of the array for raid10 (2 copies).
      if [[ $flags == *level=10* ]]; then want_resync=$((4096 * 2 * n / 2)); else want_resync=8192; fi ;;
    *) want_resync=none ;;
  esac
  if [ "$resync" != "$want_resync" ]; then
    echo "FAIL $name: uraid recorded the resync at $resync, wanted $want_resync"; fail=1; continue
  fi
  echo "$name|$n|$bytes|$sha|$num|$kib|$resync|$location|$chunk|$grown" >>"$work/groups"
  disks+=("${members[@]}")
done
[ ${#disks[@]} -gt 0 ] || { echo "no case matches $filter" >&2; exit 2; }

cat >"$work/guest.sh" <<'GUEST'
md=/sys/block/md0/md
set -- $DISKS
echo 500000 >/proc/sys/dev/raid/speed_limit_max
settle() {
  sleep 0.5; mdadm --wait /dev/md0 >/dev/null 2>&1
  while [ "$(cat $md/sync_action)" != idle ]; do sleep 0.2; done
}
while IFS='|' read -r name n bytes _ num _; do
  devs=""; first=$1
  for _ in $(seq "$n"); do devs="$devs $1"; shift; done
  # Read-only first: what md took from the superblocks, before any resync moves it.
  if ! mdadm --assemble /dev/md0 --readonly --run $devs >/tmp/asm.log 2>&1; then
    echo "$name assemble FAILED: $(tr '\n' ' ' </tmp/asm.log)"; continue
  fi
  rs=$(cat $md/resync_start); cs=$(cat $md/component_size)
  loc=$(cat $md/bitmap/location 2>/dev/null || echo none)
  [ "$loc" = none ] && chunk=none || chunk=$(cat $md/bitmap/chunksize)
  size=$(blockdev --getsize64 /dev/md0)
  mdadm -X "$first" >/tmp/x.log 2>&1 && echo "$name examine-bitmap: $(grep -E 'Chunk Size|Sync Size|Bitmap' /tmp/x.log | tr -s ' ' | tr '\n' ';')"
  mdadm --readwrite /dev/md0
  settle
  echo check >$md/sync_action
  settle
  sha=$(head -c "$bytes" /dev/md0 | sha256sum | cut -d' ' -f1)
  mism=$(cat $md/mismatch_cnt)
  # The whole grown array takes the pattern and gives it back.
  mdpattern write /dev/md0 "$num" >/dev/null
  full=$(mdpattern verify /dev/md0 "$num" | sed -n 's/.* \([0-9]*\) bad.*/\1/p')
  echo "$name resync_start=$rs component_size=$cs bitmap=$loc chunk=$chunk array_bytes=$size degraded=$(cat $md/degraded) mismatch_cnt=$mism sha=$sha full_pattern_bad=$full"
  mdadm --stop /dev/md0 >/dev/null 2>&1
done <"$IN/groups"
GUEST
# A VM takes at most 24 disks: the cases go in batches, one boot each.
out=""; batch=(); : >"$work/batch"
boot() {
  [ ${#batch[@]} -gt 0 ] || return 0
  rm -rf "$work/in"; mkdir -p "$work/in"; cp "$work/batch" "$work/in/groups"
  out+=$("$oracle/run-vm.sh" -t 1500 -i "$work/in" "$work/guest.sh" "${batch[@]}" 2>/dev/null || true)$'\n'
  batch=(); : >"$work/batch"
}
at=0
while IFS='|' read -r line_name n rest; do
  [ $((${#batch[@]} + n)) -le 24 ] || boot
  batch+=("${disks[@]:$at:$n}"); at=$((at + n))
  echo "$line_name|$n|$rest" >>"$work/batch"
done <"$work/groups"
boot
while IFS='|' read -r name _ _ sha _ kib resync location chunk grown; do
  line=$(echo "$out" | grep "^$name " | grep -v "^$name examine-bitmap:" || echo "$name (no result)")
  want="resync_start=$resync component_size=$kib bitmap=$location chunk=$chunk array_bytes=$grown degraded=0 mismatch_cnt=0 sha=$sha full_pattern_bad=0"
  if [[ $name == control:* ]]; then
    mism=$(echo "$line" | sed -n 's/.* mismatch_cnt=\([0-9]*\) .*/\1/p')
    if [[ "$line" == "$name resync_start=none "* ]] && [ "${mism:-0}" -gt 0 ]; then
      echo "PASS $name: with the new space recorded in sync over random bytes, the kernel's check finds mismatch_cnt $mism: the resync cases' 0 is the resync's doing"
    else
      echo "FAIL $name: the kernel said '$line', wanted resync_start=none and mismatch_cnt above 0"; fail=1
    fi
    continue
  fi
  if [ "$line" = "$name $want" ]; then
    echo "PASS $name: the kernel assembles it with component size ${kib}K (array $grown bytes), resync from $resync, bitmap $location (chunk $chunk); mismatch_cnt 0 after resync and check, pattern intact, the whole grown array takes the pattern"
  else
    echo "FAIL $name: the kernel said '$line', wanted '$want'"; fail=1
    echo "$out" | grep "^$name examine-bitmap" | sed 's/^/    /' || true
  fi
done <"$work/groups"
exit $fail
