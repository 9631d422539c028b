#!/usr/bin/env python3
"""How many instructions NetBSD's RAIDframe driver spends on one write, counted, not timed.

The performance model's seed 003 (a tar extracted onto RAIDframe RAID 5 on a 486DX100) runs
slower on the real machine than in the model. One candidate is the driver's own CPU, which the
seed's `time -l` does not charge to tar. This script counts it: the real driver (NetBSD's own
code in a rump kernel, from the RAIDframe oracle) runs under valgrind's callgrind, which counts
every instruction the rump kernel executes while `rumpdd` writes N blocks, one at a time (raw
device writes wait for their completion), to
- a plain component (`/disk0`): the cost of the rump kernel's system call and block I/O path;
- RAID 0 over 2 components and RAID 5 over 3 (32-sector stripe units, as the model assumes).
Each count is everything the rump kernel did for the write: the system call and the copy of
the data into the kernel, RAIDframe's mapping, its DAG and parity XOR, and every component I/O
through the rump kernel's block path (standing in for the disk driver). So it bounds RAIDframe's
own share from above. (The plain component is no baseline to subtract for large writes: its
path differs, and costs more than RAIDframe's at 32 and 64 KiB.) Instruction counts do not
depend on this machine's speed; `--mips` turns them into time on a slower CPU.

    bench/raidframe-cpu.py [--writes 1024] [--mips 25,50]

Needs valgrind (scripts/setup.sh installs it) and the RAIDframe oracle beside the project
(`../shared/tools/raidframe-oracle`, or `$URAID_RAIDFRAME_ORACLE`).
"""

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = "raidframe-cpu.py"

# (what, RAIDframe level or None for the plain component, components, block size): RAID 0 writes
# are one whole stripe (2 x 16 KiB), because the oracle's RAID 0 cannot take writes that cross a
# stripe unit without covering whole stripes (see its README).
CASES = [
    ("plain component, 8 KiB", None, 1, 8192),
    ("RAID 0 over 2, 32 KiB (one stripe)", 0, 2, 32768),
    ("RAID 5 over 3, 8 KiB (small write)", 5, 3, 8192),
    ("RAID 5 over 3, 64 KiB (two stripes)", 5, 3, 65536),
]


def oracle_copy(work):
    """A working copy of the oracle whose shared-library names are links again (a copy of the
    oracle may carry them as short plain files, which the loader rejects)."""
    src = os.environ.get("URAID_RAIDFRAME_ORACLE") or os.path.join(HERE, "..", "..", "shared", "tools", "raidframe-oracle")
    if not os.path.isfile(os.path.join(src, "rfo")):
        sys.exit(f"{SCRIPT}: the RAIDframe oracle is not at {src} (set URAID_RAIDFRAME_ORACLE)")
    dst = os.path.join(work, "oracle")
    shutil.copytree(src, dst, symlinks=True)
    lib = os.path.join(dst, "lib")
    for name in os.listdir(lib):
        path = os.path.join(lib, name)
        if os.path.islink(path) or os.path.getsize(path) > 4096:
            continue
        base = name.split(".so")[0] + ".so.0."
        target = sorted(n for n in os.listdir(lib) if n.startswith(base) and os.path.getsize(os.path.join(lib, n)) > 4096)
        if not target:
            sys.exit(f"{SCRIPT}: {path}: no library to link it to")
        os.chmod(lib, 0o755)
        os.remove(path)
        os.symlink(target[0], path)
    return dst


def run(cmd, env, **kw):
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        sys.exit(f"{SCRIPT}: {' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()[-400:]}")
    return p


def count(oracle, work, level, comps, bs, writes):
    """Instructions the rump kernel executed while `writes` blocks of `bs` bytes were written."""
    case = tempfile.mkdtemp(dir=work)
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(oracle, "lib"))
    sock = os.path.join(case, "rump.sock")
    env["RUMP_SERVER"] = "unix://" + sock
    disks = []
    for i in range(comps):
        img = os.path.join(case, f"c{i}.img")
        with open(img, "wb") as f:
            f.truncate(128 << 20)
        disks += ["-d", f"key=/disk{i},hostpath={img},size=host"]
    out = os.path.join(case, "callgrind.out")
    server = subprocess.Popen(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", os.path.join(oracle, "bin", "rump_server"), "-s",
         "-lrumpvfs", "-lrumpdev", "-lrumpdev_disk", "-lrumpdev_raidframe", *disks, env["RUMP_SERVER"]],
        env=env, stdout=subprocess.DEVNULL, stderr=open(os.path.join(case, "server.log"), "w"))
    try:
        for _ in range(600):
            if os.path.exists(sock):
                break
            if server.poll() is not None:
                sys.exit(f"{SCRIPT}: the rump kernel ended early; see {case}/server.log")
            time.sleep(0.1)
        else:
            sys.exit(f"{SCRIPT}: the rump kernel did not start in 60 s")
        raidctl = os.path.join(oracle, "bin", "rump.raidctl")
        if level is None:
            dev = "/disk0"
        else:
            conf = os.path.join(case, "raid.conf")
            with open(conf, "w") as f:
                f.write(f"START array\n1 {comps} 0\nSTART disks\n")
                f.write("".join(f"/disk{i}\n" for i in range(comps)))
                f.write(f"START layout\n32 1 1 {level}\nSTART queue\nfifo 100\n")
            run([raidctl, "-C", conf, "raid0"], env)
            run([raidctl, "-I", "1", "raid0"], env)
            run([raidctl, "-iv", "raid0"], env)
            dev = "/dev/rraid0d"
        data = os.path.join(case, "data.bin")
        with open(data, "wb") as f:
            f.write(os.urandom(bs * writes))
        run(["callgrind_control", "-z", str(server.pid)], env)
        run([os.path.join(oracle, "bin", "rumpdd"), "in", dev, data], dict(env, RUMPDD_BS=str(bs)))
        run(["callgrind_control", "-d", str(server.pid)], env)
        dump = out + ".1"
        for _ in range(100):
            if os.path.exists(dump) and "totals:" in open(dump).read():
                break
            time.sleep(0.1)
        totals = [int(line.split()[1]) for line in open(dump) if line.startswith("totals:")]
        if not totals:
            sys.exit(f"{SCRIPT}: no totals in {dump}")
        return totals[0]
    finally:
        server.send_signal(signal.SIGKILL)
        server.wait()
        shutil.rmtree(case, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--writes", type=int, default=1024, help="writes per case (default 1024)")
    ap.add_argument("--mips", default="25,50", help="CPU speeds (millions of instructions a second) to turn the counts into time")
    a = ap.parse_args()
    mips = [float(m) for m in a.mips.split(",")]
    for tool in ("valgrind", "callgrind_control"):
        if shutil.which(tool) is None:
            sys.exit(f"{SCRIPT}: {tool} not found (Debian package valgrind; scripts/setup.sh installs it)")
    work = tempfile.mkdtemp(prefix="raidframe-cpu.")
    try:
        oracle = oracle_copy(work)
        print(f"{'write':38} {'instructions/write':>18}  " +
              "  ".join(f"{'ms at ' + format(m, 'g') + ' MIPS':>16}" for m in mips))
        for what, level, comps, bs in CASES:
            per = count(oracle, work, level, comps, bs, a.writes) / a.writes
            times = "  ".join(f"{per / m / 1000:16.2f}" for m in mips)
            print(f"{what:38} {per:18,.0f}  {times}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
