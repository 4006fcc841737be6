#!/usr/bin/env bash
# The README's test command: sets up what it needs, then runs every test and the benches once
# as smoke tests (no timing assertions).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null || { echo "cargo (Rust 1.95) is required" >&2; exit 1; }
# System packages, installed when missing (Debian, as root): gilrs (the gamepad crate) links
# udev through pkg-config, and plots lay out their text with DejaVu Sans.
need="libudev-dev pkg-config fonts-dejavu-core"
if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ] && ! dpkg -s $need >/dev/null 2>&1; then
  apt-get update -qq && apt-get install -y -qq $need >/dev/null
fi
# The windowed example car (full Bevy renderer) is checked by clippy in CI, not built here.
start=$(date +%s)
cargo test --workspace --exclude driveline_car --exclude driveline_avian_car --locked
echo "test.sh: tests done at $(( $(date +%s) - start )) s"
cargo test --benches --locked
echo "test.sh: benches done at $(( $(date +%s) - start )) s"
# The plugin's headless examples, which check what they print (a run is a few seconds each).
for example in coupled_clutches inspector_tweaks launch_control custom_shift_strategy; do
  cargo run --locked --quiet --example "$example" >/dev/null
done
