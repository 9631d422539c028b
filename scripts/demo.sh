#!/usr/bin/env bash
# The built-in example: a RAID-5 array over four temporary files, written, read back, then read
# again with one member gone (rebuilt from parity on the fly).
set -euo pipefail
cd "$(dirname "$0")/.."
uraid=${URAID:-target/release/uraid}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

truncate -s 16M "$dir"/disk{0,1,2,3}.img
"$uraid" create --level=5 --raid-devices=4 --chunk=64K --name=demo "$dir"/disk{0,1,2,3}.img
head -c 10000000 /dev/urandom > "$dir/data"
"$uraid" write --offset=1M "$dir"/disk{0,1,2,3}.img < "$dir/data"
"$uraid" cat --offset=1M --length=10000000 "$dir"/disk{0,1,2,3}.img | cmp - "$dir/data"
echo "demo: read back 10000000 bytes identical"
"$uraid" cat --offset=1M --length=10000000 "$dir"/disk{0,1,3}.img | cmp - "$dir/data"
echo "demo: read back identical with disk2 missing (rebuilt from parity)"
"$uraid" detail "$dir"/disk{0,1,3}.img
