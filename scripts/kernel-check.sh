#!/usr/bin/env bash
# Hand arrays that uraid created and wrote to the real Linux md driver, and check that the kernel
# assembles them, reads back exactly what `uraid cat` reads, and finds mismatch_cnt 0 after a
# check. It boots Linux in qemu through the md-oracle tools (../shared/tools/md-oracle), so it is
# slow (about 25 s per array under emulation) and is not part of every test run.
#
# usage: scripts/kernel-check.sh [NAME-REGEX]     (default: every case below)
# env:   URAID=path/to/uraid (default: target/release/uraid, built if missing)
#        MD_ORACLE=path/to/md-oracle (default: ../shared/tools/md-oracle beside the repository)
#        KEEP=dir  keep the member images of each case there
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
oracle=${MD_ORACLE:-$repo/../shared/tools/md-oracle}
uraid=${URAID:-$repo/target/release/uraid}
filter=${1:-.}
[ -x "$oracle/check-images.sh" ] || { echo "md-oracle not found at $oracle (set MD_ORACLE)" >&2; exit 2; }
if [ ! -x "$uraid" ]; then (cd "$repo" && cargo build --release -q -p uraid); fi

# name | create flags | members | member size | scenario (clean, degraded:K = member K removed
# before writing; rebuilt members are the next issue's)
cases=(
  "linear-3|--level=linear|3|4M|clean"
  "linear-2-1.0|--level=linear --metadata=1.0|2|4M|clean"
  "raid0-3-64k|--level=0 --chunk=64K|3|4M|clean"
  "raid0-2-4k|--level=0 --chunk=4K|2|4M|clean"
  "raid1-2|--level=1|2|4M|clean"
  "raid1-3-1.0|--level=1 --metadata=1.0|3|4M|clean"
  "raid1-2-bitmap|--level=1 --bitmap=internal|2|8M|clean"
  "raid4-4|--level=4 --chunk=64K|4|4M|clean"
  "raid5-4-ls|--level=5 --chunk=64K --layout=left-symmetric|4|4M|clean"
  "raid5-4-la|--level=5 --chunk=64K --layout=left-asymmetric|4|4M|clean"
  "raid5-4-rs|--level=5 --chunk=64K --layout=right-symmetric|4|4M|clean"
  "raid5-4-ra|--level=5 --chunk=64K --layout=right-asymmetric|4|4M|clean"
  "raid5-4-pf|--level=5 --chunk=64K --layout=parity-first|4|4M|clean"
  "raid5-4-pl|--level=5 --chunk=64K --layout=parity-last|4|4M|clean"
  "raid5-3-512k|--level=5|3|8M|clean"
  "raid5-4-ls-1.0-bitmap|--level=5 --chunk=64K --metadata=1.0 --bitmap=internal|4|4M|clean"
  "raid5-4-ls-degraded|--level=5 --chunk=64K|4|4M|degraded:2"
  "raid6-5-ls|--level=6 --chunk=64K|5|4M|clean"
  "raid6-5-la|--level=6 --chunk=64K --layout=left-asymmetric|5|4M|clean"
  "raid6-5-rs|--level=6 --chunk=64K --layout=right-symmetric|5|4M|clean"
  "raid6-5-ra|--level=6 --chunk=64K --layout=right-asymmetric|5|4M|clean"
  "raid6-5-pf|--level=6 --chunk=64K --layout=parity-first|5|4M|clean"
  "raid6-5-pl|--level=6 --chunk=64K --layout=parity-last|5|4M|clean"
  "raid6-5-ls6|--level=6 --chunk=64K --layout=left-symmetric-6|5|4M|clean"
  "raid6-5-la6|--level=6 --chunk=64K --layout=left-asymmetric-6|5|4M|clean"
  "raid6-5-rs6|--level=6 --chunk=64K --layout=right-symmetric-6|5|4M|clean"
  "raid6-5-ra6|--level=6 --chunk=64K --layout=right-asymmetric-6|5|4M|clean"
  "raid6-5-pf6|--level=6 --chunk=64K --layout=parity-first-6|5|4M|clean"
  "raid6-5-ddf-zero-restart|--level=6 --chunk=64K --layout=ddf-zero-restart|5|4M|clean"
  "raid6-5-ddf-N-restart|--level=6 --chunk=64K --layout=ddf-N-restart|5|4M|clean"
  "raid6-5-ddf-N-continue|--level=6 --chunk=64K --layout=ddf-N-continue|5|4M|clean"
  "raid5-3-4m-chunk|--level=5 --chunk=4M|3|32M|clean"
  "raid6-6-degraded2|--level=6 --chunk=64K|6|4M|degraded:1,4"
  "raid10-4-n2|--level=10 --chunk=64K --layout=n2|4|4M|clean"
  "raid10-3-n2|--level=10 --chunk=64K --layout=n2|3|4M|clean"
  "raid10-5-f2|--level=10 --chunk=64K --layout=f2|5|4M|clean"
  "raid10-4-o2|--level=10 --chunk=64K --layout=o2|4|4M|clean"
  "raid10-3-n3|--level=10 --chunk=64K --layout=n3|3|4M|clean"
  "raid10-4-f2-degraded|--level=10 --chunk=64K --layout=f2|4|4M|degraded:1"
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

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pass=0; fail=0; failed=()
num=1000
for spec in "${cases[@]}"; do
  IFS='|' read -r name flags n size scenario <<<"$spec"
  num=$((num + 1))
  [[ "$name" =~ $filter ]] || continue
  dir=$work/$name; mkdir -p "$dir"
  members=()
  for i in $(seq 0 $((n - 1))); do truncate -s "$size" "$dir/disk$i.img"; members+=("$dir/disk$i.img"); done
  # shellcheck disable=SC2086
  "$uraid" create $flags --raid-devices="$n" --name="$name" "${members[@]}" >/dev/null
  live=("${members[@]}")
  if [[ "$scenario" == degraded:* ]]; then
    for k in ${scenario#degraded:}; do k=${k//,/ }; for j in $k; do rm -f "$dir/disk$j.img"; done; done
    live=(); for m in "${members[@]}"; do [ -f "$m" ] && live+=("$m"); done
  fi
  bytes=$("$uraid" detail --json "${live[@]}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["array_size_bytes"])')
  pattern "$num" $((bytes / 512)) | "$uraid" write --offset=0 "${live[@]}" 2>/dev/null
  want=$("$uraid" cat "${live[@]}" 2>/dev/null | sha256sum | cut -d' ' -f1)
  expect=$(pattern "$num" $((bytes / 512)) | sha256sum | cut -d' ' -f1)
  if [ "$want" != "$expect" ]; then
    echo "FAIL $name: uraid cat differs from the pattern it wrote"; fail=$((fail + 1)); failed+=("$name"); continue
  fi
  strict=-S; [[ "$scenario" == degraded:* ]] && strict=
  if out=$("$oracle/check-images.sh" $strict -p "$num" -e "$want" "$dir" 2>&1); then
    echo "PASS $name ($(echo "$out" | grep -m1 -o 'mismatch_cnt[^,]*' || echo "no check: ${scenario/clean/not redundant}"))"
    pass=$((pass + 1))
  else
    echo "FAIL $name"; echo "$out" | tail -25 | sed 's/^/    /'; fail=$((fail + 1)); failed+=("$name")
  fi
  [ -n "${KEEP:-}" ] && mkdir -p "$KEEP" && cp -r "$dir" "$KEEP/"
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ] || { echo "failed: ${failed[*]}"; exit 1; }
