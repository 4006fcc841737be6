#!/usr/bin/env bash
# The README's demo command: builds the CLI and the two demo programs first, then prints a report:
# the MSL CoupledClutches and SimpleGearShift examples (their located mode changes and final speeds),
# the shipped manual, sequential and diesel vehicles driven headless (launch, synchromesh and dog-box
# shifts, a hill start), the ZF 8HP70's gear ratios from its tooth counts, and the 8HP sedan at full
# throttle through eight gears. Works with any cargo target directory (CARGO_TARGET_DIR included).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null || { echo "cargo (Rust 1.95) is required" >&2; exit 1; }

echo "Building the driveline CLI and the demo programs (release; the first build takes a few minutes)..."
cargo build --locked --release --quiet -p driveline_cli
cargo build --locked --release --quiet -p driveline --example drive_car --example automatic_launch
target=$(cargo metadata --locked --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
bin="$target/release"
[ -x "$bin/driveline" ] || { echo "demo: no driveline binary in $bin" >&2; exit 1; }
out=$(mktemp -d)

# MSL mode codes in words.
mode_words='function m(c) { return c == -1 ? "sliding backward" : c == 0 ? "stuck" : c == 1 ? "sliding forward" : "free" }'

for s in CoupledClutches SimpleGearShift; do
  "$bin/driveline" simulate "assets/scenarios/msl/$s.ron" --dt 0.001 \
    --out "$out/$s.csv" --events "$out/$s.events.csv"
  echo
  echo "== MSL $s at 1 ms steps: mode changes, located inside the step"
  awk -F, "$mode_words"' NR > 1 { printf "  %10.6f s  %-10s %s -> %s\n", $1, $2, m($3), m($4) }' "$out/$s.events.csv"
  echo "   final speeds:"
  paste -d, <(head -1 "$out/$s.csv" | tr ',' '\n') <(tail -1 "$out/$s.csv" | tr ',' '\n') |
    awk -F, '$1 == "time" { printf "     at %.2f s:", $2 } $1 ~ /\.w$/ { n = $1; sub(/\.w$/, "", n); printf "  %s %.3f rad/s", n, $2 } END { print "" }'
done
echo
echo "   (full CSVs in $out)"

echo
echo "== Vehicles driven headless: the manual road car, the sequential race car, the diesel truck"
"$bin/examples/drive_car"

echo
echo "== ZF 8HP70: gear ratios from the tooth counts, the connections and the shift matrix"
"$bin/driveline" ratios assets/gearboxes/zf_8hp70.ron | awk -F, 'NR == 1 { next } { printf "  %-3s %8.3f\n", $1, $2 }'

echo
echo "== The 8HP sedan at full throttle: every clutch-to-clutch shift"
"$bin/examples/automatic_launch"
