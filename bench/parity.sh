#!/usr/bin/env bash
# Compare uraid's parity kernels with ISA-L's (Debian libisal-dev) on this machine, in one run:
# `uraid bench parity --json` and bench/isal/isal_bench.c time the same matrix, and a table
# gives each pair's GB/s (data members' bytes, 10^9 per GB), uraid/ISA-L, and for streaming
# working sets the ratio to the single-core memory read bandwidth uraid measured.
#
# Usage: bench/parity.sh [--kernel NAMES] [--out DIR] [matrix options]
#   --kernel NAMES  uraid kernels to time (default: best, the best one this CPU runs)
#   --out DIR       also keep the raw JSON lines there (uraid.jsonl, isal.jsonl)
#   matrix options, passed to both: --op, --layout, --chunk, --working-set, --runs, --seconds
#   (the two are run one operation at a time, alternately)
#   (see `uraid bench parity --help`; defaults: every op, 4+1/8+1 and 4+2/8+2, 64K and 1M
#   chunks, hot and 512M working sets, 3 runs of 0.3 s).
# URAID=PATH uses that binary instead of building one with cargo.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! dpkg -s libisal-dev >/dev/null 2>&1; then
  echo "parity.sh: ISA-L is not installed: install the Debian package libisal-dev (apt-get install libisal-dev, or scripts/setup.sh)" >&2
  exit 1
fi
command -v gcc >/dev/null || { echo "parity.sh: gcc not found (Debian package gcc)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "parity.sh: python3 not found" >&2; exit 1; }

kernel=best
out=""
ops=xor,pq,recover1,recover2
matrix=()
timing=()
while [ $# -gt 0 ]; do
  case "$1" in
    --kernel) kernel="${2:?--kernel needs a value}"; shift 2 ;;
    --kernel=*) kernel="${1#*=}"; shift ;;
    --out) out="${2:?--out needs a directory}"; shift 2 ;;
    --out=*) out="${1#*=}"; shift ;;
    --op) ops="${2:?--op needs a value}"; shift 2 ;;
    --op=*) ops="${1#*=}"; shift ;;
    --runs|--seconds) timing+=("$1" "${2:?$1 needs a value}"); shift 2 ;;
    --runs=*|--seconds=*) timing+=("$1"); shift ;;
    --layout|--chunk|--working-set) matrix+=("$1" "${2:?$1 needs a value}"); shift 2 ;;
    --layout=*|--chunk=*|--working-set=*) matrix+=("$1"); shift ;;
    *) echo "parity.sh: unknown option $1 (see the comment at the top of bench/parity.sh)" >&2; exit 2 ;;
  esac
done

if [ -z "${URAID:-}" ]; then
  cargo build --release -q -p uraid
  URAID="${CARGO_TARGET_DIR:-target}/release/uraid"
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gcc -O2 -Wall -o "$work/isal_bench" bench/isal/isal_bench.c -lisal

# One operation at a time, uraid then ISA-L, so that a machine whose load changes during the
# run treats both alike as far as it can.
echo "parity.sh: timing memory read bandwidth..." >&2
"$URAID" bench membw --json "${timing[@]}" >"$work/uraid.jsonl"
: >"$work/isal.jsonl"
for op in ${ops//,/ }; do
  echo "parity.sh: timing $op: uraid (kernel $kernel), then ISA-L..." >&2
  "$URAID" bench parity --json --no-membw --kernel "$kernel" --op "$op" "${matrix[@]}" "${timing[@]}" >>"$work/uraid.jsonl"
  "$work/isal_bench" --json --op "$op" "${matrix[@]}" "${timing[@]}" >>"$work/isal.jsonl"
done
if [ -n "$out" ]; then
  mkdir -p "$out"
  cp "$work/uraid.jsonl" "$work/isal.jsonl" "$out/"
fi

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)
isal_version=$(dpkg-query -W -f '${Version}' libisal-dev)
python3 - "$work/uraid.jsonl" "$work/isal.jsonl" "$cpu" "$isal_version" <<'EOF'
import json, sys

def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]

uraid, isal, cpu, isal_version = load(sys.argv[1]), load(sys.argv[2]), sys.argv[3], sys.argv[4]

def size(n):
    for unit, suffix in ((1 << 30, "G"), (1 << 20, "M")):
        if n >= unit and n % unit == 0:
            return f"{n // unit}{suffix}"
    if n >= 1 << 20:
        return f"{n / (1 << 20):.1f}M"
    return f"{n >> 10}K" if n >= 1 << 10 and n % (1 << 10) == 0 else f"{n}B"

def key(r):
    return (r["op"], r["data_members"], r["parity_members"], r["chunk_bytes"], r["working_set_bytes"])

mem = next((r for r in uraid if r["op"] == "read"), None)
isal_by_key = {key(r): r for r in isal}
print(f"CPU: {cpu or 'unknown'}; ISA-L {isal_version}")
if mem:
    print(f"single-core memory read: {mem['gbps']:.2f} GB/s (median of {len(mem['runs'])} runs, "
          f"min {mem['gbps_min']:.2f}, max {mem['gbps_max']:.2f}, {size(mem['working_set_bytes'])} buffer)")
print("GB/s = data members' bytes per second / 1e9, median of the runs; /mem = GB/s / memory read GB/s (streaming rows)")
print()
head = ("op", "layout", "chunk", "working set", "kernel", "uraid GB/s", "ISA-L GB/s", "uraid/ISA-L",
        "uraid/mem", "ISA-L/mem")
rows = []
for r in uraid:
    if r["op"] == "read":
        continue
    i = isal_by_key.get(key(r))
    hot = r["working_set_bytes"] == (r["data_members"] + r["parity_members"]) * r["chunk_bytes"]
    stream = mem is not None and not hot
    rows.append((
        r["op"],
        f"{r['data_members']}+{r['parity_members']}",
        size(r["chunk_bytes"]),
        "hot" if hot else size(r["working_set_bytes"]),
        r["kernel"],
        f"{r['gbps']:.2f}",
        f"{i['gbps']:.2f}" if i else "-",
        f"{r['gbps'] / i['gbps']:.2f}" if i and i["gbps"] > 0 else "-",
        f"{r['gbps'] / mem['gbps']:.2f}" if stream else "-",
        f"{i['gbps'] / mem['gbps']:.2f}" if stream and i else "-",
    ))
widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
left = 5  # text columns up to and including the kernel
for line in [head] + rows:
    print("  ".join(str(x).ljust(w) if n < left else str(x).rjust(w) for n, (x, w) in enumerate(zip(line, widths))))
missing = [key(r) for r in uraid if r["op"] != "read" and key(r) not in isal_by_key]
if missing:
    print(f"parity.sh: {len(missing)} uraid rows have no ISA-L counterpart", file=sys.stderr)
    sys.exit(1)
EOF
