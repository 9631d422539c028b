#!/usr/bin/env python3
"""Read balancing by measured latency, with a real slow member: a raid1 of an NBD export that
answers every read 5 ms late (nbdkit's delay filter over a file) and a local file, the slow
member first (md's order takes it first when both are idle). 4 KiB random reads at queue depth
1 and 32 through `uraid bench engine --io=threads --inline-max=0`, with latency balancing (the
default), with `--no-latency-balancing`, and on a raid1 of another local file alone (its
partner `missing`: what the fast member gives by itself), alternated, --runs times each;
prints the median IOPS [min-max] of each and the ratios. Reports, never fails on a figure.

    bench/latency.py [--runs 5] [--seconds 5] [--delay 5ms] [--member-mib 256] [--dir /var/tmp/uraid-bench-latency]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--delay", default="5ms")
    ap.add_argument("--member-mib", type=int, default=256)
    ap.add_argument("--dir", default="/var/tmp/uraid-bench-latency")
    ap.add_argument("--uraid", default=os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "uraid"))
    args = ap.parse_args()

    shutil.rmtree(args.dir, ignore_errors=True)
    os.makedirs(args.dir)
    far, local, alone, sock = (os.path.join(args.dir, n) for n in ("far.img", "local.img", "alone.img", "far.sock"))
    for path in (far, local, alone):
        with open(path, "wb") as f:
            f.truncate(args.member_mib << 20)
    nbdkit = subprocess.Popen(["nbdkit", "-f", "-U", sock, "--filter=delay", "file", far, f"rdelay={args.delay}"])
    try:
        for _ in range(100):
            if os.path.exists(sock):
                break
            time.sleep(0.05)
        uri = f"nbd+unix:///?socket={sock}"
        subprocess.run([args.uraid, "create", "-l1", "-n2", "--assume-clean", "--force", uri, local],
                       check=True, stdout=subprocess.DEVNULL)
        subprocess.run([args.uraid, "create", "-l1", "-n2", "--assume-clean", "--force", "missing", alone],
                       check=True, stdout=subprocess.DEVNULL)
        print(f"raid1 of nbdkit --filter=delay rdelay={args.delay} (slot 0) and a local file (slot 1); "
              f"4K random reads, {args.seconds} s a run, {args.runs} runs each, alternated")
        for depth in (1, 32):
            results = {"on": [], "off": [], "alone": []}
            for _ in range(args.runs):
                for mode in results:
                    members = [alone] if mode == "alone" else [uri, local]
                    cmd = [args.uraid, "bench", "engine", "--io=threads", "--inline-max=0", "--pattern=randread",
                           "--bs=4K", f"--iodepth={depth}", f"--seconds={args.seconds}", "--json", *members]
                    if mode == "off":
                        cmd.insert(3, "--no-latency-balancing")
                    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
                    results[mode].append(json.loads(out.strip().splitlines()[-1])["iops"])
            med = {m: statistics.median(v) for m, v in results.items()}
            labels = {"on": "latency balancing on ", "off": "latency balancing off", "alone": "local member alone   "}
            for mode, label in labels.items():
                v = results[mode]
                print(f"  depth {depth:2}, {label}: {med[mode]:9.0f} IOPS [{min(v):.0f}-{max(v):.0f}]")
            print(f"  depth {depth:2}: on / off = {med['on'] / med['off']:.1f}x, "
                  f"on / alone = {med['on'] / med['alone']:.2f}x, off / alone = {med['off'] / med['alone']:.3f}x")
    finally:
        nbdkit.terminate()
        nbdkit.wait()
        shutil.rmtree(args.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
