#!/bin/sh
# Writes the alert rules read on stdin with every runbook_url under BASE, the address of the
# operations guide (each alert's section is BASE#anchor). packaging/build.sh runs it when
# RLBD_RUNBOOK_BASE is set; the default, in rlbd-rules.yml itself, is the guide the packages
# install (file:///usr/share/doc/rlbd/operations.md).
#   runbook-base.sh https://wiki.example.org/rlbd/operations <rlbd-rules.yml >out.yml
set -eu
base=${1:-}
case "$base" in
*://*) ;;
*) echo "runbook-base.sh: '$base' is not an absolute URL (scheme://...)" >&2; exit 64 ;;
esac
case "$base" in
*'|'* | *'&'* | *'\'* | *'"'* | *'#'* | *' '*)
    echo "runbook-base.sh: '$base' has a character a URL base here may not hold (| & \\ \" # space)" >&2
    exit 64
    ;;
esac
exec sed "s|runbook_url: \"[^\"#]*#|runbook_url: \"$base#|"
