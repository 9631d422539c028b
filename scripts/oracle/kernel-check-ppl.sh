#!/usr/bin/env bash
# Arrays created by `uraid create --consistency-policy=ppl`, judged by the real kernel.
#
# For metadata 1.0, 1.1 and 1.2: uraid creates a 3-member raid5 with a PPL on 24 MiB files and
# writes 2 MiB of random data; one md-oracle VM boot (Linux 6.1, mdadm 4.2) then assembles each
# array, which must run with consistency_policy "ppl", read the sha256 `uraid cat` reads and
# report mismatch_cnt 0 after a check. md rewrites the superblocks (MULTIPLE_PPLS) when it
# stops; uraid must still read the arrays afterwards and call them ppl.
#
# usage: scripts/oracle/kernel-check-ppl.sh   env: URAID (default target/release/uraid),
#        MD_ORACLE (default ../shared/tools/md-oracle next to the repo)
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
oracle=${MD_ORACLE:-$repo/../shared/tools/md-oracle}
uraid=${URAID:-$repo/target/release/uraid}
[ -x "$oracle/run-vm.sh" ] || { echo "md-oracle not found at $oracle (set MD_ORACLE)" >&2; exit 2; }
if [ ! -x "$uraid" ]; then (cd "$repo" && cargo build --release -q -p uraid); fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
versions=(1.0 1.1 1.2)
disks=()
for v in "${versions[@]}"; do
  mkdir -p "$work/$v"
  for i in 0 1 2; do truncate -s 24M "$work/$v/d$i.img"; disks+=("$work/$v/d$i.img"); done
  "$uraid" create --level=5 --raid-devices=3 --chunk=64K --metadata="$v" --consistency-policy=ppl \
    --name="ppl-$v" --homehost=oracle "$work/$v"/d*.img >/dev/null
  head -c 2M /dev/urandom | "$uraid" write --offset=4K "$work/$v"/d*.img >/dev/null 2>"$work/$v.log" ||
    { cat "$work/$v.log" >&2; exit 1; }
  "$uraid" cat "$work/$v"/d*.img | sha256sum | cut -d' ' -f1 >"$work/$v.sha"
done

cat >"$work/guest.sh" <<'GUEST'
i=0
for v in 1.0 1.1 1.2; do
  devs="$(eval echo \$DISK$i \$DISK$((i + 1)) \$DISK$((i + 2)))"
  mdadm --assemble /dev/md0 --run $devs >/dev/null 2>&1 || { echo "$v assemble FAILED"; i=$((i + 3)); continue; }
  policy=$(cat /sys/block/md0/md/consistency_policy)
  sha=$(sha256sum /dev/md0 | cut -d' ' -f1)
  echo check > /sys/block/md0/md/sync_action; sleep 1; mdadm --wait /dev/md0 >/dev/null 2>&1
  echo "$v policy=$policy sha=$sha mismatch_cnt=$(cat /sys/block/md0/md/mismatch_cnt)"
  mdadm --stop /dev/md0 >/dev/null 2>&1
  i=$((i + 3))
done
GUEST
out=$("$oracle/run-vm.sh" "$work/guest.sh" "${disks[@]}" 2>/dev/null)
fail=0
for v in "${versions[@]}"; do
  line=$(echo "$out" | grep "^$v " || echo "$v (no result)")
  want="$v policy=ppl sha=$(cat "$work/$v.sha") mismatch_cnt=0"
  after=$("$uraid" detail --json "$work/$v"/d*.img | python3 -c 'import json,sys; print(json.load(sys.stdin)["consistency_policy"])')
  if [ "$line" = "$want" ] && [ "$after" = ppl ]; then
    echo "PASS $v ($line; uraid reads md's superblocks back as $after)"
  else
    echo "FAIL $v: kernel said '$line', wanted '$want'; uraid afterwards: $after"; fail=1
  fi
done
exit $fail
