#!/usr/bin/env bash
# What md's partial parity log (--consistency-policy=ppl) costs on writes: a raid5 over 4 member
# files on tmpfs, created with the log and without it (resync policy), driven in-process by
# `uraid bench engine` with 4 KiB random writes and 1 MiB sequential writes at queue depth 32.
# Prints the median of --runs runs of each and the ratio with/without.
#
# Usage: bench/ppl.sh [--runs 3] [--seconds 4] [--dir /dev/shm/uraid-bench-ppl]
# URAID=PATH uses that binary instead of target/release/uraid.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=3 seconds=4 dir=/dev/shm/uraid-bench-ppl
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs="${2:?}"; shift 2 ;;
    --seconds) seconds="${2:?}"; shift 2 ;;
    --dir) dir="${2:?}"; shift 2 ;;
    *) echo "ppl.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
uraid="${URAID:-target/release/uraid}"
[ -x "$uraid" ] || { echo "ppl.sh: $uraid not found; build it with cargo build --release -p uraid" >&2; exit 1; }
command -v python3 >/dev/null || { echo "ppl.sh: python3 not found" >&2; exit 1; }
mkdir -p "$dir"
trap 'rm -rf "$dir"' EXIT
members=("$dir"/m{0,1,2,3}.img)

median() { python3 -c 'import sys,statistics; print(f"{statistics.median(float(x) for x in sys.argv[1:]):.0f}")' "$@"; }

declare -A result
for policy in resync ppl; do
  for m in "${members[@]}"; do rm -f "$m"; truncate -s 512M "$m"; done
  "$uraid" create --level=5 --raid-devices=4 --chunk=64K --force --assume-clean \
    --consistency-policy="$policy" "${members[@]}" >/dev/null
  for load in "randwrite 4K iops" "write 1M mbps"; do
    set -- $load
    vals=()
    for _ in $(seq "$runs"); do
      out=$("$uraid" bench engine --json --pattern="$1" --bs="$2" --iodepth=32 --seconds="$seconds" "${members[@]}")
      vals+=("$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$out" "$3")")
    done
    result[$policy,$1]=$(median "${vals[@]}")
    echo "ppl.sh: $policy $1 $2: ${vals[*]}" >&2
  done
done

echo
echo "raid5, 4 members of 512 MiB on tmpfs, 64 KiB chunks, queue depth 32, medians of $runs runs"
echo
echo "| load | without log | with PPL | with / without |"
echo "|---|---|---|---|"
for l in "randwrite:4K random writes (IOPS)" "write:1M sequential writes (MB/s)"; do
  k=${l%%:*}; name=${l#*:}
  ratio=$(python3 -c "print(f'{${result[ppl,$k]}/${result[resync,$k]}:.2f}')")
  echo "| $name | ${result[resync,$k]} | ${result[ppl,$k]} | $ratio |"
done
