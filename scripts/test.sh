#!/usr/bin/env bash
# The README's test command: sets up what it needs, then runs every test and the benches once
# as smoke tests (no timing assertions).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null || { echo "cargo (Rust 1.95) is required" >&2; exit 1; }
# Plots lay out their text with DejaVu Sans; install it when missing (Debian, as root).
if [ ! -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
  apt-get update -qq && apt-get install -y -qq fonts-dejavu-core >/dev/null
fi
# The windowed example car (full Bevy renderer) is checked by clippy in CI, not built here.
cargo test --workspace --exclude driveline_car --locked
cargo test --benches --locked
