#!/usr/bin/env python3
"""The seeds' own benchmark on uraid: bonnie++ on ext4 mounted from a uraid volume (the FUSE file
of `uraid mount`, turned into a block device by `losetup --direct-io=on`) over 4 member files, for
linear, raid0, raid1, raid5, raid6 and raid10 f2, next to bonnie++ on the bare file system that
holds the member files. Printed in the seeds' table format (K/sec and %CPU per column, seeks/s).

Context, not pass/fail: the member files sit on one virtual disk, so a striped array cannot be
faster than that disk, and the page cache of the machine (much larger than the test file unless
--ram says otherwise) flatters the bare file system.

    bench/bonnie.py [--runs 3] [--size-mib 2048] [--ram-mib 1024] [--dir /tmp/uraid-bench-bonnie]
"""

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

LEVELS = [
    ("linear", ["--level=linear"]),
    ("raid0", ["--level=0"]),
    ("raid1", ["--level=1"]),
    ("raid5", ["--level=5"]),
    ("raid6", ["--level=6"]),
    ("raid10 f2", ["--level=10", "--layout=f2"]),
]
# bonnie++ 2.00 CSV: fields 9..20 are per-char output, block output, rewrite, per-char input,
# block input and random seeks, each a rate and a %CPU.
COLUMNS = ["putc", "putc_cpu", "block_out", "block_out_cpu", "rewrite", "rewrite_cpu",
           "getc", "getc_cpu", "block_in", "block_in_cpu", "seeks", "seeks_cpu"]


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        sys.exit(f"bench/bonnie.py: {' '.join(cmd)} failed ({p.returncode}):\n{p.stderr}")
    return p.stdout


MEMCG = "/sys/fs/cgroup/memory/uraid-bench-bonnie"


def bonnie(directory, size_mib, ram_mib, name):
    argv = ["bonnie++", "-d", directory, "-s", str(size_mib), "-r", str(ram_mib), "-n", "0", "-u", "root", "-q", "-m", name]
    if os.path.isdir(MEMCG):
        # bonnie++ runs in a memory cgroup of --ram-mib, so its page cache cannot hold the test
        # file and the read columns measure the volume rather than the machine's memory.
        argv = ["sh", "-c", f'echo $$ > {MEMCG}/tasks && exec "$@"', "bonnie", *argv]
    out = run(argv)
    line = [l for l in out.splitlines() if l.count(",") > 20][-1].split(",")
    fields = line[9:21]

    def num(v):
        # "+++++" marks a test that ran too fast for bonnie++ to time.
        try:
            return float(v)
        except ValueError:
            return float("nan")

    return dict(zip(COLUMNS, map(num, fields)))


def limit_page_cache(ram_mib):
    """Make the memory cgroup bonnie() runs bonnie++ in, of `ram_mib` (where cgroup v1 has one)."""
    memcg_root = os.path.dirname(MEMCG)
    if os.path.isdir(memcg_root):
        os.makedirs(MEMCG, exist_ok=True)
        with open(os.path.join(MEMCG, "memory.limit_in_bytes"), "w") as f:
            f.write(str(ram_mib << 20))
    else:
        print("bench: no cgroup v1 memory controller; the page cache is not limited", file=sys.stderr)


def ext4_on_loop(image, mnt):
    """ext4 made and mounted on `image` through a loop device (direct I/O); the loop device."""
    loop = run(["losetup", "-f", "--show", "--direct-io=on", image]).strip()
    run(["mkfs.ext4", "-q", "-F", loop])
    run(["mount", loop, mnt])
    return loop


class Volume:
    """A uraid array over 4 member files, mounted as ext4 through FUSE and a loop device."""

    def __init__(self, uraid, directory, create_args, member_bytes, io):
        self.dir = directory
        os.makedirs(directory, exist_ok=True)
        self.members = [os.path.join(directory, f"m{i}.img") for i in range(4)]
        for m in self.members:
            with open(m, "wb") as f:
                f.truncate(member_bytes)
        # Zero-filled members are consistent for every level, so the initial sync is skipped truthfully.
        run([uraid, "create", "--raid-devices=4", "--force", "--assume-clean", *create_args, *self.members])
        self.file = os.path.join(directory, "volume")
        self.mnt = os.path.join(directory, "mnt")
        os.makedirs(self.mnt, exist_ok=True)
        self.log = open(os.path.join(directory, "mount.log"), "a")
        self.proc = subprocess.Popen([uraid, "mount", f"--io={io}", *self.members, self.file], stdout=self.log,
                                     stderr=self.log, start_new_session=True)
        deadline = time.time() + 30
        while not (os.path.exists(self.file) and os.path.getsize(self.file) > 0):
            if self.proc.poll() is not None or time.time() > deadline:
                sys.exit(f"bench/bonnie.py: uraid mount did not start (see {directory}/mount.log)")
            time.sleep(0.1)
        self.loop = ext4_on_loop(self.file, self.mnt)

    def close(self):
        subprocess.run(["umount", self.mnt])
        subprocess.run(["losetup", "-d", self.loop])
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()
        shutil.rmtree(self.dir)


def median_timed(values):
    """The median of the runs bonnie++ could time; NaN if it timed none."""
    timed = [v for v in values if v == v]
    return statistics.median(timed) if timed else float("nan")


def row(name, size_mib, results):
    med = {c: median_timed([r[c] for r in results]) for c in COLUMNS}

    def cell(c, width, digits=0):
        v = med[c]
        return ("+" * 5).rjust(width) if v != v else f"{v:{width}.{digits}f}"

    size = f"{size_mib // 1024}G" if size_mib % 1024 == 0 else f"{size_mib}M"
    return (f"{name:<12}{size:>5} {cell('putc', 6)} {cell('putc_cpu', 3)} {cell('block_out', 7)} {cell('block_out_cpu', 3)} "
            f"{cell('rewrite', 7)} {cell('rewrite_cpu', 3)} {cell('getc', 6)} {cell('getc_cpu', 3)} "
            f"{cell('block_in', 7)} {cell('block_in_cpu', 3)} {cell('seeks', 7, 1)} {cell('seeks_cpu', 3)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--size-mib", type=int, default=2048, help="bonnie++ -s (at least twice --ram-mib)")
    ap.add_argument("--ram-mib", type=int, default=1024, help="bonnie++ -r")
    ap.add_argument("--dir", default="/tmp/uraid-bench-bonnie", help="a directory on the file system to test")
    ap.add_argument("--uraid", default=os.path.join(ROOT, "target", "release", "uraid"))
    ap.add_argument("--levels", default=",".join(n for n, _ in LEVELS), help="comma-separated subset")
    # uring reads the members with O_DIRECT, so that, like bonnie++ on the bare file system (whose
    # page cache the memory cgroup bounds), the volume's reads reach the disk; the threads
    # backend would serve them from the members' page cache, which no cgroup bounds here (putting
    # the FUSE server in bonnie's cgroup deadlocks: reclaim waits on writeback through it).
    ap.add_argument("--io", default="uring", choices=["uring", "threads"], help="uraid mount --io (default uring)")
    a = ap.parse_args()
    for tool, pkg in [("bonnie++", "bonnie++"), ("losetup", "util-linux"), ("mkfs.ext4", "e2fsprogs")]:
        if shutil.which(tool) is None:
            sys.exit(f"bench/bonnie.py: {tool} not found (Debian package {pkg}; scripts/setup.sh installs it)")
    if os.geteuid() != 0:
        sys.exit("bench/bonnie.py: needs root (losetup and mount)")
    if not os.access(a.uraid, os.X_OK):
        sys.exit(f"bench/bonnie.py: {a.uraid} not found; build it with `cargo build --release -p uraid`")
    wanted = a.levels.split(",")
    unknown = [w for w in wanted if w not in dict(LEVELS)]
    if unknown:
        sys.exit(f"bench/bonnie.py: unknown level(s) {unknown}; choose from {[n for n, _ in LEVELS]}")

    limit_page_cache(a.ram_mib)
    # Every level must hold the test file with room for ext4: raid1 over 4 holds one member.
    member_bytes = (a.size_mib + 1024) << 20
    table = []
    bare_dir = os.path.join(a.dir, "bare")
    os.makedirs(bare_dir, exist_ok=True)
    results = []
    for i in range(a.runs):
        results.append(bonnie(bare_dir, a.size_mib, a.ram_mib, "bare"))
        print(f"bare fs run {i + 1}: {results[-1]}", file=sys.stderr)
    shutil.rmtree(bare_dir)
    table.append(row("bare fs", a.size_mib, results))
    for name, args in LEVELS:
        if name not in wanted:
            continue
        results = []
        for i in range(a.runs):
            vol = Volume(a.uraid, os.path.join(a.dir, name.replace(" ", "-")), args, member_bytes, a.io)
            try:
                results.append(bonnie(vol.mnt, a.size_mib, a.ram_mib, name))
            finally:
                vol.close()
            print(f"{name} run {i + 1}: {results[-1]}", file=sys.stderr)
        table.append(row(name, a.size_mib, results))

    print(f"\nbonnie++ -s {a.size_mib} -r {a.ram_mib} -n 0, medians of {a.runs} runs (ext4; uraid volumes over 4 member files, --io={a.io})\n")
    print("                  ------Sequential Output------ --Sequential Input-- --Random-")
    print("                  -Per Chr- ---Block--- -Rewrite-- -Per Chr- ---Block--- --Seeks---")
    print("            Size  K/sec %CP   K/sec %CP   K/sec %CP  K/sec %CP   K/sec %CP    /sec %CP")
    for line in table:
        print(line)
    print("\n+++++: bonnie++ finished the test too fast to time it, in every run (medians are of the runs it timed).")
    print("%CP is bonnie++'s own CPU; the uraid process serving the volume is not counted in it.")


if __name__ == "__main__":
    main()
