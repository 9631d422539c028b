#!/usr/bin/env bash
# An array whose members lived on other hosts, judged by the real kernel afterwards.
#
# Runs crates/uraid/tests/member_hosts.rs (three network namespaces serving a raid5's members
# over nbdkit, qemu-nbd and another uraid; a server killed mid-write, a link cut, a slow link,
# each member taken back) and keeps the member images it ends with. The kernel's md must then
# assemble them, read the sha256 the test computed of everything it wrote, and find
# mismatch_cnt 0 after a check (-S, strict: degraded or unclean counts as a failure).
#
# usage: scripts/oracle/kernel-check-hosts.sh      (as root: the test makes network namespaces)
# env:   MD_ORACLE (default ../shared/tools/md-oracle beside the repository)
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
oracle=${MD_ORACLE:-$repo/../shared/tools/md-oracle}
[ -x "$oracle/check-images.sh" ] || { echo "md-oracle not found at $oracle (set MD_ORACLE)" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "run as root: the test makes network namespaces" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$repo" && URAID_KEEP_MEMBERS="$work/members" cargo test --release -q -p uraid --test member_hosts -- --nocapture)
[ -f "$work/members/array.sha256" ] || { echo "FAIL: the test kept no members (was it skipped?)" >&2; exit 1; }
want=$(cat "$work/members/array.sha256")
rm "$work/members/array.sha256"
if out=$("$oracle/check-images.sh" -J -S -e "$want" "$work/members" 2>&1); then
  echo "PASS member-hosts ($(echo "$out" | grep -m1 -o 'mismatch_cnt[^,]*'))"
else
  echo "FAIL member-hosts"; echo "$out" | tail -30 | sed 's/^/    /'; exit 1
fi
