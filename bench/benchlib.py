"""What the bench scripts share: checking the tools and binaries a run needs, picking a subset
of what a script knows how to run, and quoting a median with its range."""

import os
import shutil
import statistics
import sys


def fmt(vals, digits=0):
    """The median of `vals` and their range: `12 [10-15]`."""
    return f"{statistics.median(vals):.{digits}f} [{min(vals):.{digits}f}-{max(vals):.{digits}f}]"


def size_arg(text):
    """A size as the scripts take it: bytes, or a number with K, M or G (binary units)."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if text[-1:].upper() in units:
        return int(float(text[:-1]) * units[text[-1:].upper()])
    return int(text)


def require_fio(script):
    if shutil.which("fio") is None:
        sys.exit(f"{script}: fio not found (Debian package fio; scripts/setup.sh installs it)")


def builds(script, uraid, before):
    """The builds to alternate, `(label, binary)`: `before` (if given) and `uraid`, each checked."""
    out = ([("before", before)] if before else []) + [("after" if before else "uraid", uraid)]
    for _, binary in out:
        if not os.access(binary, os.X_OK):
            sys.exit(f"{script}: {binary} not found; build it with `cargo build --release -p uraid`")
    return out


def subset(script, csv, known, what):
    """The comma-separated names in `csv`, each one of `known`."""
    names = csv.split(",")
    bad = [n for n in names if n not in known]
    if bad:
        sys.exit(f"{script}: unknown {what} {bad}; choose from {list(known)}")
    return names


def member_files(directory, count, mib, reuse=True, sync=False):
    """`count` member files `m0.img`... of `mib` MiB of random data in `directory` (real data:
    a hole is read without touching a page); files already of that size are kept when `reuse`.
    `sync`: each written file is flushed to its device."""
    os.makedirs(directory, exist_ok=True)
    files = [os.path.join(directory, f"m{i}.img") for i in range(count)]
    chunk = os.urandom(1 << 20)
    for m in files:
        if reuse and os.path.exists(m) and os.path.getsize(m) == mib << 20:
            continue
        with open(m, "wb") as f:
            for _ in range(mib):
                f.write(chunk)
            if sync:
                f.flush()
                os.fsync(f.fileno())
    return files


def peak_rss_mib(pid):
    """The peak resident set of a running process (`VmHWM`), in MiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")
