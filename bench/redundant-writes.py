#!/usr/bin/env python3
"""Redundant writes against each level's limit: `uraid bench engine` writing raid5, raid6 and
raid1 arrays over member files on tmpfs, beside the members' own write rate measured in the same
round with the same parallelism (fio, one job per member file, psync), times the level's data
fraction:
- 1 MiB sequential writes: the members' aggregate MB/s x (n-1)/n (raid5), (n-2)/n (raid6),
  1/k (a k-way raid1);
- 4 KiB random writes (raid5, raid6): the members' aggregate 4 KiB random-write IOPS over the
  member I/Os one write costs at best: read-modify-write (4 on raid5, 6 on raid6) or
  reconstruct-write (n: the other data members read, data and parity written), the fewer; on
  a k-way raid1 (over NBD only), over k.

The writes come from `uraid bench engine --iodepth=32` in process, and with --nbd the 4 KiB
random writes also from fio's nbd engine (iodepth 32, one job) through `uraid serve` on a unix
socket, where the client and the server's connection threads share the two cores with it.

Rounds alternate fio and uraid (and, with --before, the older build beside this one),
configuration by configuration; every figure is the median of --runs rounds [min-max]. It
reports, never fails on a figure.

    bench/redundant-writes.py [--runs 3] [--seconds 3] [--member-mib 256] [--dir /dev/shm/uraid-bench-rw]
                              [--configs raid5-4-512K,...] [--before OLD_URAID] [--nbd]
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
SCRIPT = "bench/redundant-writes.py"

# name -> (level, members, chunk)
CONFIGS = {
    f"{level}-{n}-{chunk}": (level, n, chunk)
    for level in ("raid5", "raid6")
    for n in (4, 8)
    for chunk in ("64K", "512K")
}
CONFIGS.update({"raid1-2": ("raid1", 2, None), "raid1-4": ("raid1", 4, None)})


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{SCRIPT}: {' '.join(cmd)} failed ({p.returncode}):\n{p.stderr}")
    return p.stdout


def members_limit(files, rw, bs, seconds):
    """The members' aggregate rate, one psync job per file: (MB/s, IOPS)."""
    cmd = ["fio", "--ioengine=psync", f"--rw={rw}", f"--bs={bs}", "--time_based", f"--runtime={seconds}",
           "--group_reporting", "--output-format=json"]
    for i, f in enumerate(files):
        cmd += [f"--name=m{i}", f"--filename={f}"]
    out = run(cmd)
    job = json.loads(out[out.index("{"):])["jobs"][0]["write"]
    secs = job["runtime"] / 1000
    return job["io_bytes"] / secs / 1e6, job["iops"]


def data_fraction(level, n):
    return {"raid5": (n - 1) / n, "raid6": (n - 2) / n, "raid1": 1 / n}[level]


def ios_per_small_write(level, n):
    if level == "raid1":
        return n
    rmw = {"raid5": 4, "raid6": 6}[level]
    return min(rmw, n)


def uraid_write(uraid, files, level, n, chunk, rw, bs, seconds):
    create = [uraid, "create", f"--level={level}", f"--raid-devices={n}", "--force", "--assume-clean"]
    if chunk:
        create.append(f"--chunk={chunk}")
    run(create + files)
    out = run([uraid, "bench", "engine", "--json", f"--pattern={rw}", f"--bs={bs}", "--iodepth=32",
               f"--seconds={seconds}", *files])
    r = json.loads(out)
    requests = r["bytes"] / int(r["bs"])
    return r["mbps"], r["iops"], r["cpu_seconds"] / requests * 1e6


def server_cpu_seconds(pid):
    """User and system CPU seconds of process `pid` so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def uraid_write_nbd(uraid, files, level, n, chunk, bs, seconds, sock):
    """4 KiB random writes through `uraid serve` from fio's nbd engine: IOPS, and the server's
    CPU microseconds per write."""
    create = [uraid, "create", f"--level={level}", f"--raid-devices={n}", "--force", "--assume-clean"]
    if chunk:
        create.append(f"--chunk={chunk}")
    run(create + files)
    if os.path.exists(sock):
        os.unlink(sock)
    server = subprocess.Popen([uraid, "serve", f"--listen=unix:{sock}", *files], stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            if os.path.exists(sock):
                break
            time.sleep(0.05)
        else:
            sys.exit(f"{SCRIPT}: uraid serve did not listen on {sock}")
        out = run(["fio", "--name=nbd", "--ioengine=nbd", f"--uri=nbd+unix:///?socket={sock}", "--rw=randwrite",
                   f"--bs={bs}", "--iodepth=32", "--time_based", f"--runtime={seconds}", "--output-format=json"])
        job = json.loads(out[out.index("{"):])["jobs"][0]["write"]
        cpu = server_cpu_seconds(server.pid)
        return job["iops"], cpu / max(job["total_ios"], 1) * 1e6
    finally:
        server.send_signal(signal.SIGINT)
        if server.wait(timeout=60) != 0:
            sys.exit(f"{SCRIPT}: uraid serve ended with {server.returncode}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=3)
    ap.add_argument("--member-mib", type=int, default=256)
    ap.add_argument("--dir", default="/dev/shm/uraid-bench-rw", help="where the member files go (tmpfs)")
    ap.add_argument("--uraid", default=os.path.join(ROOT, "target", "release", "uraid"))
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--before", help="an older uraid binary to run beside this one, alternating")
    ap.add_argument("--nbd", action="store_true", help="also 4 KiB random writes over NBD (fio's nbd engine)")
    a = ap.parse_args()
    require_fio(SCRIPT)
    builds = check_builds(SCRIPT, a.uraid, a.before)
    names = subset(SCRIPT, a.configs, CONFIGS, "configuration(s)")
    most = max(CONFIGS[c][1] for c in names)
    files = member_files(a.dir, most, a.member_mib, reuse=False)

    # (config, load, build) -> list of (uraid rate, limit) per round
    results = {}
    for r in range(a.runs):
        for name in names:
            level, n, chunk = CONFIGS[name]
            mine = files[:n]
            loads = [("seq write 1M", "write", "1M")]
            if level != "raid1":
                loads.append(("rand write 4K", "randwrite", "4K"))
            if a.nbd:
                loads.append(("rand write 4K, NBD", "randwrite", "4K"))
            for label, rw, bs in loads:
                mbps, iops = members_limit(mine, rw, bs, a.seconds)
                limit = mbps * data_fraction(level, n) if rw == "write" else iops / ios_per_small_write(level, n)
                for build, binary in builds:
                    if "NBD" in label:
                        got, cpu = uraid_write_nbd(binary, mine, level, n, chunk, bs, a.seconds,
                                                   os.path.join(a.dir, "nbd.sock"))
                    else:
                        mb, io, cpu = uraid_write(binary, mine, level, n, chunk, rw, bs, a.seconds)
                        got = mb if rw == "write" else io
                    results.setdefault((name, label, build), []).append((got, limit, cpu))
                    print(f"round {r + 1} {name} {label} {build}: {got:.0f}, limit {limit:.0f}, "
                          f"{cpu:.1f} CPU us per request", file=sys.stderr)

    print(f"\nRedundant writes over member files of {a.member_mib} MiB on tmpfs, queue depth 32, medians of "
          f"{a.runs} rounds [min-max]; the limit is the members' own rate in the same round (fio, one psync "
          "job per member) times the level's data fraction, or over the member I/Os of one small write; "
          "uraid's CPU per request is its whole process's (load generator included in process, the "
          "server's alone over NBD)\n")
    print("| array | load | build | uraid | limit | uraid / limit | uraid CPU µs per request |")
    print("|---|---|---|---|---|---|---|")
    for (name, label, build), rounds in results.items():
        unit = "MB/s" if "seq" in label else "IOPS"
        got = [g for g, _, _ in rounds]
        lim = [lim for _, lim, _ in rounds]
        ratio = [g / lim for g, lim, _ in rounds]
        cpu = [c for _, _, c in rounds]
        print(f"| {name} | {label} | {build} | {fmt(got)} {unit} | {fmt(lim)} {unit} | {fmt(ratio, 2)} "
              f"| {fmt(cpu, 1)} |")
    shutil.rmtree(a.dir)


if __name__ == "__main__":
    main()
