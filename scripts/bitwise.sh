#!/usr/bin/env bash
# Runs every shipped scenario (at 1 ms and 1/60 s) and every shipped vehicle over UDDS and
# US06 (1 ms) with two builds of the `driveline` CLI, and compares the outputs byte for byte.
# Usage: scripts/bitwise.sh OLD_DRIVELINE NEW_DRIVELINE
# Exit 0 when every output is equal; the differing files are listed otherwise.
set -euo pipefail
old=$1
new=$2
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
runs=0
differ=0
compare() {
  runs=$((runs + 1))
  if ! cmp -s "$work/old" "$work/new"; then
    echo "differs: $*"
    differ=$((differ + 1))
  fi
}
for f in $(cd "$root" && find assets/scenarios -name '*.ron' | sort); do
  for dt in 0.001 0.016666666666666666; do
    "$old" simulate "$root/$f" --dt "$dt" --force --out "$work/old" >/dev/null 2>&1 || echo "old failed" >"$work/old"
    "$new" simulate "$root/$f" --dt "$dt" --force --out "$work/new" >/dev/null 2>&1 || echo "new failed" >"$work/new"
    compare "$f at $dt"
  done
done
for v in "$root"/assets/vehicles/*.ron; do
  for cycle in udds us06; do
    "$old" run "$v" --cycle "$cycle" --rate 1000 --force --out "$work/old" >/dev/null 2>&1 || echo "old failed" >"$work/old"
    "$new" run "$v" --cycle "$cycle" --rate 1000 --force --out "$work/new" >/dev/null 2>&1 || echo "new failed" >"$work/new"
    compare "$(basename "$v") over $cycle"
  done
done
echo "$runs runs, $differ differ"
[ "$differ" -eq 0 ]
