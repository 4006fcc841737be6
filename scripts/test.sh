#!/usr/bin/env bash
# The README's test command: sets up what it needs, then runs every test and the benches once
# as smoke tests (no timing assertions).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null || { echo "cargo (Rust 1.95) is required" >&2; exit 1; }
cargo test --workspace --locked
cargo test --benches --locked
