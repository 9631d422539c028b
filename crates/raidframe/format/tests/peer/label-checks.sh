#!/usr/bin/env bash
# The `raidctl -c` cases of src/configure_check.rs, run against NetBSD's driver on copies of
# the sets tests/peer_oracle.rs writes (ur0: RAID 0 over 3, ur1: RAID 1 over 4, ur5: RAID 5
# over 5; serial 4242, mod_counter 15).
# Usage: label-checks.sh ORACLE_DIR WORK_DIR   (WORK_DIR holding the sets peer_oracle.rs writes, or
# empty: then the sets are written first)
set -euo pipefail
O=$1; W=$2
if [ ! -e "$W/ur5.conf" ]; then
  mkdir -p "$W"
  RAIDFRAME_PEER_DIR=$(readlink -f "$W") cargo test -q -p uraid-raidframe-format --locked --test peer_oracle -- --ignored \
    > /dev/null
fi
cd "$W"
patch_word() { # patch_word IMAGE OFFSET_IN_LABEL VALUE (little-endian 32-bit)
  python3 -c "import struct,sys; f=open(sys.argv[1],'r+b'); f.seek(16384+int(sys.argv[2])); f.write(struct.pack('<i', int(sys.argv[3])))" "$@"
}
# case NAME SET NCOL ABSENT_COLUMN_OR_- PATCHES...   (a patch is COLUMN:OFFSET:VALUE)
case_() {
  local d=$1 s=$2 n=$3 absent=$4; shift 4
  rm -rf "cases/$d"; mkdir -p "cases/$d"
  for ((i = 0; i < n; i++)); do
    if [ -e "$s.c$i.img.orig" ]; then cp "$s.c$i.img.orig" "cases/$d/c$i.img"; else cp "$s.c$i.img" "cases/$d/c$i.img"; fi
  done
  if [ "$absent" = - ]; then cp "$s.conf" "cases/$d/a.conf"; else sed "s#^/disk$absent\$#absent#" "$s.conf" > "cases/$d/a.conf"; fi
  for p in "$@"; do IFS=: read -r c off val <<< "$p"; patch_word "cases/$d/c$c.img" "$off" "$val"; done
  ( cd "cases/$d"
    "$O/rfo" start k c*.img > /dev/null
    if "$O/rfo" raidctl k -c a.conf raid0 > /dev/null 2>&1; then
      echo "$d: configures; failed: $("$O/rfo" raidctl k -s raid0 | awk '/^ +[^ ]+: failed$/ { printf "%s ", $1 }')"
      "$O/rfo" raidctl k -u raid0
    else echo "$d: refused"; fi
    "$O/rfo" stop k )
}
case_ good ur5 5 -
case_ absent ur5 5 1
case_ serial ur5 5 - 2:4:513
case_ stale ur5 5 - 3:8:14
case_ absent-stale ur5 5 1 3:8:14
case_ absent-serial ur1 4 1 2:4:513
case_ stale-raid1 ur1 4 - 1:8:9
case_ tie-raid1 ur1 4 - 0:8:9 1:8:9
case_ serial-raid0 ur0 3 - 1:4:7
