#!/usr/bin/env bash
# The soak (issue 14): 200 clients starting and stopping at random (seeded), a port down and up
# every 30 s, a port removed and added back, SIGHUP every minute, traffic only between the
# namespaces it makes. Prints figures; fails on a panic, a dead daemon, a broken lab, or a
# broken rule of rlbd's (a chosen move within a hold-down, a forced move without a failure of the
# client's port, a client left sending to a down port after the second its port failed).
# Figures (tests/soak/figures.py): the daemon's RSS; every client-second without delivery, one
# by one with its cause (the sender, the client's neighbour entry, the state of the port it
# pointed at, the switch's queue drops toward that port); moves per client per hold-down by
# reason (chosen, forced by a port failure) and the moves that break the rules; ARP frames per
# client per minute counted at the switch (average and maximum); panics.
#
#   sudo tests/soak/run.sh            short form, 60 s (what CI runs)
#   sudo tests/soak/run.sh --long     long form, 10 minutes
#   SOAK_SECONDS=N, SOAK_SEED=N       other lengths and seeds
#   SOAK_ARGS=--fixed-order           senders in a fixed order (starves the last clients on a
#                                     congested port; for comparison)
#   python3 tests/soak/figures.py target/soak   the figures of the last run, again
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
secs=${SOAK_SECONDS:-60}
[ "${1:-}" = --long ] && secs=${SOAK_SECONDS:-600}
cargo build --release --quiet --bin rlbd
out=target/soak
rm -rf "$out"
mkdir -p "$out"
python3 tests/soak/soak.py --rlbd "$PWD/target/release/rlbd" --seconds "$secs" \
  --seed "${SOAK_SEED:-14}" --out "$PWD/$out" ${SOAK_ARGS:-}
