#!/usr/bin/env bash
# An md user's weekly habits, done with uraid, each step beside the mdadm command it stands for:
# create with a missing member and a spare, assemble by scan, status, fail, remove and add a
# member, grow by one disk while a client writes, stop, assemble again, and zero the
# superblocks. Every step checks what it should have done; the script stops at the first that
# did not (exit 1). Everything happens in a scratch folder on image files, with the running
# arrays' sockets there too (URAID_RUNTIME_DIR), so nothing of the machine's is touched.
#
# usage: scripts/mdadm-habits.sh        env: URAID (default: uraid on PATH, else this checkout's
#                                       target/release/uraid); needs nbdcopy (libnbd-bin)
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
if [ -n "${URAID:-}" ]; then uraid=$URAID
elif command -v uraid >/dev/null; then uraid=$(command -v uraid)
else uraid=$here/target/release/uraid; fi
[ -x "$uraid" ] || { echo "uraid not found (build it: cargo build --release -p uraid)" >&2; exit 2; }
command -v nbdcopy >/dev/null || { echo "nbdcopy not found (Debian package libnbd-bin)" >&2; exit 2; }

work=$(mktemp -d)
export URAID_RUNTIME_DIR=$work/run
cleanup() {
  "$uraid" stop all >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
cd "$work"

n=0
step() { n=$((n + 1)); printf '\n== %d. %s\n' "$n" "$1"; }
run() { printf '$ uraid %s\n' "$*"; "$uraid" "$@"; }
fail() { echo "FAILED: $*" >&2; exit 1; }
state() { "$uraid" ctl habits status --json | python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }
sock=$URAID_RUNTIME_DIR/habits/nbd.sock
uri="nbd+unix:///?socket=$sock"

truncate -s 64M d0.img d1.img d2.img d3.img
head -c 60M /dev/urandom >data.raw

step "mdadm --create /dev/md/habits --level=5 --raid-devices=3 --spare-devices=1 d0.img missing d2.img d1.img"
run create --name=habits --level=5 --raid-devices=3 --spare-devices=1 d0.img missing d2.img d1.img

step "mdadm --assemble --scan (the members are found by their superblocks)"
run assemble --scan "$work"
run status
# md starts rebuilding the spare into the missing slot at once.
run ctl habits wait
[ "$(state '["degraded"]')" = 0 ] || fail "the spare did not take the missing slot"
echo "$ nbdcopy data.raw $uri"
nbdcopy data.raw "$uri"

step "mdadm /dev/md/habits --fail d2.img --remove d2.img; mdadm /dev/md/habits --add d2.img"
run ctl habits fail d2.img
run status
[ "$(state '["degraded"]')" = 1 ] || fail "failing d2.img did not degrade the array"
run ctl habits remove d2.img
run ctl habits add d2.img
run ctl habits wait
[ "$(state '["degraded"]')" = 0 ] || fail "d2.img was not rebuilt"

step "mdadm --grow /dev/md/habits --raid-devices=4 --add d3.img, with a client writing"
head -c 16M /dev/urandom >more.raw
# The client rewrites the first 16 MiB during the reshape; data.raw is patched to match.
( sleep 0.2; nbdcopy more.raw "$uri" ) &
writer=$!
run ctl habits grow --raid-devices=4 --add d3.img
run status
wait "$writer" || fail "the client's writes failed during the grow"
dd if=more.raw of=data.raw conv=notrunc status=none
run ctl habits wait
run status
[ "$(state '["members"].__len__()')" = 4 ] || fail "the array does not have 4 members after the grow"

step "mdadm --stop /dev/md/habits"
run stop habits
[ ! -e "$sock" ] || fail "the array's socket is still there after the stop"

step "mdadm --assemble --scan, and the data read back"
run assemble --scan "$work"
echo "$ nbdcopy $uri back.raw; cmp -n 62914560 back.raw data.raw"
nbdcopy "$uri" back.raw
cmp -n $((60 << 20)) back.raw data.raw || fail "the data read back differs"
run ctl habits check
run ctl habits wait
[ "$(state '["mismatch_cnt"]')" = 0 ] || fail "the check found mismatches"
run stop habits

step "mdadm --zero-superblock d0.img d1.img d2.img d3.img"
run zero-superblock d0.img d1.img d2.img d3.img
if "$uraid" examine d0.img >/dev/null 2>&1; then fail "d0.img still has a superblock"; fi
"$uraid" examine d0.img || true

printf '\nAll %d steps did what mdadm would have done.\n' "$n"
