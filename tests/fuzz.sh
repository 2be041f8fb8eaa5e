#!/usr/bin/env bash
# Fuzzes every parser that reads what rlbd does not control, with libFuzzer and AddressSanitizer
# (fuzz/fuzz_targets/): `frame` (captured frames into the client table), `netlink` (rtnetlink
# datagrams through the daemon's framing and link/address/neighbour decoders into the host view),
# `request` (control-socket request lines) and `config` (the TOML configuration loader). Each
# target runs FUZZ_SECONDS (default 60) from its committed seeds (fuzz/seeds/TARGET; the netlink
# ones are real kernel messages, see fuzz/seeds/capture-netlink.py) plus what earlier runs found
# (fuzz/corpus/TARGET, not committed). Any crash fails. FUZZ_TARGETS picks a subset.
#
# Installs cargo-fuzz if missing. cargo-fuzz needs nightly-only flags (-Zsanitizer):
# RUSTC_BOOTSTRAP=1 lets the machine's one stable toolchain accept them, and its rust-std ships
# the ASan runtime.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../fuzz"
secs=${FUZZ_SECONDS:-60}
targets=${FUZZ_TARGETS:-frame netlink request config}
# Unoptimized: it only drives cargo and libFuzzer, and so installs in half the time (30 s).
command -v cargo-fuzz >/dev/null ||
  CARGO_PROFILE_DEV_DEBUG=0 cargo install --locked --quiet --debug cargo-fuzz
export RUSTC_BOOTSTRAP=1
t0=$(date +%s)
cargo fuzz build
echo "fuzz: build took $(( $(date +%s) - t0 )) s"
# Two targets at a time, one per core (the machine CI runs on has two): the same fuzzing in half
# the time. FUZZ_JOBS=1 runs them one after the other.
jobs=${FUZZ_JOBS:-2}
fuzz_one() {
  local t=$1 start status=0
  start=$(date +%s)
  mkdir -p "corpus/$t" "seeds/$t" target
  # The first directory receives new inputs; the seeds are only read.
  cargo fuzz run "$t" "corpus/$t" "seeds/$t" -- -max_total_time="$secs" -print_final_stats=1 \
    >"target/fuzz-$t.log" 2>&1 || status=$?
  echo "$status $(( $(date +%s) - start ))" >"target/fuzz-$t.status"
}
set -- $targets
while [ $# -gt 0 ]; do
  batch=()
  for _ in $(seq "$jobs"); do
    [ $# -gt 0 ] || break
    batch+=("$1")
    shift
  done
  for t in "${batch[@]}"; do fuzz_one "$t" & done
  wait
  for t in "${batch[@]}"; do
    read -r status took <"target/fuzz-$t.status"
    grep -E '^(stat::number_of_executed_units|stat::new_units_added|Done|INFO: seed corpus)' \
      "target/fuzz-$t.log" || true
    if [ "$status" != 0 ]; then
      tail -n 40 "target/fuzz-$t.log" >&2
      echo "fuzz: $t FAILED (exit $status); the input is under fuzz/artifacts/$t/" >&2
      exit 1
    fi
    echo "fuzz: $t ran $took s without a crash"
  done
done
echo "fuzz: all targets ($targets) in $(( $(date +%s) - t0 )) s"
