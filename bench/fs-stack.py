#!/usr/bin/env python3
"""A file system on top (issue 21's seventh target): bonnie++ on ext4 over uraid, against the
same stack over nbdkit, in the same rounds.

Stacks, each ext4 on a loop device (`losetup --direct-io=on`) over a file that a FUSE server
presents, and each over the same storage (--dir, tmpfs by default, so the stacks' own costs show
rather than a disk's):

- `uraid mount`: uraid's own FUSE file of a raid0 over 4 member files;
- `uraid serve` + `nbdfuse`: the same raid0 served over NBD on a unix socket, made a file by
  libnbd's nbdfuse;
- `nbdkit file` + `nbdfuse`: nbdkit's file plugin over one file as large as the raid0 (nbdkit has
  no RAID of its own), made a file the same way. This is the peer.

Every round creates each stack afresh (new files, mkfs.ext4), runs bonnie++ -s SIZE -r RAM -n 0
on it in a memory cgroup of RAM (as bench/bonnie.py does, so its page cache cannot hold the test
file), and takes it down again; the stacks alternate within the round. The ratio of a uraid stack
is its column over the nbdkit stack's in the same round; medians of --runs rounds [min-max].

    bench/fs-stack.py [--runs 3] [--size-mib 2048] [--ram-mib 1024] [--dir /dev/shm/uraid-bench-fs]
"""

import argparse
import os
import shutil
import signal
import stat
import statistics
import subprocess
import sys
import time

from bonnie import COLUMNS, bonnie, ext4_on_loop, limit_page_cache, run

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MEMBERS = 4


def ready(path):
    """A socket that exists, or a file with its size (a FUSE file reads 0 bytes until served)."""
    if not os.path.exists(path):
        return False
    return stat.S_ISSOCK(os.stat(path).st_mode) or os.path.getsize(path) > 0


def wait_for(path, proc, what, log):
    deadline = time.time() + 30
    while not ready(path):
        if proc.poll() is not None or time.time() > deadline:
            raise RuntimeError(f"{what} did not start (see {log})")
        time.sleep(0.1)


class Stack:
    """ext4 on a loop device over a FUSE file; the servers under it are the subclass's."""

    def __init__(self, uraid, directory, member_bytes):
        self.dir = directory
        os.makedirs(directory, exist_ok=True)
        self.procs = []
        self.fuse_dir = None
        self.loop = None
        self.log = open(os.path.join(directory, "servers.log"), "a")
        self.mnt = os.path.join(directory, "mnt")
        os.makedirs(self.mnt, exist_ok=True)
        try:
            self.build(uraid, member_bytes)
        except BaseException:
            # Nothing is left running behind a stack that did not come up.
            self.close()
            raise

    def start(self, argv):
        p = subprocess.Popen(argv, stdout=self.log, stderr=self.log, start_new_session=True)
        self.procs.append(p)
        return p

    def nbdfuse(self, socket):
        """Present the export at `socket` as a file through nbdfuse; the file."""
        self.fuse_dir = os.path.join(self.dir, "fuse")
        os.makedirs(self.fuse_dir, exist_ok=True)
        image = os.path.join(self.fuse_dir, "nbd")
        p = self.start(["nbdfuse", image, "--unix", socket])
        wait_for(image, p, "nbdfuse", self.log.name)
        return image

    def mount(self, image):
        self.loop = ext4_on_loop(image, self.mnt)

    def close(self):
        if self.loop:
            subprocess.run(["umount", self.mnt])
            subprocess.run(["losetup", "-d", self.loop])
        if self.fuse_dir:
            subprocess.run(["fusermount3", "-u", self.fuse_dir])
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
        self.log.close()
        shutil.rmtree(self.dir)


def raid0_members(uraid, directory, member_bytes):
    members = [os.path.join(directory, f"m{i}.img") for i in range(MEMBERS)]
    for m in members:
        with open(m, "wb") as f:
            f.truncate(member_bytes)
    # Zero-filled members are consistent, so no initial sync is owed.
    run([uraid, "create", "--level=0", f"--raid-devices={MEMBERS}", "--force", "--assume-clean", *members])
    return members


class UraidMount(Stack):
    name = "uraid mount"

    def build(self, uraid, member_bytes):
        members = raid0_members(uraid, self.dir, member_bytes)
        image = os.path.join(self.dir, "volume")
        p = self.start([uraid, "mount", *members, image])
        wait_for(image, p, "uraid mount", self.log.name)
        self.mount(image)


class UraidNbdfuse(Stack):
    name = "uraid serve + nbdfuse"

    def build(self, uraid, member_bytes):
        members = raid0_members(uraid, self.dir, member_bytes)
        socket = os.path.join(self.dir, "nbd.sock")
        p = self.start([uraid, "serve", "--listen", f"unix:{socket}", *members])
        wait_for(socket, p, "uraid serve", self.log.name)
        self.mount(self.nbdfuse(socket))


class NbdkitNbdfuse(Stack):
    name = "nbdkit file + nbdfuse"

    def build(self, _uraid, member_bytes):
        disk = os.path.join(self.dir, "disk.img")
        with open(disk, "wb") as f:
            f.truncate(member_bytes * MEMBERS)
        socket = os.path.join(self.dir, "nbd.sock")
        p = self.start(["nbdkit", "--foreground", "--exit-with-parent", "-U", socket, "file", disk])
        wait_for(socket, p, "nbdkit", self.log.name)
        self.mount(self.nbdfuse(socket))


STACKS = [UraidMount, UraidNbdfuse, NbdkitNbdfuse]
# The columns compared (bonnie++'s rates; its %CPU columns are its own, not the servers').
RATES = ["putc", "block_out", "rewrite", "getc", "block_in", "seeks"]
TITLES = {"putc": "per-char out K/s", "block_out": "block out K/s", "rewrite": "rewrite K/s",
          "getc": "per-char in K/s", "block_in": "block in K/s", "seeks": "seeks/s"}


def med(values):
    """Median [min-max] of the values bonnie++ timed ("+++++" is NaN)."""
    timed = [v for v in values if v == v]
    if not timed:
        return "+++++"
    return f"{statistics.median(timed):.0f} [{min(timed):.0f}-{max(timed):.0f}]"


def med_ratio(values):
    timed = [v for v in values if v == v]
    if not timed:
        return "-"
    return f"**{statistics.median(timed):.2f}** [{min(timed):.2f}-{max(timed):.2f}]"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--size-mib", type=int, default=2048, help="bonnie++ -s (at least twice --ram-mib)")
    ap.add_argument("--ram-mib", type=int, default=1024, help="bonnie++ -r, and its memory cgroup")
    ap.add_argument("--dir", default="/dev/shm/uraid-bench-fs", help="where the member files and images go")
    ap.add_argument("--uraid", default=os.path.join(ROOT, "target", "release", "uraid"))
    a = ap.parse_args()
    for tool, pkg in [("bonnie++", "bonnie++"), ("losetup", "util-linux"), ("mkfs.ext4", "e2fsprogs"),
                      ("nbdkit", "nbdkit"), ("nbdfuse", "libnbd-bin"), ("fusermount3", "fuse3")]:
        if shutil.which(tool) is None:
            sys.exit(f"bench/fs-stack.py: {tool} not found (Debian package {pkg}; scripts/setup.sh installs it)")
    if os.geteuid() != 0:
        sys.exit("bench/fs-stack.py: needs root (losetup and mount)")
    if not os.access(a.uraid, os.X_OK):
        sys.exit(f"bench/fs-stack.py: {a.uraid} not found; build it with `cargo build --release -p uraid`")
    limit_page_cache(a.ram_mib)
    # The raid0 holds the test file with room for ext4.
    member_bytes = ((a.size_mib + 1024) << 20) // MEMBERS
    results = {s.name: [] for s in STACKS}
    for r in range(a.runs):
        for cls in STACKS:
            try:
                stack = cls(a.uraid, os.path.join(a.dir, cls.__name__.lower()), member_bytes)
            except RuntimeError as e:
                sys.exit(f"bench/fs-stack.py: {cls.name}: {e}")
            try:
                results[cls.name].append(bonnie(stack.mnt, a.size_mib, a.ram_mib, cls.__name__))
            finally:
                stack.close()
            print(f"round {r + 1}/{a.runs}: {cls.name}: {results[cls.name][-1]}", file=sys.stderr)

    peer = NbdkitNbdfuse.name
    print(f"\nbonnie++ -s {a.size_mib} -r {a.ram_mib} -n 0 on ext4 (loop, direct I/O) over a FUSE file; "
          f"storage in {a.dir}; medians of {a.runs} rounds [min-max]\n")
    print("| stack | " + " | ".join(TITLES[c] for c in RATES) + " |")
    print("|---|" + "---|" * len(RATES))
    for cls in STACKS:
        print(f"| {cls.name} | " + " | ".join(med([x[c] for x in results[cls.name]]) for c in RATES) + " |")
    for cls in STACKS[:-1]:
        ratios = {c: [mine[c] / theirs[c] if theirs[c] else float("nan")
                      for mine, theirs in zip(results[cls.name], results[peer])] for c in RATES}
        print(f"| {cls.name} / {peer}, per round | " + " | ".join(med_ratio(ratios[c]) for c in RATES) + " |")


if __name__ == "__main__":
    main()
