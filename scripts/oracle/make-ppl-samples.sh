#!/usr/bin/env bash
# Make the PPL samples of crates/md/format/tests/data/ppl with the real kernel and mdadm.
#
# Boots the md-oracle VM (Linux 6.1 + mdadm 4.2) once and runs guest-ppl-samples.sh there: raid5
# arrays created with `mdadm --create --consistency-policy=ppl` (metadata 1.0, 1.1, 1.2; 24 MiB
# members, chunk 64K, fixed --uuid, --name and --homehost=oracle). Only each member's metadata
# region (superblock, PPL area, bad-block log) is kept, xz-compressed, with mdadm --examine.
#
# usage: scripts/oracle/make-ppl-samples.sh [OUTDIR]   (default crates/md/format/tests/data/ppl)
# env: MD_ORACLE = the md-oracle folder (default ../shared/tools/md-oracle next to the repo)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
oracle=${MD_ORACLE:-$repo/../shared/tools/md-oracle}
outdir=${1:-$repo/crates/md/format/tests/data/ppl}
[ -x "$oracle/run-vm.sh" ] || { echo "md-oracle not found at $oracle (set MD_ORACLE)" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$oracle/run-vm.sh" -t 1200 -o "$work/out" "$here/guest-ppl-samples.sh"
mkdir -p "$outdir"
for case_dir in "$work/out"/raid5-*; do
  name=$(basename "$case_dir")
  rm -rf "${outdir:?}/$name"
  cp -r "$case_dir" "$outdir/$name"
  find "$outdir/$name" -name '*.meta' -exec xz -9 {} +
done
cp "$work/out/versions.txt" "$outdir/versions.txt"
echo "samples written to $outdir"
