#!/usr/bin/env python3
"""Pack a component image into the sparse form the tests read.

Layout (little-endian): the 8 bytes b"RFSPARSE", the image length in bytes (u64), the number
of records (u64), then per non-zero 512-byte sector its index (u64) and its 512 bytes.
Usage: pack_sparse.py IMAGE OUTPUT
"""
import struct
import sys

SECTOR = 512


def main():
    src, dst = sys.argv[1], sys.argv[2]
    data = open(src, "rb").read()
    assert len(data) % SECTOR == 0
    records = []
    for i in range(len(data) // SECTOR):
        chunk = data[i * SECTOR:(i + 1) * SECTOR]
        if chunk != bytes(SECTOR):
            records.append(struct.pack("<Q", i) + chunk)
    with open(dst, "wb") as out:
        out.write(b"RFSPARSE" + struct.pack("<QQ", len(data), len(records)))
        out.writelines(records)


if __name__ == "__main__":
    main()
