#!/usr/bin/env python3
"""Read policies on real member files: `uraid bench engine --io=uring --read-policy P` for every
policy (md, round-robin, shortest-queue, split) on a raid1 of 2 and of 4 members and a raid10
(near 2) of 4, over one sequential reader (1 MiB requests one at a time, and 128 KiB requests
two at a time as a page cache's read-ahead sends them), 2 and 4 parallel sequential readers,
and 4 KiB random reads at queue depth 4 and 32. Prints the median MB/s of --runs runs
[min-max] and each policy's ratio to md's.

The member files live in --dir, on the file system being measured (not tmpfs: the io_uring
driver reads them with O_DIRECT where the file system allows it, so the disk is what answers).
Four files of --member-mib MiB are filled with data once; each array is then created over them
with --assume-clean (only the superblocks are written). It reports, never fails on a figure.

    bench/read-policy.py [--runs 3] [--seconds 5] [--member-mib 1024] [--dir /var/tmp/uraid-bench-read-policy]
                         [--arrays raid1-2,raid1-4,raid10-4] [--policies md,round-robin,shortest-queue,split]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys

from benchlib import member_files

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

ARRAYS = {
    "raid1-2": (2, ["--level=1"]),
    "raid1-4": (4, ["--level=1"]),
    "raid10-4": (4, ["--level=10", "--layout=n2", "--chunk=512K"]),
}
POLICIES = ["md", "round-robin", "shortest-queue", "split"]
# (label, pattern, request size, requests in flight, streams)
LOADS = [
    ("1 reader, 1M x1", "read", "1M", 1, 1),
    ("1 reader, 128K x2", "read", "128K", 2, 1),
    ("2 readers, 128K x2 each", "read", "128K", 4, 2),
    ("4 readers, 128K x2 each", "read", "128K", 8, 4),
    ("random 4K x4", "randread", "4K", 4, 1),
    ("random 4K x32", "randread", "4K", 32, 1),
]


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"bench/read-policy.py: {' '.join(cmd)} failed ({p.returncode}):\n{p.stderr}")
    return p.stdout


def bench(uraid, members, policy, pattern, bs, depth, streams, seconds):
    # --inline-max=0: reads of cached data would otherwise skip the policy (docs/design.md,
    # "Inline reads"); the policies are what is measured here.
    out = run([uraid, "bench", "engine", "--json", "--io=uring", "--inline-max=0", f"--read-policy={policy}", f"--pattern={pattern}",
               f"--bs={bs}", f"--iodepth={depth}", f"--streams={streams}", f"--seconds={seconds}", *members])
    return json.loads(out)["mbps"]


def fmt(vals):
    return f"{statistics.median(vals):.0f} [{min(vals):.0f}-{max(vals):.0f}]"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--member-mib", type=int, default=1024)
    ap.add_argument("--dir", default="/var/tmp/uraid-bench-read-policy", help="where the member files go")
    ap.add_argument("--uraid", default=os.path.join(ROOT, "target", "release", "uraid"))
    ap.add_argument("--arrays", default=",".join(ARRAYS))
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--keep", action="store_true", help="leave the member files in --dir")
    a = ap.parse_args()
    if not os.access(a.uraid, os.X_OK):
        sys.exit(f"bench/read-policy.py: {a.uraid} not found; build it with `cargo build --release -p uraid`")
    arrays = a.arrays.split(",")
    policies = a.policies.split(",")
    bad = [x for x in arrays if x not in ARRAYS] + [p for p in policies if p not in POLICIES]
    if bad:
        sys.exit(f"bench/read-policy.py: unknown array(s) or policies {bad}; arrays: {list(ARRAYS)}, policies: {POLICIES}")
    if "md" not in policies:
        policies.insert(0, "md")

    files = member_files(a.dir, 4, a.member_mib, sync=True)

    results = {}
    for name in arrays:
        n, opts = ARRAYS[name]
        members = files[:n]
        run([a.uraid, "create", f"--raid-devices={n}", "--force", "--assume-clean", *opts, *members])
        for label, pattern, bs, depth, streams in LOADS:
            for policy in policies:
                # Runs of one policy are not back to back, so drifting conditions hit them all.
                results[(name, label, policy)] = []
            for _ in range(a.runs):
                for policy in policies:
                    mbps = bench(a.uraid, members, policy, pattern, bs, depth, streams, a.seconds)
                    results[(name, label, policy)].append(mbps)
                    print(f"{name} {label} {policy}: {mbps:.0f} MB/s", file=sys.stderr)

    print(f"\nRead policies over {a.member_mib} MiB member files in {a.dir}, io_uring, "
          f"median MB/s of {a.runs} runs of {a.seconds} s [min-max], (ratio to md)\n")
    print("| array | load | " + " | ".join(policies) + " |")
    print("|---|---|" + "---|" * len(policies))
    for name in arrays:
        for label, *_ in LOADS:
            md = statistics.median(results[(name, label, "md")])
            cells = []
            for policy in policies:
                vals = results[(name, label, policy)]
                ratio = "" if policy == "md" else f" ({statistics.median(vals) / md:.2f}x)"
                cells.append(fmt(vals) + ratio)
            print(f"| {name} | {label} | " + " | ".join(cells) + " |")
    if not a.keep:
        shutil.rmtree(a.dir)


if __name__ == "__main__":
    main()
