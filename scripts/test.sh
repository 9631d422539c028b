#!/usr/bin/env bash
# Run the whole test suite: the house checks (formatting, lints, documentation), then unit,
# property, kernel-fixture and end-to-end tests of the binary.
# The kernel-made fixtures are expected at ../shared/fixtures/md (or $URAID_FIXTURES).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v xz >/dev/null || { echo "test: xz not found (run scripts/setup.sh)" >&2; exit 1; }
echo "test: cargo fmt --all --check"
cargo fmt --all --check
echo "test: cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "test: cargo doc --no-deps (warnings are errors)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked
cargo test --workspace --locked "$@"
