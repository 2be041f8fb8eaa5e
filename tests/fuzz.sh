#!/usr/bin/env bash
# Runs the frame-parser/accounting fuzz target (fuzz/) for FUZZ_SECONDS (default 60) with
# libFuzzer and AddressSanitizer; any crash fails. Installs cargo-fuzz if missing. cargo-fuzz
# needs nightly-only flags (-Zsanitizer): RUSTC_BOOTSTRAP=1 lets the machine's one stable
# toolchain accept them, and its rust-std ships the ASan runtime.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../fuzz"
secs=${FUZZ_SECONDS:-60}
command -v cargo-fuzz >/dev/null || cargo install --locked --quiet cargo-fuzz
mkdir -p corpus/frame
export RUSTC_BOOTSTRAP=1
cargo fuzz build frame
start=$(date +%s)
cargo fuzz run frame -- -max_total_time="$secs" -print_final_stats=1 2>&1 | tail -n 15
echo "fuzz: frame ran $(( $(date +%s) - start )) s without a crash"
