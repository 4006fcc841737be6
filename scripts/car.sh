#!/usr/bin/env bash
# The example car (full Bevy 0.19, a window): installs what the window and the gamepad need on
# Debian (as root, when missing), builds and runs it; arguments go to the car (`--help` lists them).
#
#   bash scripts/car.sh                          # menu: manual, sequential race car or 8HP automatic
#   bash scripts/car.sh --car auto               # straight into the 8HP sedan
#   bash scripts/car.sh --headless --car auto --autopilot --screenshot car.png --frames 150
#   bash scripts/car.sh --avian --car auto --hz 60   # the avian3d rigid-body car on its terrain
#
# `--headless` runs it under Xvfb with Mesa's software Vulkan (no GPU, no display needed);
# `--avian` runs examples/avian_car instead (the two options first, in either order).
# The first build compiles Bevy's renderer: about 17 minutes on 2 cores (the avian car about 19).
set -euo pipefail
cd "$(dirname "$0")/.."
headless=0
package=driveline_car
bin=car
for _ in 1 2; do
  case "${1:-}" in
    --headless) headless=1; shift ;;
    --avian) package=driveline_avian_car; bin=avian_car; shift ;;
  esac
done
need="libudev-dev pkg-config libwayland-dev libxkbcommon-dev"
[ $headless = 1 ] && need="$need xvfb xauth mesa-vulkan-drivers"
if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ] && ! dpkg -s $need >/dev/null 2>&1; then
  apt-get update -qq && apt-get install -y -qq $need >/dev/null
fi
cargo build --locked -p "$package"
target=$(cargo metadata --locked --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
if [ $headless = 1 ]; then
  exec xvfb-run -a -s "-screen 0 1280x720x24" "$target/debug/$bin" "$@"
fi
exec "$target/debug/$bin" "$@"
