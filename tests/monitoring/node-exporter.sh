#!/usr/bin/env bash
# Prints the path of a prometheus-node-exporter binary for tests/two_daemons.rs: the machine's
# own when installed, else Debian's package downloaded (never installed) through the private
# apt configuration of tests/lib/debian.sh and unpacked into tests/monitoring/cache/. Run as
# root (apt). Progress goes to stderr; stdout is the path alone.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE="$HERE/cache"
LAB_NAME=node-exporter
# shellcheck source=tests/lib/debian.sh
. "$HERE/../lib/debian.sh"

if command -v prometheus-node-exporter >/dev/null; then
    command -v prometheus-node-exporter
    exit 0
fi
BIN="$CACHE/node-exporter/usr/bin/prometheus-node-exporter"
if [ ! -x "$BIN" ]; then
    log "downloading Debian's prometheus-node-exporter package" >&2
    mkdir -p "$CACHE"
    rm -rf "$CACHE/debs-ne" "$CACHE/node-exporter"
    private_apt_download "$CACHE/debs-ne" prometheus-node-exporter >&2
    dpkg-deb -x "$CACHE"/debs-ne/prometheus-node-exporter_*.deb "$CACHE/node-exporter"
    rm -rf "$CACHE/debs-ne"
    [ -x "$BIN" ] || die "no usr/bin/prometheus-node-exporter in Debian's package"
fi
echo "$BIN"
