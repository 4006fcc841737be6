#!/usr/bin/env bash
# The example car (full Bevy 0.19, a window): installs what the window and the gamepad need on
# Debian (as root, when missing), builds and runs it; arguments go to the car (`--help` lists them).
#
#   bash scripts/car.sh                          # menu: manual, sequential race car or 8HP automatic
#   bash scripts/car.sh --car auto               # straight into the 8HP sedan
#   bash scripts/car.sh --headless --car auto --autopilot --screenshot car.png --frames 150
#
# `--headless` runs it under Xvfb with Mesa's software Vulkan (no GPU, no display needed).
# The first build compiles Bevy's renderer: about 25 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
headless=0
if [ "${1:-}" = "--headless" ]; then headless=1; shift; fi
need="libudev-dev pkg-config libwayland-dev libxkbcommon-dev"
[ $headless = 1 ] && need="$need xvfb xauth mesa-vulkan-drivers"
if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ] && ! dpkg -s $need >/dev/null 2>&1; then
  apt-get update -qq && apt-get install -y -qq $need >/dev/null
fi
cargo build --locked -p driveline_car
target=$(cargo metadata --locked --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
if [ $headless = 1 ]; then
  exec xvfb-run -a -s "-screen 0 1280x720x24" "$target/debug/car" "$@"
fi
exec "$target/debug/car" "$@"
