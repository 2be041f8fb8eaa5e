#!/usr/bin/env bash
# Packaging test: builds the .deb and .rpm (packaging/build.sh), lints the man pages and checks
# they cover every option and configuration key, checks the example configuration, installs the
# .deb on this machine, checks every file, `rlbd --version`, the user and group rlbd, the shell
# completions (bash run, zsh and fish read), the unit (`systemd-analyze verify` and
# `systemd-analyze security` score <= 1.5) and that rlbd runs unprivileged with CAP_NET_RAW
# alone, removes and purges it, checks the .rpm's file list and scriptlets, and runs lintian.
#
# Run as root on a fresh Debian/Ubuntu machine with the Rust toolchain; it installs what it needs.
# systemd need not be running (PID 1 may be anything): every systemd check here is offline.
# tests/run-all.sh calls it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

MAX_EXPOSURE=1.5
passed=0
failed=0
step() { printf '\n--- %s\n' "$*"; }
ok() {
  passed=$((passed + 1))
  printf 'ok   %s\n' "$*"
}
bad() {
  failed=$((failed + 1))
  printf 'FAIL %s\n' "$*"
}
check() { # check DESCRIPTION COMMAND...
  local what=$1
  shift
  if "$@"; then ok "$what"; else bad "$what"; fi
}

if [ "$(id -u)" != 0 ]; then
  echo "tests/packaging/run.sh: run as root (it installs and removes the package)" >&2
  exit 1
fi

step "dependencies"
need=()
command -v mandoc >/dev/null || need+=(mandoc)
command -v man >/dev/null || need+=(man-db) # systemd-analyze verify checks Documentation=man:
command -v systemd-analyze >/dev/null || need+=(systemd)
command -v rpm >/dev/null || need+=(rpm)
command -v rpm2cpio >/dev/null || need+=(rpm2cpio) # to read files out of the .rpm
command -v cpio >/dev/null || need+=(cpio)
command -v lintian >/dev/null || need+=(lintian)
command -v setpriv >/dev/null || need+=(util-linux)
command -v ip >/dev/null || need+=(iproute2)
command -v gzip >/dev/null || need+=(gzip)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

tmp=$(mktemp -d)
netns=rlbd-pkg-$$
# The package's postinst makes the system user rlbd, which purge keeps: remove it afterwards
# when this machine had none before.
had_user=0
getent passwd rlbd >/dev/null && had_user=1
cleanup() {
  ip netns del "$netns" 2>/dev/null || true
  rm -rf "$tmp"
  if dpkg-query -W -f='${Status}' rlbd 2>/dev/null | grep -q 'install ok\|config-files'; then
    dpkg -P rlbd >/dev/null 2>&1 || true
  fi
  if [ "$had_user" = 0 ]; then
    userdel rlbd 2>/dev/null || true
    groupdel rlbd 2>/dev/null || true
  fi
}
trap cleanup EXIT

step "build the packages"
packaging/build.sh >"$tmp/packages"
deb=$(sed -n 1p "$tmp/packages")
rpm_file=$(sed -n 2p "$tmp/packages")
test -f "$deb" && test -f "$rpm_file"
echo "deb: $deb"
echo "rpm: $rpm_file"
version=$(sed -n 's/^version *= *"\(.*\)"/\1/p' Cargo.toml | head -n1)
bin=target/release/rlbd

step "man pages: lint"
for page in man/rlbd.8 man/rlbd.toml.5; do
  out=$(mandoc -T lint -W style "$page" 2>&1 || true)
  out+=$(groff -ww -man -z "$page" 2>&1 || true)
  if [ -z "$out" ]; then ok "lint $page: no output"; else
    printf '%s\n' "$out"
    bad "lint $page"
  fi
done

step "man pages: every subcommand and long option of rlbd appears in rlbd.8"
# Visible subcommands, from the "Commands:" block of `rlbd --help`.
mapfile -t subs < <("$bin" --help | awk '/^Commands:/ {on=1; next} on && /^$/ {on=0} on {print $1}' | grep -vx help)
echo "subcommands: ${subs[*]}"
check "rlbd --help lists subcommands" test ${#subs[@]} -ge 4
# roff writes a hyphen in an option as \- : look for that form in the source.
roff() { printf '%s' "${1//-/\\-}"; }
for sub in "${subs[@]}"; do
  if grep -qF -- ".B $(roff "$sub")" man/rlbd.8 || grep -qF -- ".BR $(roff "$sub")" man/rlbd.8 || grep -qF -- ".BI $(roff "$sub")" man/rlbd.8; then
    ok "rlbd.8 documents subcommand $sub"
  else bad "rlbd.8 documents subcommand $sub"; fi
  mapfile -t opts < <("$bin" "$sub" --help | grep -oE '^ +(-[a-zA-Z], )?--[a-z][a-z0-9-]*' | grep -oE -- '--[a-z][a-z0-9-]*' | grep -vx -- '--help' | sort -u)
  echo "rlbd $sub: ${opts[*]:-(no options)}"
  for opt in "${opts[@]}"; do
    check "rlbd.8 documents rlbd $sub $opt" grep -qF -- "$(roff "$opt")" man/rlbd.8
  done
done
check "rlbd.8 documents --version" grep -qF -- '\-\-version' man/rlbd.8

step "rlbd.toml.5 and packaging/rlbd.toml: every key of the effective settings"
check "check-config accepts packaging/rlbd.toml as shipped" "$bin" check-config packaging/rlbd.toml
"$bin" check-config packaging/rlbd.toml >"$tmp/shipped.out"
printf 'bond = "bond0"\n' >"$tmp/bond.toml"
printf 'ports = ["eth0", "eth1"]\n' >"$tmp/ports.toml"
: >"$tmp/empty.toml"
# Keys without a default are printed only when set: set each once.
printf '[observability]\ncontrol_socket = "/run/rlbd/x.sock"\nmetrics_file = "/run/rlbd/x.prom"\n' >"$tmp/obs.toml"
{
  "$bin" check-config "$tmp/empty.toml"
  "$bin" check-config "$tmp/bond.toml"
  "$bin" check-config "$tmp/ports.toml"
  "$bin" check-config "$tmp/obs.toml"
} >"$tmp/effective.out"
mapfile -t keys < <(grep -oE '^[a-z_]+ =' "$tmp/effective.out" | sed 's/ =$//' | sort -u)
mapfile -t sections < <(grep -oE '^\[[a-z_]+\]' "$tmp/effective.out" | sort -u)
echo "keys: ${keys[*]}"
echo "sections: ${sections[*]}"
check "check-config printed keys" test ${#keys[@]} -ge 10
for key in "${keys[@]}"; do
  check "rlbd.toml.5 documents $key" grep -qE "^\.(B|BR|BI|IB|I) $key( |\$)" man/rlbd.toml.5
  check "packaging/rlbd.toml shows $key" grep -qE "^#$key = " packaging/rlbd.toml
done
for sec in "${sections[@]}"; do
  check "rlbd.toml.5 documents section $sec" grep -qF -- "$sec" man/rlbd.toml.5
  check "packaging/rlbd.toml has section $sec" grep -qxF -- "$sec" packaging/rlbd.toml
done
# Each commented default, uncommented, must give exactly the built-in defaults (bond, ports and
# the example capacities are not defaults and stay commented).
mapfile -t dkeys < <("$bin" check-config "$tmp/empty.toml" | grep -oE '^[a-z_]+ =' | sed 's/ =$//')
pattern=$(
  IFS='|'
  echo "${dkeys[*]}"
)
sed -E "s/^#(($pattern) = )/\\1/" packaging/rlbd.toml >"$tmp/uncommented.toml"
"$bin" check-config "$tmp/uncommented.toml" | tail -n +2 >"$tmp/uncommented.out"
"$bin" check-config "$tmp/empty.toml" | tail -n +2 >"$tmp/defaults.out"
if diff -u "$tmp/defaults.out" "$tmp/uncommented.out"; then
  ok "packaging/rlbd.toml uncommented = built-in defaults"
else bad "packaging/rlbd.toml uncommented = built-in defaults"; fi

step "install the .deb"
if dpkg-query -W rlbd >/dev/null 2>&1; then dpkg -P rlbd >/dev/null; fi
echo "deb file list (dpkg-deb -c):"
dpkg-deb -c "$deb"
mapfile -t deb_files < <(dpkg-deb -c "$deb" | awk '$1 !~ /^d/ {print $6}' | sed 's|^\./|/|')
# Both packages put the unit under /usr/lib (lintian's aliased-location: not the /lib alias).
unit_dir=/usr/lib/systemd/system
expected_deb=(/usr/sbin/rlbd "$unit_dir/rlbd@.service" /usr/share/man/man8/rlbd.8.gz
  /usr/share/man/man5/rlbd.toml.5.gz /etc/rlbd/rlbd.toml /usr/share/doc/rlbd/copyright
  /usr/share/doc/rlbd/changelog.Debian.gz /usr/share/doc/rlbd/README.md /usr/share/doc/rlbd/operations.md
  /usr/lib/sysusers.d/rlbd.conf /usr/share/bash-completion/completions/rlbd
  /usr/share/zsh/vendor-completions/_rlbd /usr/share/fish/vendor_completions.d/rlbd.fish
  /usr/share/rlbd/rlbd-dashboard.json /usr/share/rlbd/rlbd-rules.yml
  /usr/share/doc/rlbd/LICENSE-MIT /usr/share/doc/rlbd/LICENSE-APACHE)
for f in "${expected_deb[@]}"; do
  check "deb contains $f" grep -qxF -- "$f" <(printf '%s\n' "${deb_files[@]}")
done
check "deb contains only the expected files" test ${#deb_files[@]} -eq ${#expected_deb[@]}
check "dpkg -i" dpkg -i "$deb"
for f in "${deb_files[@]}"; do
  check "installed $f" test -f "$f"
done
check "/usr/sbin/rlbd is executable" test -x /usr/sbin/rlbd
# The product ships only the product: the labs' tooling lives in the test-only rlbd-lab binary.
check "installed rlbd has exactly the product's subcommands" test \
  "$(/usr/sbin/rlbd --help | awk '/^Commands:/ {on=1; next} on && /^$/ {on=0} on {print $1}' | grep -vx help | sort | tr '\n' ' ')" = \
  "check-config demo metrics reload run simulate status "
for sub in lab-sink lab-source lab-flood lab-chart sink source flood chart; do
  check "installed rlbd refuses lab subcommand $sub" bash -c "! /usr/sbin/rlbd $sub --help >/dev/null 2>&1"
done
check "the deb installs no rlbd-lab" bash -c "! dpkg -L rlbd | grep -q rlbd-lab"
check "/etc/rlbd/rlbd.toml is a conffile" grep -q '^ /etc/rlbd/rlbd.toml ' <(dpkg-query -W -f='${Conffiles}\n' rlbd)
got_version=$(/usr/sbin/rlbd --version)
echo "rlbd --version: $got_version"
check "rlbd --version is rlbd $version" test "$got_version" = "rlbd $version"
check "installed rlbd.8.gz is man/rlbd.8" cmp -s <(zcat /usr/share/man/man8/rlbd.8.gz) man/rlbd.8
check "installed rlbd.toml.5.gz is man/rlbd.toml.5" cmp -s <(zcat /usr/share/man/man5/rlbd.toml.5.gz) man/rlbd.toml.5
check "man finds rlbd(8)" man -w 8 rlbd
check "man finds rlbd.toml(5)" man -w 5 rlbd.toml
check "installed /etc/rlbd/rlbd.toml is valid" /usr/sbin/rlbd check-config /etc/rlbd/rlbd.toml
check "installed unit is systemd/rlbd@.service" cmp -s "$unit_dir/rlbd@.service" systemd/rlbd@.service
for l in LICENSE-MIT LICENSE-APACHE; do
  check "installed /usr/share/doc/rlbd/$l is the source's $l" cmp -s "/usr/share/doc/rlbd/$l" "$l"
done
check "installed monitoring files are packaging/monitoring's" \
  cmp -s /usr/share/rlbd/rlbd-rules.yml packaging/monitoring/rlbd-rules.yml
check "postinst made the system group rlbd (operators)" getent group rlbd
# shellcheck disable=SC2016 # expanded by the inner shell
check "postinst made the system user rlbd (no login)" \
  bash -c '[ "$(getent passwd rlbd | cut -d: -f7)" = /usr/sbin/nologin ] && [ "$(id -u rlbd)" -lt 1000 ]'

step "shell completions"
# Generated from the clap definitions: every visible subcommand is offered, hidden ones are not.
complete_bash() { # words... -> the candidates bash offers for the last word
  bash -c 'source /usr/share/bash-completion/completions/rlbd
    COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
    _rlbd rlbd "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
    printf "%s\n" "${COMPREPLY[@]}"' _ "$@"
}
bash_subs=$(complete_bash rlbd '' | sort | tr '\n' ' ')
echo "bash offers after 'rlbd ': $bash_subs"
for sub in "${subs[@]}"; do
  check "bash completion offers subcommand $sub" grep -qw -- "$sub" <<<"$bash_subs"
  check "zsh completion knows subcommand $sub" grep -q "'$sub:" /usr/share/zsh/vendor-completions/_rlbd
  check "fish completion knows subcommand $sub" grep -qE -- "-a \"$sub\"|-a '$sub'" /usr/share/fish/vendor_completions.d/rlbd.fish
done
# shellcheck disable=SC2016 # expanded by the inner shell
check "bash completion hides the lab and completions subcommands" \
  bash -c '! grep -qwE "completions|lab-sink|lab-source|lab-flood|lab-chart" <<<"$1"' _ "$bash_subs"
check "bash completion offers run's options" grep -qw -- --bond <(complete_bash rlbd run --b)
check "zsh completion file is a #compdef for rlbd" grep -qx '#compdef rlbd' /usr/share/zsh/vendor-completions/_rlbd
check "fish completion completes the command rlbd" grep -q '^complete -c rlbd ' /usr/share/fish/vendor_completions.d/rlbd.fish

step "the unit: systemd-analyze verify (offline) and security"
unit=$unit_dir/rlbd@.service
check "unit: Type=notify" grep -qx 'Type=notify' "$unit"
check "unit: RestartPreventExitStatus=64 78" grep -qx 'RestartPreventExitStatus=64 78' "$unit"
check "unit: Restart=on-failure" grep -qx 'Restart=on-failure' "$unit"
check "unit: WatchdogSec= set" grep -qE '^WatchdogSec=[1-9]' "$unit"
check "unit: PrivateNetwork= not set" bash -c "! grep -q '^PrivateNetwork' '$unit'"
check "unit: CapabilityBoundingSet=CAP_NET_RAW CAP_NET_ADMIN CAP_BPF" grep -qx 'CapabilityBoundingSet=CAP_NET_RAW CAP_NET_ADMIN CAP_BPF' "$unit"
check "unit: bpf(2) allowed after the @privileged deny list" \
  awk '/^SystemCallFilter=~@privileged/ { d = NR } /^SystemCallFilter=bpf$/ { b = NR } END { exit !(d && b > d) }' "$unit"
check "unit: runs as the package's user and group rlbd" bash -c "grep -qx 'User=rlbd' '$unit' && grep -qx 'Group=rlbd' '$unit'"
# DynamicUser= would put /run/rlbd under /run/private (root only): no operator could ask rlbd.
check "unit: no DynamicUser= (operators reach /run/rlbd)" bash -c "! grep -q '^DynamicUser=yes' '$unit'"
check "unit: enabled instances start when their bond appears" \
  bash -c "grep -qx 'WantedBy=sys-subsystem-net-devices-%i.device' '$unit' && grep -qx 'After=sys-subsystem-net-devices-%i.device' '$unit'"
# %i (escaped: bond\x2dsan) names the device unit; rlbd gets the bond's own name, %I (bond-san).
check "unit: ExecStart runs /usr/sbin/rlbd run --bond %I (unescaped)" grep -qx 'ExecStart=/usr/sbin/rlbd run --bond %I' "$unit"
check "unit: ExecReload runs /usr/sbin/rlbd reload %I (unescaped)" grep -qx 'ExecReload=/usr/sbin/rlbd reload %I' "$unit"
check "unit: no %i passed to rlbd" bash -c "! grep -E '^Exec.*%i' '$unit'"
# verify loads the template as instance rlbd@i, needs no running systemd, checks the ExecStart
# binaries and the man pages of Documentation= (installed above).
if systemd-analyze verify "$unit" >"$tmp/verify.out" 2>&1 && [ ! -s "$tmp/verify.out" ]; then
  ok "systemd-analyze verify $unit"
else
  cat "$tmp/verify.out"
  bad "systemd-analyze verify $unit"
fi
# The instance of a bond named bond-san is rlbd@bond\x2dsan (systemd-escape): verify loads it
# beside a link to the template and, at debug level, prints the unit as it expanded it.
mkdir -p "$tmp/units"
ln -s "$unit" "$tmp/units/rlbd@.service"
SYSTEMD_LOG_LEVEL=debug systemd-analyze verify "$tmp/units/rlbd@bond\x2dsan.service" >"$tmp/san.out" 2>&1 || true
grep -E 'Command Line: /usr/sbin/rlbd|sys-subsystem-net-devices-bond' "$tmp/san.out" || true
check "unit rlbd@bond\\x2dsan runs rlbd run --bond bond-san" grep -qF 'Command Line: /usr/sbin/rlbd run --bond bond-san' "$tmp/san.out"
check "unit rlbd@bond\\x2dsan reloads with rlbd reload bond-san" grep -qF 'Command Line: /usr/sbin/rlbd reload bond-san' "$tmp/san.out"
check "unit rlbd@bond\\x2dsan starts after sys-subsystem-net-devices-bond\\x2dsan.device" \
  grep -qF 'After: sys-subsystem-net-devices-bond\x2dsan.device' "$tmp/san.out"
check "rlbd run --bond 'bond\\x2dsan' exits 78 with the enable line" bash -c \
  "out=\$(/usr/sbin/rlbd run --bond 'bond\\x2dsan' --config /dev/null 2>&1); [ \$? = 78 ] && [[ \$out == *'systemctl enable \"rlbd@\$(systemd-escape bond-san)\"'* ]]"
systemd-analyze security --offline=yes --no-pager "$unit" >"$tmp/security.out" 2>&1 || true
grep -E '^✗|Overall' "$tmp/security.out" || cat "$tmp/security.out"
score=$(sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p' "$tmp/security.out")
echo "systemd-analyze security score: ${score:-none} (limit $MAX_EXPOSURE)"
check "security exposure ${score:-none} <= $MAX_EXPOSURE" awk -v s="${score:-99}" -v m="$MAX_EXPOSURE" 'BEGIN { exit !(s != "" && s <= m) }'

step "the unit's ExecStart reads /etc/rlbd/BOND.toml when it exists"
# rlbd itself picks /etc/rlbd/BOND.toml, then /etc/rlbd/rlbd.toml, when no --config is given.
mkdir -p /etc/rlbd
printf '[policy]\nthreshold = 0.9\n[capacity]\nnot-a-port-x = 5\n' >/etc/rlbd/rlbd-pkg-x.toml
out=$(/usr/sbin/rlbd run --bond rlbd-pkg-x 2>&1 || true)
echo "rlbd run --bond rlbd-pkg-x with /etc/rlbd/rlbd-pkg-x.toml: $out"
check "a valid per-bond file is accepted (start-up goes on to look for the bond)" bash -c "[[ \"\$1\" == *'bond rlbd-pkg-x does not exist'* ]]" _ "$out"
printf '[policy]\nthreshold = 7\n' >/etc/rlbd/rlbd-pkg-x.toml
out=$(/usr/sbin/rlbd run --bond rlbd-pkg-x 2>&1; echo "exit $?")
echo "with an invalid /etc/rlbd/rlbd-pkg-x.toml: $out"
check "an invalid per-bond file is named, exit 78" bash -c "[[ \"\$1\" == *'/etc/rlbd/rlbd-pkg-x.toml'*'policy.threshold'*'exit 78'* ]]" _ "$out"
rm -f /etc/rlbd/rlbd-pkg-x.toml

step "rlbd runs unprivileged with CAP_NET_RAW alone (the unit without CAP_BPF: counting captured frames)"
# A private namespace with two veth ports in ports mode (no bonding driver needed): start-up,
# the rtnetlink socket, /proc/sys and the AF_PACKET rings work as user nobody with only
# CAP_NET_RAW (ambient), and SIGTERM exits 0. Without the capability the exit is 71; on a
# missing bond it is 69.
ip netns add "$netns"
nsx() { ip netns exec "$netns" "$@"; }
nsx ip link add pa type veth peer name pa-peer
nsx ip link add pb type veth peer name pb-peer
for p in pa pb; do
  nsx ip link set "$p" up
  nsx ip link set "$p-peer" up
  nsx ip addr add 198.18.77.1/24 dev "$p"
done
nsx sysctl -qw net.ipv4.conf.all.rp_filter=2 net.ipv4.conf.pa.rp_filter=2 net.ipv4.conf.pb.rp_filter=2
# shellcheck disable=SC2054 # the commas are setpriv's and rlbd's own list syntax
unpriv=(setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all,+net_raw
  --ambient-caps=-all,+net_raw --bounding-set=-all,+net_raw --no-new-privs)
# shellcheck disable=SC2054
args=(run --ports pa,pb --capacity pa=1000 --capacity pb=1000 --config /dev/null)
# As under the unit's RuntimeDirectory=, /run/rlbd belongs to the service's user: a private
# mount namespace gets a fresh /run with such a /run/rlbd.
# (ip netns exec, unshare, sh and setpriv each exec the next: $! is rlbd itself.)
ip netns exec "$netns" unshare -m --propagation private sh -c 'mount -t tmpfs -o mode=0755 tmpfs /run &&
  install -d -o 65534 -g 65534 -m 0755 /run/rlbd && exec "$@"' sh \
  "${unpriv[@]}" /usr/sbin/rlbd "${args[@]}" >"$tmp/unpriv.log" 2>&1 &
pid=$!
sleep 3
if kill -0 "$pid" 2>/dev/null; then
  ok "rlbd as nobody with CAP_NET_RAW is running after 3 s"
  # Without CAP_BPF it counts captured frames, and says so once per port.
  check "without CAP_BPF: each port says it counts captured frames" \
    bash -c "grep -q 'port pa: cannot count in the kernel' '$tmp/unpriv.log' && grep -q 'port pb: cannot count in the kernel' '$tmp/unpriv.log'"
  kill -TERM "$pid"
  rc=0
  wait "$pid" || rc=$?
  check "SIGTERM: exit 0 (got $rc)" test "$rc" = 0
else
  rc=0
  wait "$pid" || rc=$?
  cat "$tmp/unpriv.log"
  bad "rlbd as nobody with CAP_NET_RAW exited early with $rc"
fi
sed 's/^/    /' "$tmp/unpriv.log"
rc=0
nsx setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all --bounding-set=-all \
  --no-new-privs /usr/sbin/rlbd "${args[@]}" >"$tmp/nocap.log" 2>&1 || rc=$?
check "without CAP_NET_RAW: exit 71 (got $rc)" test "$rc" = 71
rc=0
nsx /usr/sbin/rlbd run --bond rlbd-pkg-none --config "$tmp/empty.toml" >"$tmp/nobond.log" 2>&1 || rc=$?
check "missing bond: exit 69 (got $rc)" test "$rc" = 69
ip netns del "$netns"

step "remove the .deb (dpkg -r): only the conffile stays"
# What a daemon that died leaves in the runtime directory: its last metrics and its state.
mkdir -p /run/rlbd
echo 'rlbd_uptime_seconds{bond="rlbd-pkg-x"} 5' >/run/rlbd/rlbd-pkg-x.prom
echo '{}' >/run/rlbd/rlbd-pkg-x.state
check "dpkg -r" dpkg -r rlbd
check "remove drops a metrics file a dead daemon left in /run/rlbd" test ! -e /run/rlbd/rlbd-pkg-x.prom
check "remove keeps the state files in /run/rlbd" test -f /run/rlbd/rlbd-pkg-x.state
for f in "${deb_files[@]}"; do
  if [ "$f" = /etc/rlbd/rlbd.toml ]; then
    check "conffile $f kept" test -f "$f"
  else
    check "removed $f" test ! -e "$f"
  fi
done
check "/usr/share/doc/rlbd removed" test ! -e /usr/share/doc/rlbd
check "dpkg status: config-files" test "$(dpkg-query -W -f='${Status}' rlbd)" = "deinstall ok config-files"
check "dpkg -P" dpkg -P rlbd
check "purged /etc/rlbd" test ! -e /etc/rlbd
check "purged /run/rlbd (what dead daemons left)" test ! -e /run/rlbd
# Debian's practice: a system user outlives its package (files may still belong to it).
check "purge keeps the user and group rlbd" getent group rlbd

step "the .rpm"
echo "rpm file list (rpm -qlp):"
rpm -qlp "$rpm_file" | tee "$tmp/rpm.list"
expected_rpm=(/usr/sbin/rlbd /usr/lib/systemd/system/rlbd@.service /usr/share/man/man8/rlbd.8.gz
  /usr/share/man/man5/rlbd.toml.5.gz /etc/rlbd/rlbd.toml /usr/share/doc/rlbd/README.md
  /usr/share/doc/rlbd/operations.md
  /usr/lib/sysusers.d/rlbd.conf /usr/share/bash-completion/completions/rlbd
  /usr/share/zsh/site-functions/_rlbd /usr/share/fish/vendor_completions.d/rlbd.fish
  /usr/share/rlbd/rlbd-dashboard.json /usr/share/rlbd/rlbd-rules.yml
  /usr/share/licenses/rlbd /usr/share/licenses/rlbd/LICENSE-MIT /usr/share/licenses/rlbd/LICENSE-APACHE)
for f in "${expected_rpm[@]}"; do
  check "rpm contains $f" grep -qxF -- "$f" "$tmp/rpm.list"
done
check "rpm contains only the expected files" test "$(grep -c . "$tmp/rpm.list")" -eq ${#expected_rpm[@]}
check "rpm: /etc/rlbd/rlbd.toml is %config" grep -qxF /etc/rlbd/rlbd.toml <(rpm -qcp "$rpm_file")
rpm -qp --scripts "$rpm_file" >"$tmp/rpm.scripts"
check "rpm: %post reloads systemd" grep -q 'daemon-reload' <(sed -n '/^postinstall/,/^[a-z]* scriptlet/p' "$tmp/rpm.scripts")
check "rpm: %post makes the user rlbd" grep -q 'systemd-sysusers rlbd.conf' <(sed -n '/^postinstall/,/^[a-z]* scriptlet/p' "$tmp/rpm.scripts")
check "rpm: %preun stops the instances" grep -q "systemctl stop 'rlbd@\*.service'" "$tmp/rpm.scripts"
check "rpm: %postun present" grep -q '^postuninstall scriptlet' "$tmp/rpm.scripts"
check "rpm: %postun on erase removes /run/rlbd (metrics and state files left)" \
  grep -qx '	rm -rf /run/rlbd' <(sed -n '/^postuninstall/,$p' "$tmp/rpm.scripts")
check "rpm: version $version" test "$(rpm -qp --qf '%{VERSION}' "$rpm_file")" = "$version"
check "rpm: the licenses are %license files" test "$(rpm -qp --licensefiles "$rpm_file" | tr '\n' ' ')" = \
  "/usr/share/licenses/rlbd/LICENSE-APACHE /usr/share/licenses/rlbd/LICENSE-MIT "
# Built here for this machine: the package's architecture is this machine's, not a fixed one.
rpm_arch=$(rpm -qp --qf '%{ARCH}' "$rpm_file")
check "rpm: architecture $rpm_arch is the build's ($(uname -m))" test "$rpm_arch" = "$(uname -m)"
check "rpm: the spec has no fixed BuildArch" grep -qx 'BuildArch: *%{rlbd_arch}' packaging/rpm/rlbd.spec
mkdir -p "$tmp/rpm-root"
(cd "$tmp/rpm-root" && rpm2cpio "$OLDPWD/$rpm_file" | cpio -idm --quiet './usr/share/licenses/*')
for l in LICENSE-MIT LICENSE-APACHE; do
  check "rpm's /usr/share/licenses/rlbd/$l is the source's $l" cmp -s "$tmp/rpm-root/usr/share/licenses/rlbd/$l" "$l"
done

step "lintian"
# Fails on errors (E:); warnings are printed. Debian 12's lintian predates aliased-location.
echo "$(lintian --version) on $(. /etc/os-release && echo "$PRETTY_NAME")"
lintian "$deb" >"$tmp/lintian.out" 2>&1 || true
sed '/running with root privileges is not recommended/d' "$tmp/lintian.out"
if grep -q '^E:' "$tmp/lintian.out"; then bad "lintian: errors"; else ok "lintian: no errors (E:)"; fi

echo
echo "packaging: $passed passed, $failed failed"
test "$failed" = 0
