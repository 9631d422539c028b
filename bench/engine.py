#!/usr/bin/env python3
"""Engine overhead: uraid driving an array over 4 member files on tmpfs (`uraid bench engine`,
in-process, no front end) against fio with io_uring on the same four files directly, for 1 MiB
sequential reads and writes and 4 KiB random reads, all at queue depth 32. Linear and raid0 are
the targets (uraid should reach 0.95x fio's aggregate throughput); raid1, raid5 and raid6 are
reported beside them. CPU seconds per GiB moved are given for both (the whole process: uraid's
load generator and fio's own work included).

Every figure is the median of --runs runs [min-max]; it reports, never fails on a figure.

    bench/engine.py [--runs 3] [--seconds 5] [--member-mib 512] [--dir /dev/shm/uraid-bench-engine]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys

from benchlib import builds as check_builds, fmt, member_files, require_fio, subset

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

LEVELS = {"linear": ["--level=linear"], "raid0": ["--level=0"], "raid1": ["--level=1"],
          "raid5": ["--level=5"], "raid6": ["--level=6"]}
LOADS = [("seq read 1M", "read", "1M"), ("seq write 1M", "write", "1M"), ("rand read 4K", "randread", "4K")]


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"bench/engine.py: {' '.join(cmd)} failed ({p.returncode}):\n{p.stderr}")
    return p.stdout


def fio(files, rw, bs, seconds, direct):
    out = run(["fio", "--name=bench", "--ioengine=io_uring", f"--direct={direct}", f"--rw={rw}", f"--bs={bs}",
               "--iodepth=32", "--filename=" + ":".join(files), "--time_based", f"--runtime={seconds}",
               "--output-format=json"])
    job = json.loads(out[out.index("{"):])["jobs"][0]
    side = job["write" if "write" in rw else "read"]
    moved = side["io_bytes"]
    secs = job["job_runtime"] / 1000
    cpu = (job["usr_cpu"] + job["sys_cpu"]) / 100 * secs
    return {"MB/s": moved / secs / 1e6, "IOPS": side["iops"], "CPU s/GiB": cpu / (moved / (1 << 30))}


def uraid_bench(uraid, members, rw, bs, seconds, io):
    out = run([uraid, "bench", "engine", "--json", f"--io={io}", f"--pattern={rw}", f"--bs={bs}", "--iodepth=32",
               f"--seconds={seconds}", *members])
    r = json.loads(out)
    return {"MB/s": r["mbps"], "IOPS": r["iops"], "CPU s/GiB": r["cpu_seconds_per_gib"]}



def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--member-mib", type=int, default=512)
    ap.add_argument("--dir", default="/dev/shm/uraid-bench-engine", help="where the member files go (tmpfs)")
    ap.add_argument("--uraid", default=os.path.join(ROOT, "target", "release", "uraid"))
    ap.add_argument("--levels", default=",".join(LEVELS))
    ap.add_argument("--io", default="uring,threads", help="uraid member I/O backends to run (uring, threads)")
    a = ap.parse_args()
    require_fio("bench/engine.py")
    check_builds("bench/engine.py", a.uraid, None)
    levels = subset("bench/engine.py", a.levels, LEVELS, "level(s)")

    members = member_files(a.dir, 4, a.member_mib, reuse=False)

    rows = []
    fio_results = {}
    for label, rw, bs in LOADS:
        for direct in (1, 0):
            fio_results[(label, direct)] = [fio(members, rw, bs, a.seconds, direct) for _ in range(a.runs)]
            print(f"fio direct={direct} {label}: {fio_results[(label, direct)]}", file=sys.stderr)
    for level in levels:
        # The array's superblocks go over the data; fio above ran first for that reason.
        run([a.uraid, "create", "--raid-devices=4", "--force", "--assume-clean", *LEVELS[level], *members])
        for label, rw, bs in LOADS:
            for io in a.io.split(","):
                res = [uraid_bench(a.uraid, members, rw, bs, a.seconds, io) for _ in range(a.runs)]
                print(f"uraid {level} {io} {label}: {res}", file=sys.stderr)
                rows.append((level, io, label, res))

    print(f"\nEngine overhead on tmpfs: 4 member files of {a.member_mib} MiB, queue depth 32, medians of {a.runs} runs [min-max]\n")
    print("fio with io_uring on the 4 files directly:\n")
    print("| load | fio O_DIRECT MB/s | fio O_DIRECT CPU s/GiB | fio buffered MB/s | fio buffered CPU s/GiB |")
    print("|---|---|---|---|---|")
    best = {}
    for label, _, _ in LOADS:
        d, b = fio_results[(label, 1)], fio_results[(label, 0)]
        best[label] = max(statistics.median([r["MB/s"] for r in d]), statistics.median([r["MB/s"] for r in b]))
        print(f"| {label} | {fmt([r['MB/s'] for r in d])} | {fmt([r['CPU s/GiB'] for r in d], 2)} | "
              f"{fmt([r['MB/s'] for r in b])} | {fmt([r['CPU s/GiB'] for r in b], 2)} |")
    print("\nuraid (`uraid bench engine`) over the same files:\n")
    print("| level | member I/O | load | MB/s | IOPS | CPU s/GiB | uraid / best fio |")
    print("|---|---|---|---|---|---|---|")
    for level, io, label, res in rows:
        mbps = [r["MB/s"] for r in res]
        print(f"| {level} | {io} | {label} | {fmt(mbps)} | {fmt([r['IOPS'] for r in res])} | "
              f"{fmt([r['CPU s/GiB'] for r in res], 2)} | {statistics.median(mbps) / best[label]:.2f} |")
    shutil.rmtree(a.dir)


if __name__ == "__main__":
    main()
