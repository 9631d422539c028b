#!/usr/bin/env bash
# Rebuild the component images in this folder with NetBSD's real RAIDframe driver.
# Usage: make-images.sh ORACLE_DIR WORK_DIR [NAME...]
#   ORACLE_DIR: the raidframe oracle (rump kernel + NetBSD raidctl; its `rfo` script)
#   WORK_DIR:   scratch folder for full-size images (created)
#   NAME...:    only these sets (default: all)
set -euo pipefail
O=$1; W=$2; shift 2; ONLY=" $* "; HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$W"; cd "$W"
rfo() { "$O/rfo" "$@"; }

conf() { # conf FILE NCOL SECT_PER_SU LEVEL
  { echo "START array"; echo "1 $2 0"; echo "START disks"
    for ((i = 0; i < $2; i++)); do echo "/disk$i"; done
    echo "START layout"; echo "$3 1 1 $4"; echo "START queue"; echo "fifo 100"; } > "$1"
}

# make NAME NCOL SIZE SECT_PER_SU LEVEL SERIAL DATA_BYTES WRITE_BS FINISH [EXTRA_RAIDCTL_ARGS...]
#   FINISH: clean (raidctl -u, then stop), crash (SIGKILL the rump kernel while configured: a
#   SIGTERM would let it shut down and update the labels), crash-uninit (the same, and parity
#   was never rewritten with -iv), regions (eight parity map regions, zeros written, then
#   killed), spare1 (add the last image as a hot spare with -a, fail /disk1 and rebuild onto
#   the spare with -F, then -u), fail1 (raidctl -f /disk1, then -u)
make() {
  local name=$1 ncol=$2 size=$3 su=$4 level=$5 serial=$6 bytes=$7 bs=$8 finish=$9; shift 9
  if [ "$ONLY" != "  " ] && [[ $ONLY != *" $name "* ]]; then return; fi
  rm -rf "$name"; mkdir "$name"; cd "$name"
  local nimg=$ncol; if [ "$finish" = spare1 ]; then nimg=$((ncol + 1)); fi # the last image is a hot spare
  local imgs=(); for ((i = 0; i < nimg; i++)); do truncate -s "$size" "c$i.img"; imgs+=("c$i.img"); done
  conf raid.conf "$ncol" "$su" "$level"
  rfo start k "${imgs[@]}" > /dev/null
  rfo raidctl k -C raid.conf raid0
  rfo raidctl k -I "$serial" raid0
  if [ "$finish" != crash-uninit ]; then rfo raidctl k -iv raid0; fi
  if [ $# -gt 0 ]; then rfo raidctl k "$@" raid0; fi
  if [ "$finish" = regions ]; then
    # Eight parity map regions (the count takes effect at the next configure), and zeros for data.
    rfo raidctl k -M set 8 40000 8 raid0 > /dev/null
    rfo raidctl k -u raid0
    rfo raidctl k -c raid.conf raid0
    head -c "$bytes" /dev/zero > data.bin
  else
    python3 "$HERE/pattern.py" "$name" 0 $((bytes / 512)) data.bin
  fi
  RUMPDD_BS=$bs rfo in k /dev/rraid0d data.bin
  rfo out k /dev/rraid0d "$bytes" | cmp - data.bin
  rfo raidctl k -G raid0 > raidctl-G.txt
  case $finish in
    clean) rfo raidctl k -u raid0 ;;
    crash | crash-uninit | regions) kill -KILL "$(cat k/rump.pid)"; sleep 0.5 ;;
    fail1) rfo raidctl k -f /disk1 raid0; rfo raidctl k -s raid0 > raidctl-s.txt; rfo raidctl k -u raid0 ;;
    spare1)
      rfo raidctl k -a "/disk$ncol" raid0
      rfo raidctl k -v -F /disk1 raid0 > /dev/null
      rfo raidctl k -s raid0 > raidctl-s.txt
      rfo raidctl k -u raid0 ;;
  esac
  rfo stop k
  for ((i = 0; i < nimg; i++)); do python3 "$HERE/pack_sparse.py" "c$i.img" "$HERE/$name.c$i.sparse"; done
  cp raid.conf "$HERE/$name.conf"; cp raidctl-G.txt "$HERE/$name.raidctl-G.txt"
  cd ..
}

#    name    ncol size sectPerSU level serial data    write-bs finish extra
make raid0   2    1M   16        0     1000   65536   16384    clean
make raid1   2    1M   8         1     1001   32768   65536    clean  -A yes
make raid4   3    1M   4         4     1004   24576   65536    clean
make raid5   3    1M   8         5     1005   49152   65536    clean
make dirty5  3    16M  32        5     1006   32768   65536    crash
make fail5   3    1M   8         5     1007   16384   65536    fail1
make new5    3    1M   8         5     1008   16384   65536    crash-uninit
make regions5 3   1M   8         5     1009   254464  512      regions
make spare5  3    1M   8         5     1010   16384   65536    spare1
