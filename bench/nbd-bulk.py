#!/usr/bin/env python3
"""NBD bulk transfers against nbdkit: `uraid serve` of raid0 over 4 member files against
nbdkit's file plugin serving one raw file of the same size, with the same client in the same
round: fio's nbd engine for 1 MiB sequential reads and writes at queue depth 1 and 32 and 4 KiB
random reads and writes at queue depth 32, over a unix socket and over TCP loopback, with 1 and
4 connections (4 fio jobs, each its own connection over its own quarter of the export); and
nbdcopy reading the whole export, and writing it.

Servers alternate load by load; every figure is the median of --runs rounds [min-max], with
the ratio uraid / nbdkit. It reports, never fails on a figure.

    bench/nbd-bulk.py [--runs 3] [--seconds 3] [--size 1G] [--dir /dev/shm/uraid-bench-nbd-bulk]
"""

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time

from benchlib import builds as check_builds, fmt, member_files, require_fio, size_arg

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SCRIPT = "bench/nbd-bulk.py"

LOADS = [
    ("seq read 1M QD1", "read", "1M", 1),
    ("seq read 1M QD32", "read", "1M", 32),
    ("seq write 1M QD1", "write", "1M", 1),
    ("seq write 1M QD32", "write", "1M", 32),
    ("rand read 4K QD32", "randread", "4k", 32),
    ("rand write 4K QD32", "randwrite", "4k", 32),
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(check, what, proc):
    for _ in range(100):
        if check():
            return
        if proc.poll() is not None:
            sys.exit(f"{SCRIPT}: {what} ended early: {proc.stderr.read().decode(errors='replace')[-400:]}")
        time.sleep(0.05)
    sys.exit(f"{SCRIPT}: {what} did not start")


def reachable(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


class Server:
    """A server of one kind on one transport, started for one load and stopped after it."""

    def __init__(self, kind, transport, uraid, members, raw, work):
        self.kind, self.transport = kind, transport
        self.uraid, self.members, self.raw, self.work = uraid, members, raw, work

    def __enter__(self):
        if self.transport == "unix":
            sock = os.path.join(self.work, f"{self.kind}.sock")
            if os.path.exists(sock):
                os.remove(sock)
            self.uri = f"nbd+unix:///?socket={sock}"
            listen = ["-U", sock] if self.kind == "nbdkit" else [f"--listen=unix:{sock}"]
            ready = lambda: os.path.exists(sock)
        else:
            port = free_port()
            self.uri = f"nbd://127.0.0.1:{port}"
            listen = ["-i", "127.0.0.1", "-p", str(port)] if self.kind == "nbdkit" else [f"--listen=tcp:127.0.0.1:{port}"]
            ready = lambda: reachable(port)
        if self.kind == "nbdkit":
            cmd = ["nbdkit", "-f", *listen, "file", f"file={self.raw}"]
        else:
            cmd = [self.uraid, "serve", *listen, *self.members]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wait_for(ready, self.kind, self.proc)
        return self

    def __exit__(self, *exc):
        self.proc.terminate()
        self.proc.wait(timeout=60)


def fio(uri, rw, bs, depth, conns, seconds, size):
    quarter = size // conns
    out = subprocess.run(
        ["fio", "--name=bulk", "--ioengine=nbd", f"--uri={uri}", f"--rw={rw}", f"--bs={bs}", f"--iodepth={depth}",
         f"--numjobs={conns}", f"--size={quarter}", f"--offset_increment={quarter}", "--group_reporting",
         "--time_based", f"--runtime={seconds}", "--output-format=json"],
        capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{SCRIPT}: fio {rw} {bs} on {uri} failed: {out.stderr[-400:]}")
    job = json.loads(out.stdout[out.stdout.index("{"):])["jobs"][0]
    side = job["write" if "write" in rw else "read"]
    return side["io_bytes"] / (side["runtime"] / 1000) / 1e6


def nbdcopy(uri, direction, source, seconds_cap):
    start = time.monotonic()
    cmd = ["nbdcopy", uri, "null:"] if direction == "read" else ["nbdcopy", source, uri]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        sys.exit(f"{SCRIPT}: {' '.join(cmd)} failed: {p.stderr[-400:]}")
    return time.monotonic() - start


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=3)
    ap.add_argument("--size", type=size_arg, default=1 << 30, help="the export's size (K, M, G; default 1G)")
    ap.add_argument("--dir", default="/dev/shm/uraid-bench-nbd-bulk")
    ap.add_argument("--uraid", default=os.path.join(ROOT, "target", "release", "uraid"))
    a = ap.parse_args()
    require_fio(SCRIPT)
    for tool in ("nbdkit", "nbdcopy"):
        if shutil.which(tool) is None:
            sys.exit(f"{SCRIPT}: {tool} not found (scripts/setup.sh installs nbdkit and libnbd-bin)")
    check_builds(SCRIPT, a.uraid, None)
    size = a.size
    mib = size >> 20
    # Members with room for md's metadata; --size makes the array exactly `size`, as the raw file.
    members = member_files(a.dir, 4, mib // 4 + 8, reuse=False)
    subprocess.run([a.uraid, "create", "--level=0", "--raid-devices=4", "--chunk=512K", f"--size={mib // 4}M",
                    "--force", *members], check=True, capture_output=True)
    raw = os.path.join(a.dir, "raw.img")
    with open(raw, "wb") as f:
        chunk = os.urandom(1 << 20)
        for _ in range(mib):
            f.write(chunk)
    results = {}
    for r in range(a.runs):
        for transport in ("unix", "tcp"):
            for conns in (1, 4):
                for label, rw, bs, depth in LOADS:
                    for kind in ("nbdkit", "uraid"):
                        with Server(kind, transport, a.uraid, members, raw, a.dir) as s:
                            mbps = fio(s.uri, rw, bs, depth, conns, a.seconds, size)
                        key = (transport, conns, label)
                        results.setdefault(key, {}).setdefault(kind, []).append(mbps)
                        print(f"round {r + 1} {transport} {conns} conn {label} {kind}: {mbps:.0f} MB/s", file=sys.stderr)
            for direction in ("read", "write"):
                for kind in ("nbdkit", "uraid"):
                    with Server(kind, transport, a.uraid, members, raw, a.dir) as s:
                        secs = nbdcopy(s.uri, direction, raw, 600)
                    key = (transport, "nbdcopy", f"nbdcopy {direction} {mib} MiB")
                    results.setdefault(key, {}).setdefault(kind, []).append(size / secs / 1e6)
                    print(f"round {r + 1} {transport} nbdcopy {direction} {kind}: {size / secs / 1e6:.0f} MB/s",
                          file=sys.stderr)

    print(f"\nNBD bulk transfers: uraid serve (raid0, 4 x {mib // 4} MiB on tmpfs) against nbdkit's file plugin "
          f"({mib} MiB raw file on tmpfs), MB/s, medians of {a.runs} rounds [min-max]\n")
    print("| transport | connections | load | nbdkit | uraid | uraid / nbdkit |")
    print("|---|---|---|---|---|---|")
    for (transport, conns, label), by in results.items():
        k, u = by["nbdkit"], by["uraid"]
        ratio = [x / y for x, y in zip(u, k)]
        print(f"| {transport} | {conns} | {label} | {fmt(k)} | {fmt(u)} | {fmt(ratio, 2)} |")
    shutil.rmtree(a.dir)


if __name__ == "__main__":
    main()
