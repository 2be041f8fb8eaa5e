#!/usr/bin/env bash
# Checks of the monitoring files the packages install under /usr/share/rlbd/:
#   packaging/monitoring/rlbd-rules.yml      `promtool check rules`, then `promtool test rules`
#                                            with packaging/monitoring/rlbd-rules.test.yml (each
#                                            alert fires on its trouble, not on a healthy daemon)
#   packaging/monitoring/rlbd-dashboard.json validated against the JSON schema
#                                            packaging/monitoring/dashboard.schema.json, then
#                                            tests/monitoring/check_dashboard.py's cross-checks
# and, for both, that every rlbd_* metric they use is one that the daemon exports (the names in
# src/metrics/, its tests aside); and that every alert's runbook_url is absolute, to a section of
# docs/operations.md, and moved whole to another base by packaging/monitoring/runbook-base.sh.
#
# promtool comes from Debian's prometheus package, downloaded (never installed) through the
# private apt configuration of tests/lib/debian.sh and unpacked into tests/monitoring/cache/;
# the Python jsonschema module is installed with pip when missing. Run as root (apt); CI runs it
# from tests/run-all.sh.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
CACHE="$HERE/cache"
LAB_NAME=monitoring
# shellcheck source=tests/lib/debian.sh
. "$HERE/../lib/debian.sh"
MON="$REPO/packaging/monitoring"

passed=0
failed=0
check() { # check DESCRIPTION COMMAND...
    local what=$1
    shift
    if "$@"; then
        passed=$((passed + 1))
        printf 'ok   %s\n' "$what"
    else
        failed=$((failed + 1))
        printf 'FAIL %s\n' "$what"
    fi
}

mkdir -p "$CACHE"
PROMTOOL="$CACHE/prometheus/usr/bin/promtool"
if [ ! -x "$PROMTOOL" ]; then
    log "downloading Debian's prometheus package for promtool"
    rm -rf "$CACHE/debs" "$CACHE/prometheus"
    private_apt_download "$CACHE/debs" prometheus
    dpkg-deb -x "$CACHE"/debs/prometheus_*.deb "$CACHE/prometheus"
    rm -rf "$CACHE/debs"
    [ -x "$PROMTOOL" ] || die "no usr/bin/promtool in Debian's prometheus package"
fi
"$PROMTOOL" --version 2>&1 | head -n1
if ! python3 -c 'import jsonschema' 2>/dev/null; then
    log "installing the Python jsonschema module (pip)"
    python3 -m pip install --quiet jsonschema || die "pip install jsonschema failed"
fi

# The metric families the daemon exports, from the renderer's string literals.
grep -ohE '"rlbd_[a-z_]+"' "$REPO/src/metrics/mod.rs" "$REPO/src/metrics/families.rs" | tr -d '"' | sort -u >"$CACHE/exported"
echo "exported metrics: $(wc -l <"$CACHE/exported")"
uses_only_exported() { # $1: file; every rlbd_* name in it is exported
    local unknown
    unknown=$(grep -oE 'rlbd_[a-z_]+' "$1" | sort -u | grep -vxF -f "$CACHE/exported" || true)
    [ -z "$unknown" ] || { echo "  not exported by rlbd: $unknown"; return 1; }
}

check "promtool check rules rlbd-rules.yml" "$PROMTOOL" check rules "$MON/rlbd-rules.yml"
check "promtool test rules rlbd-rules.test.yml" bash -c "cd '$MON' && '$PROMTOOL' test rules rlbd-rules.test.yml"
check "the rules use only metrics rlbd exports" uses_only_exported "$MON/rlbd-rules.yml"
alerts=$(grep -oE '^ *- alert: [A-Za-z]+' "$MON/rlbd-rules.yml" | awk '{ print $3 }')
for a in $alerts; do
    check "rule $a has a unit test" grep -q "alertname: $a\$" "$MON/rlbd-rules.test.yml"
done
# Runbook URLs: absolute, all under one base (the guide the packages install, by default), each
# to a heading of docs/operations.md that exists; runbook-base.sh moves them all to another base.
DEFAULT_BASE=file:///usr/share/doc/rlbd/operations.md
runbooks_resolve() { # $1: rules file
    local urls bad="" u anchor
    urls=$(sed -n 's/^ *runbook_url: "\(.*\)"$/\1/p' "$1")
    [ "$(wc -l <<<"$urls")" = "$(grep -c '^ *- alert: ' "$1")" ] || { echo "  not one runbook_url per alert"; return 1; }
    for u in $urls; do
        anchor=${u#"$DEFAULT_BASE#"}
        [ "$anchor" != "$u" ] || { bad+=" $u"; continue; }
        # GitHub-style anchors of the guide's "### Name" headings: lower case.
        grep -qiE "^### ${anchor}\$" "$REPO/docs/operations.md" || bad+=" $u"
    done
    [ -z "$bad" ] || { echo "  runbook URLs not absolute under $DEFAULT_BASE or to no heading:$bad"; return 1; }
}
runbooks_rebased() {
    local out base=https://wiki.example.org/rlbd/operations
    out=$("$REPO/packaging/monitoring/runbook-base.sh" "$base" <"$MON/rlbd-rules.yml")
    [ "$(grep -c "runbook_url: \"$base#rlbd[a-z]*\"" <<<"$out")" = "$(grep -c '^ *- alert: ' "$MON/rlbd-rules.yml")" ] &&
        ! grep -q "runbook_url: \"$DEFAULT_BASE" <<<"$out" &&
        [ "$(grep -v runbook_url <<<"$out")" = "$(grep -v runbook_url "$MON/rlbd-rules.yml")" ] &&
        ! "$REPO/packaging/monitoring/runbook-base.sh" docs/operations.md <"$MON/rlbd-rules.yml" >/dev/null 2>&1
}
check "every alert's runbook_url is absolute and names a section of docs/operations.md" runbooks_resolve "$MON/rlbd-rules.yml"
check "runbook-base.sh moves every runbook URL to another base, and refuses a relative one" runbooks_rebased
check "dashboard: schema and cross-checks" python3 "$HERE/check_dashboard.py" "$MON/rlbd-dashboard.json" \
    "$MON/dashboard.schema.json" --rules-out "$CACHE/dashboard-queries.yml"
check "dashboard: every query parses as PromQL (promtool)" "$PROMTOOL" check rules "$CACHE/dashboard-queries.yml"
check "the dashboard uses only metrics rlbd exports" uses_only_exported "$MON/rlbd-dashboard.json"

echo "monitoring: $passed passed, $failed failed"
[ "$failed" = 0 ]
