#!/usr/bin/env python3
"""Network export: `uraid serve` of raid0 over 4 member files against qemu-nbd and nbdkit each
serving one raw file of the same size, on a unix socket, with the same clients: nbdcopy for
sequential reads and writes, fio's nbd engine for 4 KiB random reads and writes at iodepth 32.
Also the peak RSS of each server under that load and the CPU seconds each server used per GiB
moved.

Every figure is the median of --runs runs (min and max beside it); the ratio column is uraid
over the better of the two peers, measured in the same run of this script. It reports; it
never fails on a figure.

    bench/nbd.py [--runs 3] [--seconds 5] [--size 1G] [--dir /dev/shm/uraid-bench-nbd]
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

from benchlib import peak_rss_mib, size_arg

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def need(tool, package):
    if shutil.which(tool) is None:
        sys.exit(f"bench/nbd.py: {tool} not found (Debian package {package}; scripts/setup.sh installs it)")


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def cpu_seconds(pid):
    """utime + stime of a process, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Server:
    """One NBD server on a unix socket, started fresh for every run."""

    def __init__(self, name, argv, sock, log):
        self.name, self.sock = name, sock
        if os.path.exists(sock):
            os.unlink(sock)
        self.log = open(log, "a")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=self.log, start_new_session=True)
        deadline = time.time() + 20
        while not os.path.exists(sock):
            if self.proc.poll() is not None or time.time() > deadline:
                sys.exit(f"bench/nbd.py: {name} did not start (see {log})")
            time.sleep(0.05)
        time.sleep(0.2)

    @property
    def uri(self):
        return f"nbd+unix:///?socket={self.sock}"

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def nbdcopy(src, dst):
    t = time.perf_counter()
    run(["nbdcopy", src, dst])
    return time.perf_counter() - t


def fio_nbd(uri, rw, seconds, size):
    out = run([
        "fio", "--name=bench", "--ioengine=nbd", f"--uri={uri}", f"--rw={rw}", "--bs=4k",
        "--iodepth=32", "--time_based", f"--runtime={seconds}", f"--size={size}",
        "--output-format=json",
    ]).stdout
    job = json.loads(out[out.index("{"):])["jobs"][0]
    side = job["read" if "read" in rw else "write"]
    return side["iops"]


def measure(server, src, size, seconds):
    """One run of every load against a started server; returns {metric: value}."""
    pid = server.proc.pid
    r = {}
    c0 = cpu_seconds(pid)
    r["seq write MB/s"] = size / nbdcopy(src, server.uri) / 1e6
    r["seq read MB/s"] = size / nbdcopy(server.uri, "null:") / 1e6
    c1 = cpu_seconds(pid)
    r["server CPU s/GiB (seq)"] = (c1 - c0) / (2 * size / (1 << 30))
    r["rand read 4K IOPS"] = fio_nbd(server.uri, "randread", seconds, size)
    r["rand write 4K IOPS"] = fio_nbd(server.uri, "randwrite", seconds, size)
    r["peak RSS MiB"] = peak_rss_mib(pid)
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=5, help="seconds per fio run")
    ap.add_argument("--size", type=size_arg, default=1 << 30, help="array size (default 1G)")
    ap.add_argument("--dir", default="/dev/shm/uraid-bench-nbd", help="where the member and peer files go (tmpfs)")
    ap.add_argument("--uraid", default=os.path.join(ROOT, "target", "release", "uraid"))
    ap.add_argument("--keep", action="store_true", help="keep the files afterwards")
    a = ap.parse_args()
    for tool, pkg in [("nbdcopy", "libnbd-bin"), ("fio", "fio"), ("qemu-nbd", "qemu-utils"), ("nbdkit", "nbdkit")]:
        need(tool, pkg)
    if not os.access(a.uraid, os.X_OK):
        sys.exit(f"bench/nbd.py: {a.uraid} not found; build it with `cargo build --release -p uraid`")

    os.makedirs(a.dir, exist_ok=True)
    log = os.path.join(a.dir, "servers.log")
    members = [os.path.join(a.dir, f"m{i}.img") for i in range(4)]
    # Room for the 1.2 superblock and data offset on each member.
    per_member = a.size // 4 + (16 << 20)
    for m in members:
        with open(m, "wb") as f:
            f.truncate(per_member)
    run([a.uraid, "create", "--level=0", "--raid-devices=4", "--force", *members])
    detail = json.loads(run([a.uraid, "detail", "--json", *members]).stdout)
    size = detail["array_size_bytes"]
    src = os.path.join(a.dir, "source.img")
    peer = os.path.join(a.dir, "peer.img")
    with open(src, "wb") as f:
        left = size
        while left:
            n = min(left, 64 << 20)
            f.write(os.urandom(n))
            left -= n
    shutil.copyfile(src, peer)

    sock = os.path.join(a.dir, "nbd.sock")
    servers = {
        "uraid serve --io=uring (raid0, 4 files)": [a.uraid, "serve", "--io=uring", f"--listen=unix:{sock}", *members],
        "uraid serve --io=threads (raid0, 4 files)": [a.uraid, "serve", "--io=threads", f"--listen=unix:{sock}", *members],
        "qemu-nbd (1 file)": ["qemu-nbd", f"--socket={sock}", "--format=raw", "--persistent", "--shared=16", peer],
        "nbdkit file (1 file)": ["nbdkit", "--foreground", "--unix", sock, "file", f"file={peer}"],
    }
    results = {name: [] for name in servers}
    for i in range(a.runs):
        for name, argv in servers.items():
            s = Server(name, argv, sock, log)
            try:
                results[name].append(measure(s, src, size, a.seconds))
            finally:
                s.stop()
            print(f"run {i + 1}/{a.runs}: {name}: " + ", ".join(f"{k} {v:.0f}" for k, v in results[name][-1].items()), file=sys.stderr)

    metrics = list(next(iter(results.values()))[0].keys())
    uraids = [n for n in servers if n.startswith("uraid")]
    peers = [n for n in servers if n not in uraids]
    lower_is_better = {"server CPU s/GiB (seq)", "peak RSS MiB"}
    print(f"\nNBD export over a unix socket, {size / (1 << 30):.2f} GiB, medians of {a.runs} runs [min-max]\n")
    ratio_heads = " | ".join(f"{n.split(' (')[0]} / best peer" for n in uraids)
    header = f"| metric | {' | '.join(servers)} | {ratio_heads} |"
    print(header)
    print("|" + "---|" * (len(servers) + 1 + len(uraids)))
    for m in metrics:
        cells, med = [], {}
        for n in servers:
            vals = [r[m] for r in results[n]]
            med[n] = statistics.median(vals)
            digits = 2 if m.startswith("server CPU") else 0
            cells.append(f"{med[n]:.{digits}f} [{min(vals):.{digits}f}-{max(vals):.{digits}f}]")
        ratios = []
        for u in uraids:
            if m in lower_is_better:
                # Inverted, so that above 1 is better for uraid here too.
                best = min(med[p] for p in peers)
                ratios.append(f"{best / med[u]:.2f} (inverted)" if med[u] else "nan")
            else:
                best = max(med[p] for p in peers)
                ratios.append(f"{med[u] / best:.2f}" if best else "nan")
        print(f"| {m} | {' | '.join(cells)} | {' | '.join(ratios)} |")
    if not a.keep:
        shutil.rmtree(a.dir)


if __name__ == "__main__":
    main()
