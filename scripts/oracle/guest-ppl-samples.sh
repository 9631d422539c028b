#!/bin/sh
# Runs inside the md-oracle VM (Linux 6.1 + mdadm 4.2), started by make-ppl-samples.sh.
# For each case: raid5 with --consistency-policy=ppl on loop devices over 24 MiB tmpfs files.
#
# States saved per case under $OUT/<case>/<state>/:
#   mdadm    what mdadm --create writes by itself: raid456 is unloaded (and module loading
#            disabled) so RUN_ARRAY fails and the kernel never touches the members.
#   created  mdadm --create, initial recovery finished (mdadm --wait), array stopped: the
#            superblocks as md rewrote them, the PPL areas as md left them after starting.
#   written  re-assembled, the array filled with the md-oracle pattern, a few 4 KiB writes,
#            stopped: PPL headers with entries and partial parity written by md.
# Per member N: diskN.meta = the member's metadata region (1.1/1.2: sectors [0, data_offset);
# 1.0: [data_offset + data_size, end)), diskN.txt = "size_bytes meta_offset_bytes",
# examine.txt = mdadm --examine of every member.
set -u
MIB=24
CHUNK=64
D=/tmp/ppl
# name|metadata|raid devices|case number
CASES="raid5-3-ppl-1.0|1.0|3|1001 raid5-4-ppl-1.1|1.1|4|1002 raid5-4-ppl-1.2|1.2|4|1003"
RAID456=/lib/modules/raid456.ko

field() { # field DEV "Key" -> leading number of the examine value
	mdadm --examine "$1" 2>/dev/null | sed -n "s/^ *$2 : \([0-9]*\).*/\1/p" | head -n 1
}

dump() { # dump STATE NAME NDEV
	local st=$1 name=$2 n=$3 out=$OUT/$2/$1 i dev size doff dsize start
	mkdir -p "$out"
	sync; echo 3 > /proc/sys/vm/drop_caches
	: > "$out/examine.txt"
	i=0
	while [ $i -lt "$n" ]; do
		dev=/dev/loop$i
		size=$(blockdev --getsize64 "$dev")
		doff=$(field "$dev" "Data Offset"); doff=${doff:-0}
		if [ "$doff" -gt 0 ]; then
			start=0
			dd if="$dev" of="$out/disk$i.meta" bs=512 count="$doff" 2>/dev/null
		else
			dsize=$(field "$dev" "Avail Dev Size")
			start=$((dsize * 512))
			dd if="$dev" of="$out/disk$i.meta" bs=512 skip="$dsize" 2>/dev/null
		fi
		echo "$size $start" > "$out/disk$i.txt"
		{ echo "### disk$i.img (/dev/loop$i)"; mdadm --examine "$dev" 2>&1; echo; } >> "$out/examine.txt"
		i=$((i + 1))
	done
}

fresh() { # fresh N: zeroed 24 MiB members on /dev/loop0..N-1
	local i=0
	while [ $i -lt 8 ]; do losetup -d /dev/loop$i 2>/dev/null; i=$((i + 1)); done
	rm -rf "$D"; mkdir -p "$D"
	DEVS=
	i=0
	while [ $i -lt "$1" ]; do
		truncate -s ${MIB}M "$D/disk$i.img"
		losetup /dev/loop$i "$D/disk$i.img"
		DEVS="$DEVS /dev/loop$i"
		i=$((i + 1))
	done
}

rc=0
DEVS=
for c in $CASES; do
	IFS='|' read -r name meta n num <<EOT
$c
EOT
	uuid=$(printf '6d646f72:61636c65:00000000:%08x' "$num")
	cmd="mdadm --create /dev/md0 --run --verbose --metadata=$meta --level=5 --raid-devices=$n --chunk=$CHUNK --consistency-policy=ppl --name=$name --homehost=oracle --uuid=$uuid"
	mkdir -p "$OUT/$name"
	log=$OUT/$name/log.txt
	echo "case $name: $cmd" | tee "$log"

	# --- mdadm alone
	fresh "$n"
	old_modprobe=$(cat /proc/sys/kernel/modprobe)
	echo /bin/false > /proc/sys/kernel/modprobe
	rmmod raid456 || { echo "cannot unload raid456" | tee -a "$log"; rc=1; }
	echo "\$ $cmd$DEVS   (raid456 unloaded)" >> "$log"
	$cmd $DEVS >> "$log" 2>&1 </dev/null
	echo "exit status $? (expected to fail at RUN_ARRAY)" >> "$log"
	mdadm --stop /dev/md0 >> "$log" 2>&1
	dump mdadm "$name" "$n"
	insmod "$RAID456" || { echo "cannot reload raid456" | tee -a "$log"; rc=1; }
	echo "$old_modprobe" > /proc/sys/kernel/modprobe

	# --- real create
	fresh "$n"
	echo "\$ $cmd$DEVS" >> "$log"
	if ! $cmd $DEVS >> "$log" 2>&1 </dev/null; then
		echo "FAIL $name: create refused" | tee -a "$log"; rc=1; continue
	fi
	mdadm --wait /dev/md0 >/dev/null 2>&1
	echo "consistency_policy: $(cat /sys/block/md0/md/consistency_policy)" >> "$log"
	mdadm --detail /dev/md0 > "$OUT/$name/detail-created.txt" 2>&1
	mdadm --stop /dev/md0 >> "$log" 2>&1
	dump created "$name" "$n"

	# --- writes
	mdadm --assemble /dev/md0 --run $DEVS >> "$log" 2>&1
	mdpattern write /dev/md0 "$num" >> "$log" 2>&1
	# A few 4 KiB read-modify-writes: entries with partial parity.
	for k in 1 17 33 700 1500; do
		mdpattern gen "$num" 8 'SMALLWR!' 0 $((k * 8)) | dd of=/dev/md0 bs=4096 seek=$k count=1 conv=notrunc,fsync 2>/dev/null
	done
	sync
	mdadm --detail /dev/md0 > "$OUT/$name/detail-written.txt" 2>&1
	mdadm --stop /dev/md0 >> "$log" 2>&1
	dump written "$name" "$n"
	dmesg -c > "$OUT/$name/kernel-log.txt"
	echo "done $name" | tee -a "$log"
done
i=0
while [ $i -lt 8 ]; do losetup -d /dev/loop$i 2>/dev/null; i=$((i + 1)); done
exit $rc
