# Sourced by the kernel checks: where the repository, the md-oracle and uraid are, with uraid
# built (release) if missing and the oracle's mdpattern tool set up.
#
# env: URAID (default target/release/uraid), MD_ORACLE (default ../shared/tools/md-oracle
#      beside the repository), MD_ORACLE_CACHE (default ~/.cache/md-oracle)
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
oracle=${MD_ORACLE:-$repo/../shared/tools/md-oracle}
uraid=${URAID:-$repo/target/release/uraid}
[ -x "$oracle/run-vm.sh" ] || { echo "md-oracle not found at $oracle (set MD_ORACLE)" >&2; exit 2; }
if [ ! -x "$uraid" ]; then (cd "$repo" && cargo build --release -q -p uraid); fi
mdpattern=${MD_ORACLE_CACHE:-$HOME/.cache/md-oracle}/mdpattern
[ -x "$mdpattern" ] || "$oracle/setup.sh" >/dev/null
