#!/usr/bin/env bash
# Partial parity logs written by uraid, replayed by the real kernel.
#
# uraid creates a 4-member raid5 with a PPL, serves it, puts a random-write load on it over NBD
# (fio, 16 in flight) and kills the server with SIGKILL in the middle: the members are left dirty
# with log entries for the writes in flight. Two cases: all members, and degraded (member 1
# left out, the write-hole case md refuses to start without a log). Each crashed image set is
# copied twice: uraid assembles one copy writable (replaying the log) and reads the array;
# the md-oracle VM (Linux 6.1) assembles the other, replaying the same log itself. The two must
# read the same bytes, the kernel must run the array with consistency_policy ppl, and the
# whole array must check with mismatch_cnt 0.
#
# usage: scripts/oracle/kernel-check-ppl-crash.sh   env: URAID (default target/release/uraid),
#        MD_ORACLE (default ../shared/tools/md-oracle next to the repo)
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
oracle=${MD_ORACLE:-$repo/../shared/tools/md-oracle}
uraid=${URAID:-$repo/target/release/uraid}
[ -x "$oracle/run-vm.sh" ] || { echo "md-oracle not found at $oracle (set MD_ORACLE)" >&2; exit 2; }
command -v fio >/dev/null || { echo "fio not found (scripts/setup.sh installs it)" >&2; exit 2; }
if [ ! -x "$uraid" ]; then (cd "$repo" && cargo build --release -q -p uraid); fi

work=$(mktemp -d)
trap 'kill -9 $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT

# Serve members ${@:2} with the socket and log in folder $1, until killed; sets $pid.
serve() {
  local dir=$1 sock=$1/nbd.sock
  rm -f "$sock"
  "$uraid" serve --listen=unix:"$sock" "${@:2}" >>"$dir/serve.log" 2>&1 &
  pid=$!
  for _ in $(seq 200); do [ -S "$sock" ] && break; sleep 0.05; done
  [ -S "$sock" ] || { cat "$dir/serve.log" >&2; exit 1; }
}

cases=(full degraded)
kernel_disks=()
for c in "${cases[@]}"; do
  d=$work/$c
  mkdir -p "$d"
  for i in 0 1 2 3; do truncate -s 24M "$d/d$i.img"; done
  "$uraid" create --level=5 --raid-devices=4 --chunk=64K --consistency-policy=ppl --name="ppl-crash-$c" \
    --homehost=oracle "$d"/d?.img >/dev/null
  members=("$d"/d?.img)
  [ "$c" = degraded ] && members=("$d/d0.img" "$d/d2.img" "$d/d3.img")
  serve "$d" "${members[@]}"
  fio --name=load --ioengine=nbd --uri="nbd+unix:///?socket=$d/nbd.sock" --rw=randwrite \
    --bsrange=512-48k --iodepth=16 --time_based --runtime=10 --size=16M --randrepeat=0 \
    >"$d/fio.log" 2>&1 &
  sleep 2
  kill -9 "$pid"
  wait "$pid" 2>/dev/null || true
  sleep 0.5
  if [ "$c" = full ]; then
    "$uraid" detail --json "${members[@]}" | grep -q '"clean": false' ||
      { echo "SKIP $c: the kill left the array clean, nothing to replay" >&2; exit 1; }
  fi
  # uraid's replay, on a copy.
  mkdir -p "$d/u"
  for m in "${members[@]}"; do cp --sparse=always "$m" "$d/u/"; done
  umembers=()
  for m in "${members[@]}"; do umembers+=("$d/u/$(basename "$m")"); done
  serve "$d/u" "${umembers[@]}"
  kill -TERM "$pid"
  wait "$pid"
  grep -h "partial parity log was replayed" "$d/u/serve.log" >"$d/replay.txt" || true
  "$uraid" cat "${umembers[@]}" 2>/dev/null | sha256sum | cut -d' ' -f1 >"$d/uraid.sha"
  if [ "$c" = full ]; then
    # uraid's replay made parity match too, without a resync.
    "$uraid" check "${umembers[@]}" 2>/dev/null | grep -qx "mismatch_cnt 0" ||
      { echo "FAIL $c: uraid check after uraid's replay: $("$uraid" check "${umembers[@]}" 2>&1)"; exit 1; }
  fi
  kernel_disks+=("${members[@]}")
done

cat >"$work/guest.sh" <<'GUEST'
set -- $DISKS
full="$1 $2 $3 $4"; shift 4
degraded="$1 $2 $3"
for c in full degraded; do
  eval devs=\$$c
  if ! mdadm --assemble /dev/md0 --run $devs >/tmp/asm.log 2>&1; then
    echo "$c assemble FAILED: $(cat /tmp/asm.log | tr '\n' ' ')"; continue
  fi
  policy=$(cat /sys/block/md0/md/consistency_policy)
  sha=$(sha256sum /dev/md0 | cut -d' ' -f1)
  mm=n/a
  if [ "$c" = full ]; then
    echo check > /sys/block/md0/md/sync_action; sleep 1; mdadm --wait /dev/md0 >/dev/null 2>&1
    mm=$(cat /sys/block/md0/md/mismatch_cnt)
  fi
  echo "$c policy=$policy sha=$sha mismatch_cnt=$mm"
  mdadm --stop /dev/md0 >/dev/null 2>&1
done
dmesg | grep -i -E "ppl|dirty degraded" | sed 's/^/dmesg: /'
GUEST
out=$("$oracle/run-vm.sh" "$work/guest.sh" "${kernel_disks[@]}" 2>/dev/null)
echo "$out" | grep "^dmesg:" || true
fail=0
for c in "${cases[@]}"; do
  line=$(echo "$out" | grep "^$c " || echo "$c (no result)")
  mm=0
  [ "$c" = degraded ] && mm=n/a
  want="$c policy=ppl sha=$(cat "$work/$c/uraid.sha") mismatch_cnt=$mm"
  if [ "$line" = "$want" ]; then
    echo "PASS $c: the kernel's replay reads what uraid's reads ($(sed 's/^uraid: //' "$work/$c/replay.txt"))"
  else
    echo "FAIL $c: kernel said '$line', wanted '$want'"; fail=1
  fi
done
exit $fail
