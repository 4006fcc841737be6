#!/usr/bin/env bash
# The README's demo command: builds the CLI and runs the CoupledClutches and SimpleGearShift
# scenarios headless, printing the located mode changes and the final speeds, then drives the
# shipped vehicles (launch, synchromesh and dog-box shifts, a hill start) and prints their events,
# prints the 8HP's gear ratios from its tooth counts, and runs the 8HP sedan through eight gears.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --locked --release -p driveline_cli
out=$(mktemp -d)
for s in CoupledClutches SimpleGearShift; do
  ./target/release/driveline simulate "assets/scenarios/msl/$s.ron" --dt 0.001 \
    --out "$out/$s.csv" --events "$out/$s.events.csv"
  echo "== $s: mode changes (time, element, from, to; MSL codes -1 backward, 0 stuck, 1 forward, 2 free)"
  cat "$out/$s.events.csv"
  echo "== $s: last row"
  head -1 "$out/$s.csv" | tr ',' '\n' | paste -d= - <(tail -1 "$out/$s.csv" | tr ',' '\n') | grep -E '^(time|[A-Za-z0-9]+\.w)=' | tr '\n' ' '
  echo
done
echo "CSV written to $out"
echo
echo "== Vehicles: the manual road car, the sequential race car and the diesel truck, headless"
cargo run --locked --release --example drive_car
echo
echo "== ZF 8HP70: gear ratios from the teeth, the connections and the shift matrix"
./target/release/driveline ratios assets/gearboxes/zf_8hp70.ron
echo
echo "== The 8HP sedan at full throttle: every clutch-to-clutch shift's figures"
cargo run --locked --release --example automatic_launch
