#!/usr/bin/env bash
# Arrays that crashed under uraid and were resynced by it, judged by the real kernel.
#
# For each case: create the array, serve it, write 24 MiB of random data through NBD, kill the
# server with SIGKILL (the array is left dirty), run `uraid resync`, and hand the members to the
# md-oracle: the kernel must assemble every image, find the array clean (no resync started), read
# the sha256 `uraid cat` reads, and report mismatch_cnt 0 after a check (-S, strict).
#
# usage: scripts/kernel-check-resync.sh [NAME-REGEX]   env: URAID, MD_ORACLE (as kernel-check.sh)
# Needs nbdcopy (libnbd-bin).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
oracle=${MD_ORACLE:-$repo/../shared/tools/md-oracle}
uraid=${URAID:-$repo/target/release/uraid}
filter=${1:-.}
[ -x "$oracle/check-images.sh" ] || { echo "md-oracle not found at $oracle (set MD_ORACLE)" >&2; exit 2; }
if [ ! -x "$uraid" ]; then (cd "$repo" && cargo build --release -q -p uraid); fi

# name | create flags | members
cases=(
  "raid1-2|--level=1|2"
  "raid5-4|--level=5 --chunk=64K|4"
  "raid5-4-bitmap|--level=5 --chunk=64K --bitmap=internal --bitmap-chunk=1M|4"
  "raid6-5|--level=6 --chunk=64K|5"
  "raid10-4-n2|--level=10 --chunk=64K|4"
  "raid10-4-f2-bitmap|--level=10 --chunk=64K --layout=f2 --bitmap=internal --bitmap-chunk=1M|4"
)

work=$(mktemp -d)
server=
trap '[ -n "$server" ] && kill -9 "$server" 2>/dev/null; rm -rf "$work"' EXIT
head -c 24M /dev/urandom >"$work/data"
pass=0; fail=0; failed=()
for spec in "${cases[@]}"; do
  IFS='|' read -r name flags n <<<"$spec"
  [[ "$name" =~ $filter ]] || continue
  dir=$work/$name; mkdir -p "$dir"
  members=()
  for i in $(seq 0 $((n - 1))); do truncate -s 32M "$dir/disk$i.img"; members+=("$dir/disk$i.img"); done
  # shellcheck disable=SC2086
  "$uraid" create $flags --raid-devices="$n" "${members[@]}" >/dev/null 2>&1
  "$uraid" serve --listen="unix:$dir/nbd.sock" "${members[@]}" 2>"$dir/serve.log" &
  server=$!
  for _ in $(seq 100); do [ -S "$dir/nbd.sock" ] && break; sleep 0.1; done
  nbdcopy "$work/data" "nbd+unix:///?socket=$dir/nbd.sock"
  kill -9 "$server"; wait "$server" 2>/dev/null || true; server=
  state=$("$uraid" detail --json "${members[@]}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["clean"])')
  if [ "$state" != "False" ]; then
    echo "FAIL $name: not dirty after SIGKILL (clean=$state)"; fail=$((fail + 1)); failed+=("$name"); continue
  fi
  resync=$("$uraid" resync "${members[@]}" 2>&1 | grep -m1 'resync completed' || true)
  sha=$("$uraid" cat "${members[@]}" 2>/dev/null | sha256sum | cut -d' ' -f1)
  judge=$dir/judge; mkdir -p "$judge"; cp --sparse=always "${members[@]}" "$judge/"
  if out=$("$oracle/check-images.sh" -S -e "$sha" "$judge" 2>&1); then
    echo "PASS $name ($(echo "$out" | grep -m1 -o 'mismatch_cnt[^,]*'); ${resync#uraid: })"; pass=$((pass + 1))
  else
    echo "FAIL $name"; echo "$out" | tail -20 | sed 's/^/    /'; fail=$((fail + 1)); failed+=("$name")
  fi
  rm -rf "$dir"
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ] || { echo "failed: ${failed[*]}"; exit 1; }
