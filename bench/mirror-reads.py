#!/usr/bin/env python3
"""Mirror reads against raid0 on the same members, through the path a user takes: `uraid serve`
on a unix socket and fio's nbd engine, 4 KiB random reads at queue depth 32.

Four member files of --member-mib MiB are filled with random data once. Each round then creates,
serves and measures, in this order, a raid0 of the first two files, a 2-way raid1 of the same
two, a raid0 of all four, a 4-way raid1 and a raid10 (near 2, 512 KiB chunks) of the same four
(`--assume-clean` for the mirrors: only the superblocks are written, the files keep their
data). fio reads the same span of every array: its first --member-mib MiB less the superblock
area, the size of the raid1s, so that every array has as much to keep cached.

Every mirror's ratio is taken against the raid0 of the same members in the same round; the
table gives medians of --runs rounds [min-max] of the IOPS and of those per-round ratios, the
server's CPU time per read, and the KiB read from the disk under --dir per read (the disk's
own counters, so other readers of that disk count too). It reports, never fails on a figure.

With --cold the member files are dropped from the page cache before every run (on tmpfs there
is nothing to drop), so the reads reach the disk under --dir until the cache fills again.

With --before OLD_URAID every round measures that build's arrays too, right before the same
arrays of --uraid, so that both see the same conditions.

    bench/mirror-reads.py [--runs 3] [--seconds 5] [--member-mib 256] [--cold] [--before OLD_URAID]
                          [--dir /dev/shm/uraid-bench-mirror-reads] [--serve-arg=--inline-max=0 ...]
"""

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time

from benchlib import builds as check_builds, fmt, member_files, require_fio, subset

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# name: (members used, create options, the raid0 it is compared with)
ARRAYS = {
    "raid0-2": (2, ["--level=0"], None),
    "raid1-2": (2, ["--level=1", "--assume-clean"], "raid0-2"),
    "raid0-4": (4, ["--level=0"], None),
    "raid1-4": (4, ["--level=1", "--assume-clean"], "raid0-4"),
    "raid10-4": (4, ["--level=10", "--layout=n2", "--chunk=512K", "--assume-clean"], "raid0-4"),
}


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"bench/mirror-reads.py: {' '.join(cmd)} failed ({p.returncode}):\n{p.stderr}")
    return p.stdout


def drop_from_page_cache(paths):
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def cpu_seconds(pid):
    """utime + stime of a process, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def disk_stat_path(path):
    """The kernel's I/O counters of the block device holding `path`, if it has one."""
    st = os.stat(path)
    stat = f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}/stat"
    return stat if os.path.exists(stat) else None


def disk_kib_read(stat):
    """KiB read from the device so far (sectors read, the third counter, in 512-byte units)."""
    if stat is None:
        return 0.0
    with open(stat) as f:
        return int(f.read().split()[2]) / 2


def serve_and_measure(uraid, members, serve_args, sock, log, seconds, span):
    """4 KiB random read IOPS of fio's nbd engine at QD32 over the first `span` bytes of a fresh
    `uraid serve`, the server's CPU microseconds per read (less moved by other load on the
    machine than the rate), and the KiB read from the disk under the members per read (what a
    read costs the disk, moved by nothing but the page cache and other readers of that disk)."""
    if os.path.exists(sock):
        os.unlink(sock)
    with open(log, "a") as logf:
        proc = subprocess.Popen([uraid, "serve", f"--listen=unix:{sock}", *serve_args, *members],
                                stdout=logf, stderr=logf, start_new_session=True)
        try:
            deadline = time.time() + 20
            while not os.path.exists(sock):
                if proc.poll() is not None or time.time() > deadline:
                    sys.exit(f"bench/mirror-reads.py: uraid serve did not start (see {log})")
                time.sleep(0.05)
            cpu = cpu_seconds(proc.pid)
            stat = disk_stat_path(members[0])
            disk = disk_kib_read(stat)
            out = run(["fio", "--name=mirror-reads", "--ioengine=nbd", f"--uri=nbd+unix:///?socket={sock}",
                       "--rw=randread", "--bs=4k", "--iodepth=32", f"--size={span}", "--time_based",
                       f"--runtime={seconds}", "--output-format=json"])
            cpu = cpu_seconds(proc.pid) - cpu
            disk = disk_kib_read(stat) - disk
            side = json.loads(out[out.index("{"):])["jobs"][0]["read"]
            reads = max(side["total_ios"], 1)
            return side["iops"], cpu * 1e6 / reads, disk / reads
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=5, help="seconds per fio run")
    ap.add_argument("--member-mib", type=int, default=256)
    ap.add_argument("--dir", default="/dev/shm/uraid-bench-mirror-reads", help="where the member files go")
    ap.add_argument("--uraid", default=os.path.join(ROOT, "target", "release", "uraid"))
    ap.add_argument("--before", help="another uraid binary, measured alternately with --uraid")
    ap.add_argument("--arrays", default=",".join(ARRAYS), help="a subset of " + ",".join(ARRAYS))
    ap.add_argument("--cold", action="store_true", help="drop the members from the page cache before every run")
    ap.add_argument("--serve-arg", action="append", default=[], help="passed to every `uraid serve` (repeatable)")
    ap.add_argument("--keep", action="store_true", help="leave the member files in --dir")
    a = ap.parse_args()
    require_fio("bench/mirror-reads.py")
    builds = check_builds("bench/mirror-reads.py", a.uraid, a.before)
    arrays = subset("bench/mirror-reads.py", a.arrays, ARRAYS, "array(s)")
    # Each mirror needs its raid0 in the same round.
    for name in list(arrays):
        peer = ARRAYS[name][2]
        if peer and peer not in arrays:
            arrays.insert(arrays.index(name), peer)

    files = member_files(a.dir, 4, a.member_mib)
    sock = os.path.join(a.dir, "nbd.sock")
    log = os.path.join(a.dir, "serve.log")

    # The smallest array's size (a raid1's: one member's data area), in whole MiB.
    spans = []
    for name in arrays:
        n, opts, _ = ARRAYS[name]
        run([a.uraid, "create", f"--raid-devices={n}", "--force", *opts, *files[:n]])
        spans.append(json.loads(run([a.uraid, "detail", "--json", *files[:n]]))["array_size_bytes"])
    span = min(spans) >> 20 << 20

    iops = {(b, name): [] for b, _ in builds for name in arrays}
    cpu = {(b, name): [] for b, _ in builds for name in arrays}
    disk = {(b, name): [] for b, _ in builds for name in arrays}
    ratios = {(b, name): [] for b, _ in builds for name in arrays if ARRAYS[name][2]}
    for i in range(a.runs):
        for b, binary in builds:
            for name in arrays:
                n, opts, peer = ARRAYS[name]
                members = files[:n]
                run([binary, "create", f"--raid-devices={n}", "--force", *opts, *members])
                if a.cold:
                    drop_from_page_cache(members)
                got, us, kib = serve_and_measure(binary, members, a.serve_arg, sock, log, a.seconds, span)
                iops[(b, name)].append(got)
                cpu[(b, name)].append(us)
                disk[(b, name)].append(kib)
                note = ""
                if peer:
                    ratios[(b, name)].append(got / iops[(b, peer)][-1])
                    note = f" ({ratios[(b, name)][-1]:.2f}x {peer})"
                print(f"round {i + 1}/{a.runs}: {b}: {name}: {got:.0f} IOPS, {us:.1f} server CPU µs/read, "
                      f"{kib:.1f} disk KiB/read{note}", file=sys.stderr)

    extra = " ".join(a.serve_arg) or "(defaults)"
    cold = ", dropped from the page cache before each run" if a.cold else ""
    print(f"\n4 KiB random reads over the first {span >> 20} MiB, QD32, fio nbd engine over `uraid serve` {extra} "
          f"on a unix socket; {a.member_mib} MiB members in {a.dir}{cold}; medians of {a.runs} rounds [min-max]\n")
    print("| build | array | IOPS | raid0 of the same members, IOPS | ratio to it, per round "
          "| server CPU µs/read | raid0's | disk KiB/read | raid0's |")
    print("|---|---|---|---|---|---|---|---|---|")
    for b, _ in builds:
        for name in arrays:
            peer = ARRAYS[name][2]
            if peer:
                print(f"| {b} | {name} | {fmt(iops[(b, name)])} | {fmt(iops[(b, peer)])} | {fmt(ratios[(b, name)], 2)} "
                      f"| {fmt(cpu[(b, name)], 1)} | {fmt(cpu[(b, peer)], 1)} "
                      f"| {fmt(disk[(b, name)], 1)} | {fmt(disk[(b, peer)], 1)} |")
    if not a.keep:
        shutil.rmtree(a.dir)


if __name__ == "__main__":
    main()
