#!/usr/bin/env python3
"""4 KiB random writes on arrays with a write-intent bitmap, two builds of uraid side by side.

Each array is made fresh on member files (tmpfs by default) with `--bitmap=internal`, served by
`uraid serve` on a unix socket, and driven by fio's nbd engine: 4 KiB random writes at iodepth
32 and at iodepth 1, for --seconds each. A write to a region whose bit is clear waits until the
bit is on the members; bits are cleared again after the array has been idle a while, so a
random load keeps setting bits. Reported per build: IOPS and completion latency p50/p99 (fio's
clat percentiles), the median of --runs runs with the two builds alternated run by run, and the
ratio of the second build to the first from the same run of this script. It reports; it never
fails on a figure.

    bench/bitmap-writes.py --before OLD_URAID [--after target/release/uraid] [--runs 3]
        [--seconds 5] [--member-size 256M] [--bitmap-chunk 4M] [--dir /dev/shm/uraid-bench-bitmap]
        [--only raid1]
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

from benchlib import size_arg

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

ARRAYS = [
    ("raid1, 2 members", ["--level=1", "--raid-devices=2"], 2),
    ("raid5, 4 members, 64K chunk", ["--level=5", "--raid-devices=4", "--chunk=64K"], 4),
]


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True)


def fio(uri, seconds, size, depth):
    out = run([
        "fio", "--name=bench", "--ioengine=nbd", f"--uri={uri}", "--rw=randwrite", "--bs=4k",
        f"--iodepth={depth}", "--time_based", f"--runtime={seconds}", f"--size={size}",
        "--randrepeat=0", "--output-format=json",
    ]).stdout
    w = json.loads(out[out.index("{"):])["jobs"][0]["write"]
    pct = w["clat_ns"].get("percentile", {})
    return {"iops": w["iops"], "p50_us": pct.get("50.000000", 0) / 1000, "p99_us": pct.get("99.000000", 0) / 1000}


def one_run(uraid, flags, n, args, tag):
    d = os.path.join(args.dir, tag)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    members = [os.path.join(d, f"m{i}.img") for i in range(n)]
    for m in members:
        with open(m, "wb") as f:
            f.truncate(args.member_size)
    run([uraid, "create", *flags, "--bitmap=internal", f"--bitmap-chunk={args.bitmap_chunk}", *members])
    sock = os.path.join(d, "nbd.sock")
    log = open(os.path.join(d, "serve.log"), "w")
    proc = subprocess.Popen([uraid, "serve", f"--listen=unix:{sock}", *members], stdout=log, stderr=log,
                            start_new_session=True)
    try:
        deadline = time.time() + 20
        while not os.path.exists(sock):
            if proc.poll() is not None or time.time() > deadline:
                sys.exit(f"bench/bitmap-writes.py: {uraid} serve did not start (see {d}/serve.log)")
            time.sleep(0.05)
        uri = f"nbd+unix:///?socket={sock}"
        size = int(args.member_size * 0.8)
        return {f"QD{q}": fio(uri, args.seconds, size, q) for q in (32, 1)}
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        log.close()
        shutil.rmtree(d, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True, help="the uraid binary to compare against")
    ap.add_argument("--after", default=os.path.join(ROOT, "target/release/uraid"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--member-size", type=size_arg, default=size_arg("256M"))
    ap.add_argument("--bitmap-chunk", default="4M")
    ap.add_argument("--dir", default="/dev/shm/uraid-bench-bitmap")
    ap.add_argument("--only", default="", help="run only the arrays whose name contains this")
    args = ap.parse_args()
    if shutil.which("fio") is None:
        sys.exit("bench/bitmap-writes.py: fio not found (scripts/setup.sh installs it)")
    builds = [("before", args.before), ("after", args.after)]
    print(f"members on {args.dir}, {args.member_size >> 20} MiB each, bitmap chunk {args.bitmap_chunk}, "
          f"{args.runs} runs of {args.seconds} s per figure, builds alternated")
    for name, flags, n in [a for a in ARRAYS if args.only in a[0]]:
        results = {b: [] for b, _ in builds}
        for r in range(args.runs):
            order = builds if r % 2 == 0 else builds[::-1]
            for b, binary in order:
                results[b].append(one_run(binary, flags, n, args, b))
        print(f"\n{name}")
        print(f"{'load':<6} {'metric':<8} {'before':>10} {'after':>10} {'after/before':>13}")
        for q in ("QD32", "QD1"):
            for metric in ("iops", "p50_us", "p99_us"):
                med = {b: statistics.median(x[q][metric] for x in results[b]) for b, _ in builds}
                ratio = med["after"] / med["before"] if med["before"] else float("nan")
                print(f"{q:<6} {metric:<8} {med['before']:>10.1f} {med['after']:>10.1f} {ratio:>13.2f}")


if __name__ == "__main__":
    main()
