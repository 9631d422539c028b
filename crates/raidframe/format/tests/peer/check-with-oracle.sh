#!/usr/bin/env bash
# Has NetBSD's RAIDframe driver judge sets written entirely by this crate.
# Usage: check-with-oracle.sh ORACLE_DIR WORK_DIR
# For each set: `raidctl -c` (configures only if the labels agree), status and parity status,
# the RAID contents read back through the driver, then the parity judgement of the oracle's
# README (map off, full `-iv` rewrite, and no data-area byte may change).
set -euo pipefail
O=$1; W=$2; HERE=$(cd "$(dirname "$0")" && pwd)
rm -rf "$W"; mkdir -p "$W"
RAIDFRAME_PEER_DIR=$(readlink -f "$W") cargo test -q -p uraid-raidframe-format --locked --test peer_oracle -- --ignored \
  > /dev/null
cd "$W"
rfo() { "$O/rfo" "$@"; }
for conf in *.conf; do
  name=${conf%.conf}; imgs=("$name".c*.img)
  for img in "${imgs[@]}"; do cp "$img" "$img.orig"; done
  rfo start k "${imgs[@]}" > /dev/null
  rfo raidctl k -c "$conf" raid0
  rfo raidctl k -s raid0 | grep -E '^ +/disk' | sed "s/^/$name: /"
  rfo raidctl k -p raid0 | sed "s/^/$name: /"
  rfo out k /dev/rraid0d "$(stat -c %s "$name.data")" | cmp - "$name.data" && echo "$name: data reads back"
  level=$(awk '/^START layout/ { getline; while ($0 ~ /^#/) getline; print $4 }' "$conf")
  if [ "$level" != 0 ]; then # RAID 0 has neither parity nor a parity map
    rfo raidctl k -M no raid0 > /dev/null
    rfo raidctl k -u raid0
    rfo raidctl k -c "$conf" raid0
    rfo raidctl k -iv raid0 > /dev/null
  fi
  rfo raidctl k -u raid0
  rfo stop k
  for img in "${imgs[@]}"; do
    if cmp -s -i 32768 "$img" "$img.orig"; then echo "$name: $img data area unchanged by the full parity rewrite"
    else echo "$name: $img CHANGED by the parity rewrite"; fi
  done
done
