#!/usr/bin/env bash
# Rebuild the kernel's own degraded arrays with uraid, then have the kernel judge the result.
#
# For every degraded fixture in ../shared/fixtures/md (arrays Linux md made and then lost members
# of), this takes the images md still counts as members, adds one fresh zeroed image per lost
# member with `uraid add --device` (which rebuilds them from redundancy), and hands them to the real
# kernel through the md-oracle: it must assemble every image, find the array clean and whole,
# read the fixture's original sha256, and report mismatch_cnt 0 after a check (-S, strict).
#
# usage: scripts/kernel-check-rebuild.sh [NAME-REGEX]    env: URAID, MD_ORACLE, FIXTURES
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
oracle=${MD_ORACLE:-$repo/../shared/tools/md-oracle}
fixtures=${FIXTURES:-$repo/../shared/fixtures/md}
uraid=${URAID:-$repo/target/release/uraid}
filter=${1:-.}
[ -x "$oracle/check-images.sh" ] || { echo "md-oracle not found at $oracle (set MD_ORACLE)" >&2; exit 2; }
if [ ! -x "$uraid" ]; then (cd "$repo" && cargo build --release -q -p uraid); fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pass=0; fail=0; failed=()
for case_dir in "$fixtures"/*/; do
  name=$(basename "$case_dir")
  [[ "$name" =~ $filter ]] || continue
  json=$case_dir/case.json
  [ -f "$json" ] || continue
  # Degraded redundant arrays only.
  python3 - "$json" <<'EOF' || continue
import json, sys
c = json.load(open(sys.argv[1]))
ok = (c.get("degraded_devices_live") or 0) > 0 and c["level"] not in ("linear", "raid0")
sys.exit(0 if ok else 1)
EOF
  dir=$work/$name; mkdir -p "$dir"
  members=()
  for f in "$case_dir"/disk*.img.xz; do
    out=$dir/$(basename "$f" .xz); xz -dc "$f" >"$out"; members+=("$out")
  done
  size=$(stat -c %s "${members[0]}")
  # One fresh image per member the array lacks.
  missing=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["degraded_devices_live"])' "$json")
  news=(); adds=()
  for k in $(seq 1 "$missing"); do
    new=$dir/new$k.img; truncate -s "$size" "$new"; news+=("$new"); adds+=(--device "$new")
  done
  want=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["array_sha256"])' "$json")
  if ! log=$("$uraid" add "${adds[@]}" "${members[@]}" 2>&1); then
    echo "FAIL $name: uraid add"; echo "$log" | sed 's/^/    /'; fail=$((fail + 1)); failed+=("$name"); continue
  fi
  # The images uraid now counts as members (stale ones are left out, as md leaves them out).
  mapfile -t live < <("$uraid" detail --json "${members[@]}" "${news[@]}" | python3 -c '
import json, sys
for m in json.load(sys.stdin)["members"]:
    if m["state"] == "active":
        print(m["file"])')
  got=$("$uraid" cat "${live[@]}" 2>/dev/null | sha256sum | cut -d' ' -f1)
  if [ "$got" != "$want" ]; then
    echo "FAIL $name: uraid reads $got after the rebuild, the kernel wrote $want"; fail=$((fail + 1)); failed+=("$name"); continue
  fi
  judge=$dir/judge; mkdir -p "$judge"
  i=0; for m in "${live[@]}"; do cp --sparse=always "$m" "$judge/$(printf 'm%02d' $i).img"; i=$((i + 1)); done
  if out=$("$oracle/check-images.sh" -J -S -e "$want" "$judge" 2>&1); then
    echo "PASS $name ($(echo "$out" | grep -m1 -o 'mismatch_cnt[^,]*'))"; pass=$((pass + 1))
  else
    echo "FAIL $name"; echo "$out" | tail -20 | sed 's/^/    /'; fail=$((fail + 1)); failed+=("$name")
  fi
  rm -rf "$dir"
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ] || { echo "failed: ${failed[*]}"; exit 1; }
