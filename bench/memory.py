#!/usr/bin/env python3
"""Peak memory of a running array under queue-depth-32 loads, for the forms not covered by
`uraid bench engine`: `uraid serve` with I/O threads and with io_uring, with one and with four
NBD connections (fio's nbd engine, one connection per job), a raid5 with a partial parity log,
and `uraid mount` (FUSE) driven by fio's libaio engine on the mounted file.

For every form and load a fresh process is started, loaded for --seconds, and its peak resident
set (`VmHWM` in /proc/PID/status) read before it is stopped. The target is at most 128 MiB.
It reports; it never fails on a figure.

    bench/memory.py [--seconds 3] [--member-mib 512] [--dir /dev/shm/uraid-bench-mem]
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import time

from benchlib import member_files, peak_rss_mib, require_fio

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

LOADS = [("read", "1M"), ("write", "1M"), ("randread", "4K"), ("randwrite", "4K")]


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True)


def wait_for(path, proc, what, log):
    deadline = time.time() + 20
    while not os.path.exists(path):
        if proc.poll() is not None or time.time() > deadline:
            sys.exit(f"bench/memory.py: {what} did not start (see {log})")
        time.sleep(0.05)
    time.sleep(0.2)


def stop(proc):
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def fio(args, rw, bs, seconds, jobs):
    out = run([
        "fio", "--name=mem", f"--rw={rw}", f"--bs={bs}", "--iodepth=32", f"--numjobs={jobs}",
        "--time_based", f"--runtime={seconds}", "--group_reporting", "--output-format=json", *args,
    ]).stdout
    job = json.loads(out[out.index("{"):])["jobs"][0]
    side = job["read" if "read" in rw else "write"]
    return side["bw_bytes"] / 1e6


def served(uraid, members, extra, workdir, rw, bs, seconds, jobs):
    """`uraid serve` on a unix socket; fio's nbd engine with `jobs` connections."""
    sock = os.path.join(workdir, "nbd.sock")
    if os.path.exists(sock):
        os.unlink(sock)
    log = os.path.join(workdir, "serve.log")
    with open(log, "a") as lf:
        proc = subprocess.Popen([uraid, "serve", f"--listen=unix:{sock}", *extra, *members], stdout=lf, stderr=lf)
    wait_for(sock, proc, "uraid serve", log)
    try:
        mbs = fio(["--ioengine=nbd", f"--uri=nbd+unix:///?socket={sock}"], rw, bs, seconds, jobs)
        return peak_rss_mib(proc.pid), mbs
    finally:
        stop(proc)


def mounted(uraid, members, workdir, rw, bs, seconds, jobs):
    """`uraid mount` of the array as one file; fio's libaio engine on it with O_DIRECT."""
    image = os.path.join(workdir, "array.img")
    if os.path.exists(image):
        subprocess.run(["fusermount3", "-u", image], capture_output=True)
        os.unlink(image)
    open(image, "w").close()
    log = os.path.join(workdir, "mount.log")
    with open(log, "a") as lf:
        proc = subprocess.Popen([uraid, "mount", *members, image], stdout=lf, stderr=lf)
    deadline = time.time() + 20
    while os.path.getsize(image) == 0:
        if proc.poll() is not None or time.time() > deadline:
            sys.exit(f"bench/memory.py: uraid mount did not start (see {log})")
        time.sleep(0.05)
    try:
        mbs = fio(["--ioengine=libaio", "--direct=1", f"--filename={image}"], rw, bs, seconds, jobs)
        return peak_rss_mib(proc.pid), mbs
    finally:
        stop(proc)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=int, default=3)
    ap.add_argument("--member-mib", type=int, default=512)
    ap.add_argument("--dir", default="/dev/shm/uraid-bench-mem", help="where the member files go (tmpfs)")
    ap.add_argument("--uraid", default=os.path.join(ROOT, "target", "release", "uraid"))
    a = ap.parse_args()
    require_fio("bench/memory.py")
    if not os.access(a.uraid, os.X_OK):
        sys.exit(f"bench/memory.py: {a.uraid} not found; build it with `cargo build --release -p uraid`")
    members = member_files(a.dir, 4, a.member_mib)

    def create(level, *extra):
        run([a.uraid, "create", f"--level={level}", "--raid-devices=4", "--chunk=512K", "--assume-clean",
             "--force", *extra, *members])

    forms = [
        ("serve raid5, threads, 1 conn", lambda: create(5), lambda rw, bs: served(a.uraid, members, [], a.dir, rw, bs, a.seconds, 1)),
        ("serve raid5, threads, 4 conns", lambda: create(5), lambda rw, bs: served(a.uraid, members, [], a.dir, rw, bs, a.seconds, 4)),
        ("serve raid5, io_uring, 1 conn", lambda: create(5), lambda rw, bs: served(a.uraid, members, ["--io=uring"], a.dir, rw, bs, a.seconds, 1)),
        ("serve raid5, io_uring, 4 conns", lambda: create(5), lambda rw, bs: served(a.uraid, members, ["--io=uring"], a.dir, rw, bs, a.seconds, 4)),
        ("serve raid0, io_uring, 4 conns", lambda: create(0), lambda rw, bs: served(a.uraid, members, ["--io=uring"], a.dir, rw, bs, a.seconds, 4)),
        ("serve raid6, threads, 4 conns", lambda: create(6), lambda rw, bs: served(a.uraid, members, [], a.dir, rw, bs, a.seconds, 4)),
        ("serve raid5 + PPL, 1 conn", lambda: create(5, "--consistency-policy=ppl"), lambda rw, bs: served(a.uraid, members, [], a.dir, rw, bs, a.seconds, 1)),
        ("serve raid5 + PPL, 4 conns", lambda: create(5, "--consistency-policy=ppl"), lambda rw, bs: served(a.uraid, members, [], a.dir, rw, bs, a.seconds, 4)),
        ("mount (FUSE) raid5, 1 job", lambda: create(5), lambda rw, bs: mounted(a.uraid, members, a.dir, rw, bs, a.seconds, 1)),
        ("mount (FUSE) raid5, 4 jobs", lambda: create(5), lambda rw, bs: mounted(a.uraid, members, a.dir, rw, bs, a.seconds, 4)),
    ]
    print("| form | " + " | ".join(f"{rw} {bs}" for rw, bs in LOADS) + " |")
    print("|---|" + "---|" * len(LOADS))
    worst = 0.0
    for name, setup, load in forms:
        setup()
        cells = []
        for rw, bs in LOADS:
            rss, mbs = load(rw, bs)
            worst = max(worst, rss)
            cells.append(f"{rss:.0f} MiB ({mbs:.0f} MB/s)")
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)
    print(f"\nlargest peak RSS: {worst:.0f} MiB (target: at most 128 MiB)")


if __name__ == "__main__":
    main()
