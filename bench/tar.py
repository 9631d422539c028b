#!/usr/bin/env python3
"""Seed 003's workload for real: extract a tar archive of about 800 MB into a fresh ext4 on one
member file (no RAID), on the same one file through uraid (md linear over one member), and on
uraid volumes over member files: RAID 0 over 2 and RAID 5 over 3, each as an md array and as a
NetBSD RAIDframe set. The volumes are the FUSE file of
`uraid mount`, turned into a block device by `losetup --direct-io=on`, as bench/bonnie.py does.

The archive is made once, seeded: files of 4 KiB to 400 KiB (88 KiB on average, as the
performance model derives seed 003's archive from its block counts), in directories of 100.
Each run makes the volume afresh, runs mkfs.ext4, mounts it, and times `tar -xf` followed by
`sync` (so the time includes writing everything to the volume). Configurations alternate run by
run; the table gives the median of --runs runs and the ratio to the single file.

Context, not pass/fail: the member files sit on one virtual disk, so striping cannot beat that
disk, and RAID 5's parity costs CPU on a 2-core machine that also runs the FUSE server.

    bench/tar.py [--runs 3] [--size-mib 800] [--dir /tmp/uraid-bench-tar] [--configs single,md-raid0,...]
"""

import argparse
import io
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# name, format, level, members
CONFIGS = [
    ("single", None, None, 1),
    # The same one file through uraid (md linear over one member): what FUSE and the engine cost.
    ("md-linear-1", "md", "linear", 1),
    ("md-raid0", "md", "0", 2),
    ("md-raid5", "md", "5", 3),
    ("raidframe-raid0", "raidframe", "0", 2),
    ("raidframe-raid5", "raidframe", "5", 3),
]
# RAIDframe's stripe unit for the sets (sectors); md's chunk is the same 64 KiB.
SECT_PER_SU = 128


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        sys.exit(f"bench/tar.py: {' '.join(cmd)} failed ({p.returncode}):\n{p.stderr}")
    return p.stdout


def make_archive(path, size_mib, seed=3):
    """A tar of seeded random files averaging 88 KiB, `size_mib` MiB in all."""
    if os.path.exists(path):
        return
    rng = random.Random(seed)
    total, target, n = 0, size_mib << 20, 0
    tmp = path + ".part"
    with tarfile.open(tmp, "w") as tar:
        while total < target:
            size = min(rng.randint(1, 100) * 4096, target - total)
            info = tarfile.TarInfo(f"d{n // 100:04}/f{n:06}")
            info.size = size
            info.mtime = 1_000_000_000
            tar.addfile(info, io.BytesIO(rng.randbytes(size)))
            total += size
            n += 1
    os.rename(tmp, path)


class Volume:
    """ext4 on one member file, or on a uraid volume over member files, mounted at `mnt`."""

    def __init__(self, uraid, directory, fmt, level, members, member_bytes):
        self.dir = directory
        os.makedirs(directory, exist_ok=True)
        self.members = [os.path.join(directory, f"m{i}.img") for i in range(members)]
        for m in self.members:
            with open(m, "wb") as f:
                f.truncate(member_bytes)
        self.proc = None
        self.log = open(os.path.join(directory, "mount.log"), "a")
        self.mnt = os.path.join(directory, "mnt")
        os.makedirs(self.mnt, exist_ok=True)
        if fmt is None:
            target = self.members[0]
        else:
            self.file = os.path.join(directory, "volume")
            if fmt == "md":
                # Zero-filled members are consistent for every level: no initial sync is owed.
                run([uraid, "create", f"--level={level}", f"--raid-devices={members}", "--chunk=64K", "--force",
                     "--assume-clean", *self.members])
                mount = [uraid, "mount", "--io=uring", *self.members, self.file]
            else:
                conf = os.path.join(directory, "raid.conf")
                with open(conf, "w") as f:
                    disks = "\n".join(os.path.basename(m) for m in self.members)
                    f.write(f"START array\n1 {members} 0\nSTART disks\n{disks}\nSTART layout\n"
                            f"{SECT_PER_SU} 1 1 {level}\nSTART queue\nfifo 100\n")
                run([uraid, "raidctl", "-I", "2026", conf])
                run([uraid, "raidctl", "-i", conf])
                mount = [uraid, "mount", "--io=uring", "--raidframe", conf, self.file]
            self.proc = subprocess.Popen(mount, stdout=self.log, stderr=self.log, start_new_session=True)
            deadline = time.time() + 60
            while not (os.path.exists(self.file) and os.path.getsize(self.file) > 0):
                if self.proc.poll() is not None or time.time() > deadline:
                    sys.exit(f"bench/tar.py: uraid mount did not start (see {directory}/mount.log)")
                time.sleep(0.1)
            target = self.file
        self.loop = run(["losetup", "-f", "--show", "--direct-io=on", target]).strip()
        run(["mkfs.ext4", "-q", "-F", self.loop])
        run(["mount", self.loop, self.mnt])

    def close(self):
        subprocess.run(["umount", self.mnt])
        subprocess.run(["losetup", "-d", self.loop])
        if self.proc is not None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()
        shutil.rmtree(self.dir)


def extract(volume, archive):
    start = time.monotonic()
    run(["tar", "-xf", archive, "-C", volume.mnt])
    run(["sync"])
    return time.monotonic() - start


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--size-mib", type=int, default=800, help="size of the archive")
    ap.add_argument("--dir", default="/tmp/uraid-bench-tar", help="a directory on the file system to test")
    ap.add_argument("--uraid", default=os.path.join(ROOT, "target", "release", "uraid"))
    ap.add_argument("--configs", default=",".join(c[0] for c in CONFIGS), help="comma-separated subset")
    a = ap.parse_args()
    for tool, pkg in [("losetup", "util-linux"), ("mkfs.ext4", "e2fsprogs"), ("tar", "tar")]:
        if shutil.which(tool) is None:
            sys.exit(f"bench/tar.py: {tool} not found (Debian package {pkg}; scripts/setup.sh installs it)")
    if os.geteuid() != 0:
        sys.exit("bench/tar.py: needs root (losetup and mount)")
    if not os.access(a.uraid, os.X_OK):
        sys.exit(f"bench/tar.py: {a.uraid} not found; build it with `cargo build --release -p uraid`")
    wanted = a.configs.split(",")
    unknown = [w for w in wanted if w not in [c[0] for c in CONFIGS]]
    if unknown:
        sys.exit(f"bench/tar.py: unknown configuration(s) {unknown}; choose from {[c[0] for c in CONFIGS]}")
    os.makedirs(a.dir, exist_ok=True)
    archive = os.path.join(a.dir, "archive.tar")
    make_archive(archive, a.size_mib)
    # Every volume holds the archive twice over, with room for ext4.
    volume_bytes = (a.size_mib * 2 + 256) << 20
    configs = [c for c in CONFIGS if c[0] in wanted]
    times = {c[0]: [] for c in configs}
    for i in range(a.runs):
        for name, fmt, level, members in configs:
            data_members = members - (1 if level == "5" else 0)
            vol = Volume(a.uraid, os.path.join(a.dir, name), fmt, level, members, volume_bytes // data_members + (1 << 20))
            try:
                t = extract(vol, archive)
            finally:
                vol.close()
            times[name].append(t)
            print(f"{name} run {i + 1}: {t:.1f} s", file=sys.stderr)
    single = statistics.median(times["single"]) if "single" in times else None
    print(f"\ntar -xf of a {a.size_mib} MiB archive, then sync, into a fresh ext4; median of {a.runs} alternated runs\n")
    print(f"{'configuration':<18}{'median s':>9}{'min':>8}{'max':>8}{'/ single':>10}")
    for name, *_ in configs:
        med = statistics.median(times[name])
        ratio = f"{med / single:.2f}" if single else "-"
        print(f"{name:<18}{med:>9.1f}{min(times[name]):>8.1f}{max(times[name]):>8.1f}{ratio:>10}")


if __name__ == "__main__":
    main()
