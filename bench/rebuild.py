#!/usr/bin/env python3
"""Rebuild and resync speed against the members' own sequential bandwidth, and what a rebuild
costs clients (issue 21's fifth target).

Each round, for every array (2-way raid1, 4-member raid5, optionally 4-member raid6; 512 KiB
chunks), in this order:

- the members' limit: fio, one job per member file the rebuild touches (the survivors and the
  spare), all at once, 1 MiB sequential writes of the whole file, then the same reads; the
  slowest job's bandwidth of each, and the limit is the lower of the two;
- a rebuild onto a spare on an idle array: `uraid create --assume-clean` over random data,
  `uraid serve --speed-limit-max=1T` without the last member (md's default speed_limit_max
  would hold it to 200 MB/s), then `ctl add SPARE` and `ctl wait`, timed from
  before `add` to after `wait`;
- a resync on an idle array: the last member refilled with new random data (so every stripe's
  parity, or every row of the mirror, disagrees), `create --assume-clean`, served, one 4 KiB
  write over NBD and the server killed (SIGKILL) before it marks the array clean; then served
  again, where it resyncs by itself, timed from the server's start to `ctl wait`'s end.

The ratio is the member bytes each covers per second (a member's data area over the time) over
that round's limit; medians of --runs rounds [min-max]. With --before OLD_URAID every round
times that build's rebuild and resync too, right before --uraid's.

With --load-seconds S (raid5 only, after the rounds): fio's nbd engine, 4 KiB random reads and
writes (70/30) at queue depth 16 for S seconds, over the degraded raid5 served without a spare,
then the same load with a rebuild onto the spare started one second in, `speed-limit --min
--load-min` set through `uraid ctl`: the clients' IOPS and p99 completion latency, and the
rebuild's speed while they ran (its bytes done over the time since `add`). Reports, never fails
on a figure.

    bench/rebuild.py [--runs 3] [--member-mib 1024] [--arrays raid1-2,raid5-4] [--before OLD_URAID]
                     [--load-seconds 8 --load-min 100M] [--dir /dev/shm/uraid-bench-rebuild]
"""

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# The helpers bench/mirror-reads.py already has.
from benchlib import builds as check_builds, fmt, require_fio, subset

# name: (members, create options)
ARRAYS = {
    "raid1-2": (2, ["--level=1"]),
    "raid5-4": (4, ["--level=5", "--chunk=512K"]),
    "raid6-4": (4, ["--level=6", "--chunk=512K"]),
}


def run(cmd, check=True):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if check and p.returncode != 0:
        sys.exit(f"bench/rebuild.py: {' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}{p.stderr}")
    return p.stdout


def fill(path, mib):
    """`mib` MiB of fresh random data (tmpfs serves holes without touching memory)."""
    chunk = os.urandom(1 << 20)
    with open(path, "wb") as f:
        for i in range(mib):
            f.write(chunk[i % 4096:] + chunk[:i % 4096])


def fio_members(files, rw):
    """Each file's bandwidth (bytes/s) with one fio job per file, all at once, 1 MiB sequential."""
    cmd = ["fio", "--output-format=json", "--ioengine=psync", "--bs=1M", f"--rw={rw}", "--end_fsync=0"]
    for i, f in enumerate(files):
        cmd += [f"--name=m{i}", f"--filename={f}", f"--size={os.path.getsize(f)}"]
    out = run(cmd)
    out = json.loads(out[out.index("{"):])
    side = "write" if rw == "write" else "read"
    return [j[side]["io_bytes"] / (j["job_runtime"] / 1000) for j in out["jobs"]]


class Server:
    def __init__(self, uraid, members, d, extra=()):
        self.uraid, self.ctl_sock, self.nbd = uraid, os.path.join(d, "ctl.sock"), os.path.join(d, "nbd.sock")
        for s in (self.ctl_sock, self.nbd):
            if os.path.exists(s):
                os.unlink(s)
        self.log = open(os.path.join(d, "serve.log"), "a")
        self.started = time.monotonic()
        self.proc = subprocess.Popen([uraid, "serve", f"--listen=unix:{self.nbd}", f"--control={self.ctl_sock}",
                                      *extra, *members], stdout=self.log, stderr=self.log, start_new_session=True)
        deadline = time.time() + 20
        while not os.path.exists(self.ctl_sock):
            if self.proc.poll() is not None or time.time() > deadline:
                sys.exit(f"bench/rebuild.py: uraid serve did not start (see {self.log.name})")
            time.sleep(0.01)

    def ctl(self, *args):
        return run([self.uraid, "ctl", self.ctl_sock, *args])

    def status(self):
        return json.loads(self.ctl("status", "--json"))

    def stop(self, sig=signal.SIGTERM):
        self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def wipe_superblock(path):
    """A spare that carried an earlier array's superblock would be refused: overwrite its start."""
    with open(path, "r+b") as f:
        f.write(os.urandom(1 << 20))


def time_rebuild(uraid, files, spare, opts, d):
    n = len(files)
    run([uraid, "create", f"--raid-devices={n}", "--force", "--assume-clean", *opts, *files])
    wipe_superblock(spare)
    # (The flag, not `ctl speed-limit`, so that builds before it can be timed too.)
    srv = Server(uraid, files[:-1], d, ["--speed-limit-max=1T"])
    try:
        t0 = time.monotonic()
        srv.ctl("add", spare)
        srv.ctl("wait")
        secs = time.monotonic() - t0
        last = srv.status()["last_sync"] or ""
    finally:
        srv.stop()
    if "recover completed" not in last:
        sys.exit(f"bench/rebuild.py: the rebuild did not complete: {last}")
    return int(last.split(": ")[1].split()[0]), secs


def time_resync(uraid, files, opts, d, mib):
    n = len(files)
    fill(files[-1], mib)
    run([uraid, "create", f"--raid-devices={n}", "--force", "--assume-clean", *opts, *files])
    srv = Server(uraid, files, d)
    run(["fio", "--name=dirty", "--ioengine=nbd", f"--uri=nbd+unix:///?socket={srv.nbd}", "--rw=write",
         "--bs=4k", "--size=4k", "--output-format=json"])
    srv.stop(signal.SIGKILL)
    srv = Server(uraid, files, d, ["--speed-limit-max=1T"])
    try:
        srv.ctl("wait")
        secs = time.monotonic() - srv.started
        s = srv.status()
    finally:
        srv.stop()
    last = s["last_sync"] or ""
    if "resync completed" not in last:
        sys.exit(f"bench/rebuild.py: the resync did not complete: {last}")
    return s["size_bytes"], secs


def fio_load(sock, seconds):
    out = run(["fio", "--name=load", "--ioengine=nbd", f"--uri=nbd+unix:///?socket={sock}", "--rw=randrw",
               "--rwmixread=70", "--bs=4k", "--iodepth=16", "--time_based", f"--runtime={seconds}",
               "--output-format=json"])
    out = json.loads(out[out.index("{"):])
    job = out["jobs"][0]
    iops = job["read"]["iops"] + job["write"]["iops"]
    p99 = {side: job[side]["clat_ns"]["percentile"]["99.000000"] / 1000 for side in ("read", "write")}
    return iops, p99


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--member-mib", type=int, default=1024)
    ap.add_argument("--dir", default="/dev/shm/uraid-bench-rebuild", help="where the member files go")
    ap.add_argument("--uraid", default=os.path.join(ROOT, "target", "release", "uraid"))
    ap.add_argument("--before", help="another uraid binary, timed alternately with --uraid")
    ap.add_argument("--arrays", default="raid1-2,raid5-4", help="a subset of " + ",".join(ARRAYS))
    ap.add_argument("--no-resync", action="store_true")
    ap.add_argument("--load-seconds", type=int, default=0, help="also the rebuild under client load (raid5)")
    ap.add_argument("--load-min", default="100M", help="speed_limit_min for the rebuild under load")
    ap.add_argument("--keep", action="store_true", help="leave the member files in --dir")
    a = ap.parse_args()
    require_fio("bench/rebuild.py")
    builds = check_builds("bench/rebuild.py", a.uraid, a.before)
    arrays = subset("bench/rebuild.py", a.arrays, ARRAYS, "array(s)")

    os.makedirs(a.dir, exist_ok=True)
    files = [os.path.join(a.dir, f"m{i}.img") for i in range(4)]
    spare = os.path.join(a.dir, "spare.img")
    for f in files + [spare]:
        if not (os.path.exists(f) and os.path.getsize(f) == a.member_mib << 20):
            fill(f, a.member_mib)

    limit = {name: [] for name in arrays}
    wr = {name: [] for name in arrays}
    rd = {name: [] for name in arrays}
    rebuild = {(b, name): [] for b, _ in builds for name in arrays}
    resync = {(b, name): [] for b, _ in builds for name in arrays}
    for i in range(a.runs):
        for name in arrays:
            n, opts = ARRAYS[name]
            touched = files[:n - 1] + [spare]
            w, r = min(fio_members(touched, "write")), min(fio_members(touched, "read"))
            wr[name].append(w)
            rd[name].append(r)
            limit[name].append(min(w, r))
            for b, binary in builds:
                member_bytes, secs = time_rebuild(binary, files[:n], spare, opts, a.dir)
                rebuild[(b, name)].append((member_bytes / secs, member_bytes / secs / limit[name][-1]))
                note = f"rebuild {member_bytes / secs / 1e6:.0f} MB/s ({rebuild[(b, name)][-1][1]:.2f}x)"
                if not a.no_resync:
                    size, secs = time_resync(binary, files[:n], opts, a.dir, a.member_mib)
                    per_member = size / (1 if n == 2 else n - (2 if "6" in name else 1))
                    resync[(b, name)].append((per_member / secs, per_member / secs / limit[name][-1]))
                    note += f", resync {per_member / secs / 1e6:.0f} MB/s ({resync[(b, name)][-1][1]:.2f}x)"
                print(f"round {i + 1}/{a.runs}: {b}: {name}: members write {w / 1e6:.0f}, read {r / 1e6:.0f} MB/s "
                      f"(slowest of one fio job each); {note}", file=sys.stderr)

    print(f"\nRebuild onto a spare and resync after a crash, idle arrays, {a.member_mib} MiB members in {a.dir}; "
          f"medians of {a.runs} rounds [min-max]; MB/s of member bytes\n")
    print("| build | array | members' slowest write MB/s | slowest read MB/s | pass | MB/s per member | ratio to the limit |")
    print("|---|---|---|---|---|---|---|")
    for b, _ in builds:
        for name in arrays:
            for what, res in (("rebuild", rebuild), ("resync", resync)):
                if res[(b, name)]:
                    print(f"| {b} | {name} | {fmt([x / 1e6 for x in wr[name]])} | {fmt([x / 1e6 for x in rd[name]])} "
                          f"| {what} | {fmt([x[0] / 1e6 for x in res[(b, name)]])} | {fmt([x[1] for x in res[(b, name)]], 2)} |")

    if a.load_seconds:
        n, opts = ARRAYS["raid5-4"]
        binary = a.uraid
        rows = []
        for i in range(a.runs):
            for with_rebuild in (False, True):
                run([binary, "create", f"--raid-devices={n}", "--force", "--assume-clean", *opts, *files])
                wipe_superblock(spare)
                srv = Server(binary, files[:-1], a.dir)
                try:
                    srv.ctl("speed-limit", "--min", a.load_min, "--max", "1T")
                    t_add = None
                    result = {}

                    def load():
                        result["v"] = fio_load(srv.nbd, a.load_seconds)
                    t = threading.Thread(target=load)
                    t.start()
                    if with_rebuild:
                        # The rebuild starts one second into the load.
                        time.sleep(1)
                        t_add = time.monotonic()
                        srv.ctl("add", spare)
                    t.join()
                    rate = None
                    if with_rebuild:
                        s = srv.status()
                        done = s["sync_done_bytes"] if s["sync_action"] == "recover" else s["size_bytes"] // (n - 1)
                        rate = done / (time.monotonic() - t_add)
                        srv.ctl("idle")
                finally:
                    srv.stop()
                iops, p99 = result["v"]
                rows.append((with_rebuild, iops, p99, rate))
                print(f"load round {i + 1}: rebuild={with_rebuild}: {iops:.0f} IOPS, p99 read {p99['read']:.0f} µs, "
                      f"write {p99['write']:.0f} µs" + (f", rebuild {rate / 1e6:.0f} MB/s" if rate else ""),
                      file=sys.stderr)
        print(f"\nraid5, 3 of 4 members, fio nbd 4 KiB randrw 70/30 QD16 for {a.load_seconds} s; rebuild with "
              f"speed_limit_min {a.load_min}; medians of {a.runs} rounds [min-max]\n")
        print("| | client IOPS | p99 read µs | p99 write µs | rebuild MB/s per member |")
        print("|---|---|---|---|---|")
        for label, flag in (("no rebuild", False), ("rebuild", True)):
            sel = [r for r in rows if r[0] == flag]
            rates = [r[3] / 1e6 for r in sel if r[3]]
            print(f"| {label} | {fmt([r[1] for r in sel])} | {fmt([r[2]['read'] for r in sel])} | "
                  f"{fmt([r[2]['write'] for r in sel])} | {fmt(rates) if rates else '-'} |")
    if not a.keep:
        shutil.rmtree(a.dir)


if __name__ == "__main__":
    main()
