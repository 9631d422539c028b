#!/usr/bin/env python3
"""Read gvinum drive images with dissect.volume (an independent Vinum reader) and report
what it finds, for the peer test in ../peer_dissect.rs.

Usage: dissect_read.py OUT_DIR IMAGE...

All images belong to one Vinum set. For every volume dissect.volume finds, the volume's
contents go to OUT_DIR/<name>.bin and one line goes to standard output:

    name<TAB>size<TAB>level<TAB>stripe_size<TAB>num_disks
"""

import os
import sys

from dissect.volume.vinum.vinum import Vinum

# The helper beside this script is imported from the source tree: leave no __pycache__ there.
sys.dont_write_bytecode = True
from dissect_volumes import read_units  # noqa: E402


def read_volume(disk) -> bytes:
    """The volume's bytes, read one stripe unit (or 64 KiB) at a time (see `read_units`); a
    stream that gives out early is an error here."""
    data, holes = read_units(disk.open(), disk.size, disk.stripe_size or 65536)
    if holes:
        raise RuntimeError(f"{disk.name}: the stream returned nothing for the ranges {holes}")
    return data


def main() -> int:
    out_dir, images = sys.argv[1], sys.argv[2:]
    handles = [open(path, "rb") for path in images]
    try:
        vinum = Vinum(handles)
        for disk in vinum.configurations[0].virtual_disks:
            data = read_volume(disk)
            with open(os.path.join(out_dir, disk.name + ".bin"), "wb") as out:
                out.write(data)
            level = getattr(disk.level, "name", disk.level)
            print(f"{disk.name}\t{disk.size}\t{level}\t{disk.stripe_size}\t{disk.num_disks}")
    finally:
        for handle in handles:
            handle.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
