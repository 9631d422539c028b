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


def read_volume(disk) -> bytes:
    """The volume's bytes, read one stripe unit (or 64 KiB) at a time: dissect.volume 3.18's
    raid5 stream returns more bytes than asked for when one read spans several units."""
    stream = disk.open()
    step = disk.stripe_size or 65536
    chunks = []
    offset = 0
    while offset < disk.size:
        length = min(step - offset % step, disk.size - offset)
        stream.seek(offset)
        chunk = stream.read(length)
        if len(chunk) != length:
            raise RuntimeError(f"{disk.name}: read of {length} bytes at {offset} returned {len(chunk)}")
        chunks.append(chunk)
        offset += length
    return b"".join(chunks)


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
