#!/bin/bash
# `uraid mount` (FUSE) under asynchronous direct I/O: fio's libaio engine, --direct=1, 4 KiB
# random writes and reads at queue depth 32, 1 and 4 jobs, on a raid5 of 4 member files of
# 256 MiB on /dev/shm. Two builds alternate round by round; one line per run:
#   ROUND BUILD LOAD JOBS IOPS
#
# usage: bench/fuse-aio.sh BEFORE-BINARY AFTER-BINARY [ROUNDS]
set -euo pipefail
before=$1 after=$2 rounds=${3:-3}
dir=/dev/shm/uraid-bench-fuse-aio
mkdir -p "$dir"; cd "$dir"
for i in 0 1 2 3; do [ -f m$i.img ] || truncate -s 256M m$i.img; done
for round in $(seq 1 "$rounds"); do for b in "$before" "$after"; do
  label=$([ "$b" = "$before" ] && echo before || echo after)
  "$b" create --level=5 --raid-devices=4 --chunk=512K --assume-clean --force m?.img >/dev/null 2>&1
  : > a.img; "$b" mount m?.img a.img 2>>mount.log & P=$!
  for _ in $(seq 100); do [ -s a.img ] && break; sleep 0.1; done
  for rw in randwrite randread; do for j in 1 4; do
    v=$(fio --name=x --filename=a.img --rw=$rw --bs=4k --iodepth=32 --numjobs=$j --group_reporting --ioengine=libaio --direct=1 --time_based --runtime=3 --output-format=json | python3 -c "import json,sys; d=json.load(sys.stdin); j=d['jobs'][0]; print(round(j['write']['iops']+j['read']['iops']))")
    echo "$round $label $rw jobs=$j $v"
  done; done
  kill $P; wait $P || true
done; done
