#!/usr/bin/env bash
# Install what uraid needs on a Debian machine, build it, and run the built-in example.
# Safe to run again: installed packages and an up-to-date build are left alone.
set -euo pipefail
cd "$(dirname "$0")/.."

# xz-utils unpacks the kernel-made md fixtures the tests use. The NBD and FUSE tests drive real
# clients: libnbd-bin (nbdinfo, nbdcopy), qemu-utils (qemu-img, qemu-io), fio (its nbd engine),
# fuse3 (fusermount3, for mounting without root), e2fsprogs and util-linux (mkfs.ext4, e2fsck,
# losetup, mount). The benchmarks in bench/ (python3) compare uraid with peers: libisal-dev
# (ISA-L, bench/parity.sh), nbdkit beside qemu-nbd (bench/nbd.py), bonnie++ (bench/bonnie.py),
# valgrind (instruction counts of the RAIDframe driver, bench/raidframe-cpu.py), zstd (the
# kernel's mid-reshape images the tests unpack, crates/uraid/tests/testdata/reshape).
# python3-venv holds the virtualenv of the Vinum cross-check (below). The md-oracle installs its
# own packages when first run. libssl-dev (with pkg-config) is the OpenSSL that NBD over TLS
# links; openssl makes the TLS tests' keys and certificates.
packages=(xz-utils ca-certificates gcc pkg-config libssl-dev openssl libnbd-bin qemu-utils fio fuse3
  e2fsprogs util-linux python3 python3-venv libisal-dev nbdkit bonnie++ valgrind zstd)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -q "${missing[@]}"
fi
# The Vinum cross-check (crates/vinum/format/tests/peer_dissect.rs, part of the test suite)
# reads drive images with PyPI's dissect.volume at the versions pinned in its requirements.txt,
# from a virtualenv outside the repository (where the test looks for it). A copy of the
# requirements kept in the virtualenv after a good install says it is up to date; otherwise it
# is made anew.
peer_reqs=crates/vinum/format/tests/peer/requirements.txt
peer_venv="${XDG_CACHE_HOME:-$HOME/.cache}/uraid/peer-venv"
if ! cmp -s "$peer_reqs" "$peer_venv/requirements.txt" ||
  ! "$peer_venv/bin/python" -c 'import dissect.volume' 2>/dev/null; then
  rm -rf "$peer_venv"
  python3 -m venv "$peer_venv"
  "$peer_venv/bin/pip" install -q --disable-pip-version-check -r "$peer_reqs"
  cp "$peer_reqs" "$peer_venv/requirements.txt"
fi
command -v cargo >/dev/null || { echo "setup: cargo not found; install Rust with rustup first" >&2; exit 1; }
# The test suite's house checks need rustfmt and clippy beside the compiler.
for tool in rustfmt cargo-clippy; do
  command -v "$tool" >/dev/null || { echo "setup: $tool not found; add it with 'rustup component add ${tool#cargo-}'" >&2; exit 1; }
done
cargo build --release --locked -p uraid
exec scripts/demo.sh
