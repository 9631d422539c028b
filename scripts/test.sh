#!/usr/bin/env bash
# Run the whole test suite: unit, property, kernel-fixture and end-to-end tests of the binary.
# The kernel-made fixtures are expected at ../shared/fixtures/md (or $URAID_FIXTURES).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v xz >/dev/null || { echo "test: xz not found (run scripts/setup.sh)" >&2; exit 1; }
cargo test --workspace --locked "$@"
