#!/usr/bin/env python3
"""Report everything dissect.volume (an independent Vinum reader) makes of a set of gvinum
drive images, for the end-to-end peer test in crates/uraid/tests/vinum_peer.rs.

Usage: dissect_volumes.py OUT_DIR IMAGE...

All images belong to one Vinum set. Standard output is one JSON document:

    {"drives": [{"image", "name", "active", "data_offset", "data_length"}],
     "volumes": [{"name", "size", "level", "stripe_size", "num_disks", "state", "read",
                  "plexes": [{"name", "organization", "stripe_size", "state", "volume", "size",
                              "level", "read",
                              "subdisks": [{"name", "drive", "size", "drive_offset", "plex",
                                            "plex_offset", "state"}]}]}]}

`plexes` are the plexes dissect.volume uses for the volume, in its order (sorted by name for
a mirror); `subdisks` those it uses for the plex, in its column order (by plex offset).
Each `read` is what reading through dissect.volume's stream gave: `file` (in OUT_DIR) holds
the volume's or plex's bytes, `holes` lists [start, end) ranges where the stream returned
nothing (zeros in the file), and `error` is the exception's text if reading failed (then
`file` is null).
"""

import json
import math
import os
import sys

from dissect.volume.vinum.vinum import Vinum, VinumPlexDisk


def read_units(stream, size: int, unit: int) -> tuple[bytes, list[list[int]]]:
    """`size` bytes of `stream`, read at most one `unit` at a time: dissect.volume 3.18's raid5
    stream returns more bytes than asked for when one read spans several stripe units.

    A short read does not stop the reading: its missing bytes are zeros and are reported as
    a hole, so that a reader placing data elsewhere than gvinum shows where."""
    chunks = []
    holes: list[list[int]] = []
    offset = 0
    while offset < size:
        length = min(unit - offset % unit, size - offset)
        stream.seek(offset)
        chunk = stream.read(length)
        if len(chunk) > length:
            raise RuntimeError(f"read of {length} bytes at {offset} returned {len(chunk)}")
        if len(chunk) < length:
            start = offset + len(chunk)
            if holes and holes[-1][1] == start:
                holes[-1][1] = offset + length
            else:
                holes.append([start, offset + length])
            chunk += bytes(length - len(chunk))
        chunks.append(chunk)
        offset += length
    return b"".join(chunks), holes


def read_to(out_dir: str, file_name: str, disk, unit: int) -> dict:
    """Read `disk` (a dissect.volume virtual disk) whole into OUT_DIR/file_name."""
    try:
        data, holes = read_units(disk.open(), disk.size, unit)
    except Exception as error:  # noqa: BLE001 - any failure is a finding to report
        return {"file": None, "holes": [], "error": f"{type(error).__name__}: {error}"}
    with open(os.path.join(out_dir, file_name), "wb") as out:
        out.write(data)
    return {"file": file_name, "holes": holes, "error": None}


def text(value):
    return None if value is None else value.decode(errors="backslashreplace")


def enum_name(value):
    return None if value is None else value.name.lower()


def plex_report(out_dir: str, plex_disk: VinumPlexDisk) -> dict:
    plex = plex_disk.plex
    subdisks = sorted(plex_disk.sds, key=lambda sd: sd.plexoffset)
    return {
        "name": text(plex.name),
        "organization": enum_name(plex.org),
        "stripe_size": plex.stripesize,
        "state": enum_name(plex.state),
        "volume": text(plex.volume),
        "size": plex_disk.size,
        "level": enum_name(plex_disk.level),
        "read": read_to(out_dir, f"plex-{text(plex.name)}.bin", plex_disk, plex_disk.stripe_size or 65536),
        "subdisks": [
            {
                "name": text(sd.name),
                "drive": text(sd.drive),
                "size": sd.length,
                "drive_offset": sd.driveoffset,
                "plex": text(sd.plex),
                "plex_offset": sd.plexoffset,
                "state": enum_name(sd.state),
            }
            for sd in subdisks
        ],
    }


def main() -> int:
    out_dir, images = sys.argv[1], sys.argv[2:]
    handles = [open(path, "rb") for path in images]
    try:
        vinum = Vinum(handles)
        configuration = vinum.configurations[0]
        drives = [
            {
                "image": image,
                "name": disk.name,
                "active": disk.active,
                "data_offset": disk.offset,
                "data_length": disk.size,
            }
            for image, disk in zip(images, configuration.physical_disks)
        ]
        volumes = []
        for disk in configuration.virtual_disks:
            if isinstance(disk, VinumPlexDisk):
                plex_disks = [disk]
            else:
                plex_disks = [plex_disk for _, (_, plex_disk) in sorted(disk.disk_map.items())]
            # A mirror reads through one of its plexes: one read must stay within a stripe
            # unit of every plex it may use.
            unit = math.gcd(*(p.stripe_size for p in plex_disks if p.stripe_size)) or 65536
            volumes.append(
                {
                    "name": disk.name,
                    "size": disk.size,
                    "level": enum_name(disk.level),
                    "stripe_size": disk.stripe_size,
                    "num_disks": disk.num_disks,
                    "state": enum_name(disk.volume.state),
                    "read": read_to(out_dir, f"volume-{disk.name}.bin", disk, unit),
                    "plexes": [plex_report(out_dir, p) for p in plex_disks],
                }
            )
        json.dump({"drives": drives, "volumes": volumes}, sys.stdout)
    finally:
        for handle in handles:
            handle.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
