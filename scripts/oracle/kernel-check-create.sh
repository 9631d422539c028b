#!/usr/bin/env bash
# Arrays made the ways `mdadm --create` can make them, judged by the real Linux md driver:
# degraded from the start (`missing` members), with hot spares (--spare-devices; one given with
# a missing member is rebuilt into its slot by create, as md does), and with 0.90 metadata. Each array is created by uraid, filled with the md-oracle pattern through
# `uraid write`, and handed to the kernel (../shared/tools/md-oracle/check-images.sh), which
# must assemble it and read the pattern with the sha256 `uraid cat` reads. Whole arrays are
# checked strictly (-S: clean, every image taken, mismatch_cnt 0 after an md check); degraded
# ones may only be reported degraded.
#
# Then, per case:
#   add     a fresh image takes the missing slot(s) with `uraid add --device`, which rebuilds
#           it; the kernel must then find the array whole, clean, the same bytes, mismatch_cnt 0;
#   fail:K  the array is served with a control socket, member K is failed with `uraid ctl fail`,
#           the spare takes its slot and is rebuilt while served; the failed image is left out
#           and the kernel must find the rest whole, clean, the same bytes, mismatch_cnt 0.
#
# usage: scripts/oracle/kernel-check-create.sh [NAME-REGEX]   (default: every case below)
# env:   URAID (default target/release/uraid, built if missing), MD_ORACLE (default
#        ../shared/tools/md-oracle beside the repository), KEEP=dir to keep the images
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
oracle=${MD_ORACLE:-$repo/../shared/tools/md-oracle}
uraid=${URAID:-$repo/target/release/uraid}
filter=${1:-.}
[ -x "$oracle/check-images.sh" ] || { echo "md-oracle not found at $oracle (set MD_ORACLE)" >&2; exit 2; }
if [ ! -x "$uraid" ]; then (cd "$repo" && cargo build --release -q -p uraid); fi

# name | create flags | member list (d: an image, missing) | member size | then (-, add, fail:K)
cases=(
  "raid1-3-missing1|--level=1 --raid-devices=3|d missing d|4M|add"
  "raid1-2-missing0|--level=1 --raid-devices=2|missing d|4M|add"
  "raid5-4-missing2|--level=5 --raid-devices=4 --chunk=64K|d d missing d|4M|add"
  "raid4-4-missing3|--level=4 --raid-devices=4 --chunk=64K|d d d missing|4M|add"
  "raid6-5-missing1|--level=6 --raid-devices=5 --chunk=64K|d missing d d d|4M|add"
  "raid6-5-missing0-3|--level=6 --raid-devices=5 --chunk=64K|missing d d missing d|4M|add"
  "raid10-4-n2-missing0|--level=10 --raid-devices=4 --chunk=64K|missing d d d|4M|add"
  "raid10-4-f2-missing0-2|--level=10 --raid-devices=4 --chunk=64K --layout=f2|missing d missing d|4M|add"
  "raid5-4-spare|--level=5 --raid-devices=4 --spare-devices=1 --chunk=64K|d d d d d|4M|fail:1"
  "raid1-2-spare2|--level=1 --raid-devices=2 --spare-devices=2|d d d d|4M|fail:0"
  "raid5-3-missing1-spare|--level=5 --raid-devices=3 --spare-devices=1 --chunk=64K|d missing d d|4M|-"
  "raid1-2-0.90-missing0-spare|--metadata=0.90 --level=1 --raid-devices=2 --spare-devices=1|missing d d|4M|-"
  "linear-3-0.90|--metadata=0.90 --level=linear --raid-devices=3|d d d|4M|-"
  "raid0-3-0.90|--metadata=0.90 --level=0 --raid-devices=3 --chunk=64K|d d d|4M|-"
  "raid1-2-0.90|--metadata=0.90 --level=1 --raid-devices=2|d d|4M|-"
  "raid5-3-0.90|--metadata=0.90 --level=5 --raid-devices=3 --chunk=64K|d d d|4M|-"
  "raid1-2-0.90-bitmap|--metadata=0.9 --level=1 --raid-devices=2 --bitmap=internal|d d|8M|-"
  "raid6-5-0.90|--metadata=0 --level=6 --raid-devices=5 --chunk=64K|d d d d d|4M|-"
  "raid10-4-0.90|--metadata=0.90 --level=10 --raid-devices=4 --chunk=64K|d d d d|4M|-"
  "raid5-4-0.90-missing1|--metadata=0.90 --level=5 --raid-devices=4 --chunk=64K|d missing d d|4M|add"
  "raid1-2-0.90-spare|--metadata=0.90 --level=1 --raid-devices=2 --spare-devices=1|d d d|4M|fail:1"
)

pattern() { # case number, sectors
  if [ -x "${MD_ORACLE_CACHE:-$HOME/.cache/md-oracle}/mdpattern" ]; then
    "${MD_ORACLE_CACHE:-$HOME/.cache/md-oracle}/mdpattern" gen "$1" "$2"
  else
    python3 -c 'import struct,sys
c,n=int(sys.argv[1]),int(sys.argv[2]);w=sys.stdout.buffer
for s in range(n): w.write(b"MDORACLE"+struct.pack("<QQ",s,c)+bytes([(s*31+7)&0xff])*488)' "$1" "$2"
  fi
}

# The kernel's verdict on the images in folder $1 (strict when $2 is -S), case number $3,
# expected sha256 $4; prints one word and a note, returns non-zero on FAIL.
kernel() {
  local out
  # shellcheck disable=SC2086
  if out=$("$oracle/check-images.sh" $2 -p "$3" -e "$4" "$1" 2>&1); then
    local none="no md check: not redundant"
    [ -z "$2" ] && none="no md check: degraded"
    echo "PASS ($(echo "$out" | grep -m1 -o 'mismatch_cnt[^,]*' || echo "$none"))"
  else
    echo "FAIL"; echo "$out" | tail -25 | sed 's/^/    /'; return 1
  fi
}

work=$(mktemp -d)
trap 'kill -9 $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
pass=0; fail=0; failed=()
num=1100
for spec in "${cases[@]}"; do
  IFS='|' read -r name flags list size then <<<"$spec"
  num=$((num + 1))
  [[ "$name" =~ $filter ]] || continue
  dir=$work/$name; mkdir -p "$dir"
  args=(); live=(); holes=()
  i=0
  for word in $list; do
    if [ "$word" = missing ]; then
      args+=(missing); holes+=("$dir/disk$i.img")
    else
      truncate -s "$size" "$dir/disk$i.img"; args+=("$dir/disk$i.img"); live+=("$dir/disk$i.img")
    fi
    i=$((i + 1))
  done
  # shellcheck disable=SC2086
  if ! log=$("$uraid" create $flags --name="$name" "${args[@]}" 2>&1); then
    echo "FAIL $name: uraid create"; echo "$log" | sed 's/^/    /'; fail=$((fail + 1)); failed+=("$name"); continue
  fi
  bytes=$("$uraid" detail --json "${live[@]}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["array_size_bytes"])')
  pattern "$num" $((bytes / 512)) | "$uraid" write --offset=0 "${live[@]}" 2>/dev/null
  sha=$("$uraid" cat "${live[@]}" 2>/dev/null | sha256sum | cut -d' ' -f1)
  expect=$(pattern "$num" $((bytes / 512)) | sha256sum | cut -d' ' -f1)
  if [ "$sha" != "$expect" ]; then
    echo "FAIL $name: uraid cat differs from the pattern it wrote"; fail=$((fail + 1)); failed+=("$name"); continue
  fi
  # Whole arrays strictly; create rebuilds a spare into a missing slot, as md would.
  degraded=$("$uraid" detail --json "${live[@]}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["degraded"])')
  strict=-S; [ "$degraded" = True ] && strict=
  verdict=$(kernel "$dir" "$strict" "$num" "$sha") || { echo "FAIL $name"; echo "$verdict" | tail -n +2; fail=$((fail + 1)); failed+=("$name"); continue; }
  echo "PASS $name ${verdict#PASS }"; pass=$((pass + 1))
  case "$then" in
    add)
      adds=()
      for h in "${holes[@]}"; do truncate -s "$size" "$h"; adds+=(--device "$h"); done
      if ! log=$("$uraid" add "${adds[@]}" "${live[@]}" 2>&1); then
        echo "FAIL $name+add: uraid add"; echo "$log" | sed 's/^/    /'; fail=$((fail + 1)); failed+=("$name+add"); continue
      fi
      live+=("${holes[@]}")
      ;;
    fail:*)
      k=${then#fail:}
      sock=$dir/nbd.sock ctl=$dir/ctl.sock
      "$uraid" serve --listen=unix:"$sock" --control="$ctl" "${live[@]}" >"$dir/serve.log" 2>&1 &
      pid=$!
      for _ in $(seq 200); do [ -S "$ctl" ] && break; sleep 0.05; done
      "$uraid" ctl "$ctl" fail "$dir/disk$k.img" >/dev/null 2>&1
      "$uraid" ctl "$ctl" wait >/dev/null 2>&1
      took=$("$uraid" ctl "$ctl" status --json | python3 -c '
import json, sys
s = json.load(sys.stdin)
print(" ".join((m["path"] or "-").rsplit("/", 1)[-1] + ":" + str(m["state"]) for m in s["members"]))')
      "$uraid" ctl "$ctl" stop >/dev/null 2>&1
      wait "$pid"
      # The failed member is recorded faulty everywhere else; the kernel gets the rest.
      mv "$dir/disk$k.img" "$dir/failed.raw.off"
      keep=(); for m in "${live[@]}"; do [ "$m" != "$dir/disk$k.img" ] && keep+=("$m"); done
      live=("${keep[@]}")
      echo "     $name: after ctl fail disk$k: $took"
      ;;
    *) [ -n "${KEEP:-}" ] && mkdir -p "$KEEP" && cp -r "$dir" "$KEEP/"; continue ;;
  esac
  again=$("$uraid" cat "${live[@]}" 2>/dev/null | sha256sum | cut -d' ' -f1)
  if [ "$again" != "$sha" ]; then
    echo "FAIL $name+$then: uraid reads other bytes afterwards"; fail=$((fail + 1)); failed+=("$name+$then"); continue
  fi
  if verdict=$(kernel "$dir" -S "$num" "$sha"); then
    echo "PASS $name+$then ${verdict#PASS }"; pass=$((pass + 1))
  else
    echo "FAIL $name+$then"; echo "$verdict" | tail -n +2; fail=$((fail + 1)); failed+=("$name+$then")
  fi
  [ -n "${KEEP:-}" ] && mkdir -p "$KEEP" && cp -r "$dir" "$KEEP/"
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ] || { echo "failed: ${failed[*]}"; exit 1; }
