#!/usr/bin/env python3
"""Write the test pattern: every 512-byte RAID sector names its set and its own sector number.

Each sector is 32 records of 16 bytes: TAG, " s", the sector number in 7 decimal digits,
spaces to 15 bytes, and a newline. Usage: pattern.py TAG FIRST_SECTOR COUNT OUTPUT
"""
import sys


def sector(tag, number):
    record = f"{tag} s{number:07d}".ljust(15).encode() + b"\n"
    assert len(record) == 16
    return record * 32


def main():
    tag, first, count, dst = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    with open(dst, "wb") as out:
        for n in range(first, first + count):
            out.write(sector(tag, n))


if __name__ == "__main__":
    main()
