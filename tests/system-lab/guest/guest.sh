#!/bin/bash
# guest.sh: the system lab's checks, run inside the Debian guest by system-lab.service once the
# system is up (tests/system-lab/run.sh boots it). Not meant for a host.
#
# The guest's network (lab-wire.service, /lab/wire.sh): bond0 over the veth "NICs" sl0 and sl1,
# made at boot by the distribution's network configuration, 198.18.0.1/24; the peers p0, p1 are
# ports of a bridge in namespace sw, capped with tc tbf at CAP_MBIT toward the server; clients
# c1..c4 (198.18.0.11..14) in their own namespaces.
#
#   boot 1 (the image as built: systemd-networkd makes bond0): apt install, enable --now, and
#          every check that needs a running daemon but not a particular network stack; networkd
#          deletes and remakes the bond; then the machine is switched to ifupdown, as an
#          administrator would (networkd disabled, /etc/network/interfaces, networking.service
#          enabled), and rebooted;
#   boot 2 (ifupdown + ifenslave make bond0): the start at boot, enable --now again, steering,
#          ifdown/ifup; switched back to networkd (which is also to make bond-san, with
#          rlbd@bond\x2dsan enabled) and rebooted;
#   boot 3 (networkd): the start at boot (bond0's and bond-san's instances), steering, a clean
#          journal, apt purge; power-off.
# Each check prints `SLAB-CHECK PASS|FAIL <name> -- <figures>` on the console; `SLAB: ` lines
# are progress, `SLAB-REBOOT` comes before each reboot and `SLAB-DONE` before the power-off.
# Everything else goes to /lab/out/guest.log; journals and status files are left in /lab/out.
set -u
# shellcheck source=/dev/null # written by run.sh on the run disk
. /lab/env
OUT=/lab/out
STATE=/lab/state
mkdir -p "$OUT" "$STATE"
exec >>"$OUT/guest.log" 2>&1

SERVER=198.18.0.1
PORT=5001
CAP=$CAP_MBIT
UNIT=rlbd@bond0.service
CONF=/etc/rlbd/bond0.toml
LAB=/lab/bin/labtool
OPGROUP=rlbd

say() { echo "SLAB: $*" | tee /dev/console; }
check() { # $1: 0 = pass, $2: name, $3: figures
    local v=FAIL
    [ "$1" = 0 ] && v=PASS
    echo "SLAB-CHECK $v $2 -- $3" | tee /dev/console
    echo "  (at guest uptime $(ts) s)"
}
ts() { cut -d' ' -f1 /proc/uptime; }
# NOW = uptime in hundredths of a second, without starting a process (for loops that poll)
tick() {
    local u
    read -r u _ </proc/uptime
    NOW=$((${u%.*} * 100 + 10#${u#*.}))
}
fcmp() { awk -v a="$1" -v b="$3" "BEGIN { exit !(a $2 b) }"; } # fcmp A '>=' B
fcalc() { awk "BEGIN { printf \"%.1f\", $1 }"; }
since() { fcalc "$(ts) - $1"; }
prop() { systemctl show -p "$1" --value "${2:-$UNIT}"; }
mainpid() { prop MainPID; }
active() { [ "$(prop ActiveState)/$(prop SubState)" = active/running ]; }
status_json() { rlbd status --json bond0 2>/dev/null; }
# The unit's journal from monotonic time $1 (seconds of uptime) on, at priorities $2 (as -p).
journal_since() { journalctl -b -u "$UNIT" -o short-monotonic --no-pager -p "$2" | awk -v t="$1" '
    { s = $0; sub(/^\[ */, "", s); split(s, a, "]"); if (a[1] + 0 >= t) print }'; }

# ---- the network: slaves, placements, rates ---------------------------------------------------

# "uptime rx_sl0 rx_sl1" read by one process, so that process start-up under TCG does not blur
# the interval.
snap() {
    cat /proc/uptime /sys/class/net/sl0/statistics/rx_bytes /sys/class/net/sl1/statistics/rx_bytes |
        awk 'NR == 1 { t = $1 } NR > 1 { r = r " " $1 } END { print t r }'
}
# rates between two snaps: "mbit_sl0 mbit_sl1 mbit_total seconds"
rates() {
    echo "$1 $2" | awk '{ dt = $4 - $1; a = ($5 - $2) * 8 / dt / 1e6; b = ($6 - $3) * 8 / dt / 1e6;
        printf "%.1f %.1f %.1f %.1f\n", a, b, a + b, dt }'
}
# (These run often while traffic flows: as few processes as may be, since every process start
# costs the emulated guest dearly.)
# The slave client $1 sends to (its neighbour entry for the server carries that slave's MAC):
# sl0, sl1, none (no entry or no MAC) or other.
on() {
    local l m0="" m1=""
    l=$(ip -n "$1" neigh show "$SERVER")
    [[ "$l" =~ lladdr\ ([0-9a-f:]+) ]] || { echo none; return; }
    read -r m0 2>/dev/null </sys/class/net/sl0/address
    read -r m1 2>/dev/null </sys/class/net/sl1/address
    case "${BASH_REMATCH[1]}" in
    "$m0") echo sl0 ;;
    "$m1") echo sl1 ;;
    *) echo other ;;
    esac
}
# The same for every client given (default c1..c4), on one line: "sl1 sl0 sl1 sl0".
where_all() {
    local m0="" m1="" c
    read -r m0 2>/dev/null </sys/class/net/sl0/address
    read -r m1 2>/dev/null </sys/class/net/sl1/address
    [ $# -gt 0 ] || set -- c1 c2 c3 c4
    for c in "$@"; do
        echo @
        ip -n "$c" neigh show "$SERVER"
    done | awk -v a="$m0" -v b="$m1" '
        /^@/ { if (n++) printf "%s ", w; w = "none"; next }
        { for (i = 1; i < NF; i++) if ($i == "lladdr") w = ($(i + 1) == a ? "sl0" : $(i + 1) == b ? "sl1" : "other") }
        END { print w }'
}
cip() { echo "198.18.0.1${1#c}"; }
# bytes the server received from each given client IP (its TCP sockets on $PORT), in order
cbytes() {
    ss -tniH state established "( sport = :$PORT )" | awk -v ips="$*" '
        BEGIN { n = split(ips, ip, " ") }
        /bytes_received:/ {
            if (cur != "") { match($0, /bytes_received:[0-9]+/); b[cur] += substr($0, RSTART + 15, RLENGTH - 15) }
            cur = ""; next
        }
        { cur = ""; for (i = 1; i <= n; i++) if (index($0, " " ip[i] ":") || index($0, "\t" ip[i] ":")) cur = ip[i] }
        END { for (i = 1; i <= n; i++) printf "%d ", b[ip[i]] + 0; print "" }'
}

SINK_PID=""
start_sink() {
    [ -n "$SINK_PID" ] && return 0
    "$LAB" "$LAB_SINK" --listen "$SERVER:$PORT" >"$OUT/sink.log" 2>&1 &
    SINK_PID=$!
}
SRC_PIDS=""
start_sources() { # $1: seconds, then clients
    local secs=$1 c
    shift
    for c in "$@"; do
        ip netns exec "$c" "$LAB" "$LAB_SOURCE" --to "$SERVER:$PORT" --seconds "$secs" >"$OUT/src-$c.out" 2>&1 &
        SRC_PIDS="$SRC_PIDS $!"
    done
}
stop_sources() {
    # shellcheck disable=SC2086 # a list of PIDs
    [ -n "$SRC_PIDS" ] && { kill $SRC_PIDS 2>/dev/null; wait $SRC_PIDS 2>/dev/null; }
    SRC_PIDS=""
}

# Wait (up to $1 s) for bond0 in balance-alb with sl0 and sl1 up and the server's address.
bond_ready() {
    local t0
    t0=$(ts)
    while fcmp "$(since "$t0")" '<' "$1"; do
        if [ "$(cat /sys/class/net/bond0/bonding/mode 2>/dev/null)" = "balance-alb 6" ] &&
            [ "$(cat /sys/class/net/sl0/bonding_slave/mii_status /sys/class/net/sl1/bonding_slave/mii_status 2>/dev/null | tr '\n' ' ')" = "up up " ] &&
            ip -4 addr show dev bond0 | grep -q "inet $SERVER/24"; then
            return 0
        fi
        sleep 0.2
    done
    return 1
}
bond_desc() {
    echo "mode '$(cat /sys/class/net/bond0/bonding/mode 2>/dev/null)', slaves '$(cat /sys/class/net/bond0/bonding/slaves 2>/dev/null)', ifindex $(cat /sys/class/net/bond0/ifindex 2>/dev/null), $(ip -4 -br addr show dev bond0 2>/dev/null | awk '{ print $3 }')"
}

# ARP in order c1..c4: the driver's round robin puts c1, c3 on one slave and c2, c4 on the other.
# For a few seconds after, the driver's own announcements and the server's ARP requests (which
# send every client that hears one to the active slave until the driver announces again) may
# shuffle them: wait (up to 10 s) until two readings a second apart agree and show two pairs,
# then take the pair with c1 as the busy one. Sets PAIR.
placements() {
    local i got now prev="" same=0 t0 p x n0 n1
    for i in 1 2 3 4; do
        ip -n "c$i" neigh flush all 2>/dev/null
        ip netns exec "c$i" ping -c 1 -W 3 "$SERVER" >/dev/null 2>&1 || say "c$i: ping failed"
    done
    got=$(where_all)
    tick
    t0=$NOW
    PAIR=""
    sleep 1
    while tick && [ $((NOW - t0)) -lt 1000 ]; do
        sleep 1
        now=$(where_all)
        if [ "$now" = "$prev" ]; then same=$((same + 1)); else same=1; fi
        prev=$now
        read -ra p <<<"$now"
        n0=0 n1=0
        for x in "${p[@]}"; do
            case "$x" in sl0) n0=$((n0 + 1)) ;; sl1) n1=$((n1 + 1)) ;; esac
        done
        # two clients on each slave, the same in two readings
        if [ "$same" -ge 2 ] && [ "$n0" = 2 ] && [ "$n1" = 2 ]; then
            for i in 2 3 4; do [ "${p[i - 1]}" = "${p[0]}" ] && PAIR="c1 c$i"; done
            break
        fi
    done
    say "driver's placement, c1..c4 -> $got; settled: $now ($(since "$(fcalc "$t0 / 100")")s); busy pair: ${PAIR:-none}"
    [ -n "$PAIR" ] || PAIR="c1 c3"
}

# Everything worth knowing when a steering check fails, into guest.log.
diagnose() {
    echo "--- diagnosis: $1"
    for c in c1 c2 c3 c4; do echo "$c: $(ip -n "$c" neigh show "$SERVER")"; done
    ip -br link show type veth
    cat /sys/class/net/bond0/address /proc/net/bonding/bond0 2>&1
    rlbd status --all bond0 2>&1
    journalctl -b -u "$UNIT" -n 40 -o short-monotonic --no-pager
    echo "--- end of diagnosis"
}

# The busy pair sends; rlbd must move one of them within 10 s, and the two must then reach 1.8x
# one port's cap. Sets MOVED (the client now on the other slave). $1: check name, $2: seconds the
# clients send (stop_sources ends them earlier).
move_and_measure() {
    local t0 tm c best secs r k from a b
    placements
    read -r a b <<<"$PAIR"
    from=$(on "$a")
    start_sources "${2:-400}" "$a" "$b"
    t0=$(ts)
    tick
    local t0cs=$NOW pa pb
    MOVED=""
    while tick && [ $((NOW - t0cs)) -le 1000 ]; do
        read -r pa pb <<<"$(where_all "$a" "$b")"
        if [ "$pa" != "$from" ] && [ "$pa" != none ]; then
            MOVED=$a
        elif [ "$pb" != "$from" ] && [ "$pb" != none ]; then
            MOVED=$b
        fi
        [ -n "$MOVED" ] && break
        sleep 0.5
    done
    tm=$(since "$t0")
    if [ -z "$MOVED" ]; then
        check 1 "$1: rlbd moves one of two clients off the slave the driver gave both, and they reach >= 1.8x one port's cap" \
            "$a and $b on $from; no move within ${tm}s: $a on $(on "$a"), $b on $(on "$b"); $(prop StatusText)"
        diagnose "no move"
        return 1
    fi
    sleep 1
    # One snap a second for at least 5 s, up to 10 s until some 2 s window reaches 1.8x. When
    # the host deschedules the emulator, the guest's clock runs on while nothing moves, and a
    # window holding such a pause measures the host, not the caps (seen under load 12 on two
    # cores: single seconds at 10.6 of 20 Mbit/s with both ports at equal shares).
    local need n=0
    need=$(fcalc "1.8 * $CAP")
    : >"$OUT/snaps"
    for k in 0 1 2 3 4 5 6 7 8 9 10; do
        [ "$k" -gt 0 ] && sleep 1
        snap >>"$OUT/snaps"
        n=$((k + 1))
        [ "$k" -ge 5 ] || continue
        best=$(awk '{ t[NR] = $1; x[NR] = $2 + $3 } END { for (i = 3; i <= NR; i++) { v = (x[i] - x[i - 2]) * 8 / (t[i] - t[i - 2]) / 1e6; if (v > m) m = v }
            printf "%.1f", m }' "$OUT/snaps")
        fcmp "$best" '>=' "$need" && break
    done
    r=$(rates "$(sed -n 1p "$OUT/snaps")" "$(sed -n "${n}p" "$OUT/snaps")")
    secs=$(awk '{ t[NR] = $1; x[NR] = $2 + $3 } NR > 1 { printf "%.1f ", (x[NR] - x[NR - 1]) * 8 / (t[NR] - t[NR - 1]) / 1e6 }' "$OUT/snaps")
    fcmp "$best" '>=' "$(fcalc "1.8 * $CAP")"
    local ok=$?
    check $ok "$1: rlbd moves one of two clients off the slave the driver gave both, and they reach >= 1.8x one port's cap" \
        "$a and $b on $from; $MOVED -> $(on "$MOVED") ${tm}s after traffic start; best 2 s $best Mbit/s (need $(fcalc "1.8 * $CAP"), cap $CAP); per second: $secs; sl0/sl1/total Mbit/s, seconds: $r"
    [ $ok = 0 ] || diagnose "below 1.8x"
}

# enable --now (or a start at boot) reached READY: active (running), and the status text rlbd
# sent with READY=1 names both slaves. $1: check name, $2: exit status of the command, $3: start.
check_started() {
    local st s
    st=$(systemctl status --no-pager "$UNIT" 2>&1 | sed -n 's/^ *Active: //p')
    s=$(prop StatusText)
    [ "$2" = 0 ] && [[ "$st" == "active (running)"* ]] && [ "$(prop Type)" = notify ] &&
        [[ "$s" == "bond bond0: sl0 sl1;"* ]] && [ "$(systemctl is-enabled "$UNIT")" = enabled ] &&
        [ -L /etc/systemd/system/sys-subsystem-net-devices-bond0.device.wants/$UNIT ]
    check $? "$1: active (running) after READY=1, StatusText names the ports" \
        "exit $2 in $(since "$3")s; Active: $st; StatusText: $s; is-enabled: $(systemctl is-enabled "$UNIT"), wanted by bond0's device: $([ -L /etc/systemd/system/sys-subsystem-net-devices-bond0.device.wants/$UNIT ] && echo yes || echo no)"
}

# The ports rlbd has up, once they are "sl0 sl1" or after $1 s, whichever comes first.
ports_up_within() {
    local t0 ports=""
    t0=$(ts)
    while fcmp "$(since "$t0")" '<' "$1"; do
        ports=$(status_json | jq -r '[.ports[] | select(.state == "up") | .name] | join(" ")')
        [ "$ports" = "sl0 sl1" ] && break
        sleep 1
    done
    echo "$ports"
}

# Deletes bond0 and has the stack make it again: networkd from its .netdev (after an edit, as
# an operator would), ifupdown with ifdown/ifup; rlbd, still running, must follow.
bond_remade() {
    local st=$1 pid ifi_old ifi_new t0 t1 ready ports found gone how
    pid=$(mainpid)
    ifi_old=$(cat /sys/class/net/bond0/ifindex)
    t0=$(ts)
    case "$st" in
    networkd)
        # networkd applies an edited .netdev only to a bond it makes anew. networkd 252 makes
        # bond0 again on `networkctl delete bond0; networkctl reload`, but never enslaves sl0
        # and sl1 again (their join request waits, `networkctl reconfigure` or not); restarting
        # networkd configures everything afresh, as at boot.
        # The restart waits until bond0 is gone: once (CI, 2026-12-05) networkd restarted while
        # the old bond0 was still there made the new one but never enslaved sl0 and sl1.
        sed -i 's/^MIIMonitorSec=.*/MIIMonitorSec=200ms/' /etc/systemd/network/10-bond0.netdev
        networkctl delete bond0 >"$OUT/remake-$st.log" 2>&1
        for _ in $(seq 50); do [ -e /sys/class/net/bond0 ] || break; sleep 0.1; done
        systemctl restart systemd-networkd >>"$OUT/remake-$st.log" 2>&1
        how="MIIMonitorSec edited, networkctl delete bond0, systemctl restart systemd-networkd"
        ;;
    ifupdown)
        ifdown bond0 >"$OUT/remake-$st.log" 2>&1
        ifup bond0 >>"$OUT/remake-$st.log" 2>&1
        how="ifdown bond0, ifup bond0"
        ;;
    NetworkManager)
        # Deactivating a bond's profile deletes the bond device; activating it makes it anew and
        # its port profiles follow (autoconnect-ports).
        nmcli connection down bond0 >"$OUT/remake-$st.log" 2>&1
        nmcli connection up bond0 >>"$OUT/remake-$st.log" 2>&1
        how="nmcli connection down bond0, nmcli connection up bond0"
        ;;
    esac
    bond_ready 30
    ready=$?
    ifi_new=$(cat /sys/class/net/bond0/ifindex 2>/dev/null)
    say "bond0 made again by $st in $(since "$t0")s: $(bond_desc)"
    t1=$(ts)
    ports=$(ports_up_within 20)
    gone=$(journal_since "$t0" debug | grep -c 'bond bond0 is gone; waiting for it to return')
    found=$(journal_since "$t0" debug | grep -c "bond bond0 (ifindex $ifi_new) found")
    [ "$ready" = 0 ] && [ "$ifi_new" != "$ifi_old" ] && [ "$(mainpid)" = "$pid" ] &&
        [ "$ports" = "sl0 sl1" ] && [ "$gone" -ge 1 ] && [ "$found" -ge 1 ]
    check $? "bond0 deleted and made again by $st: rlbd follows it" \
        "$how; bond0 ifindex $ifi_old -> ${ifi_new:-none}, $([ "$ready" = 0 ] && echo "balance-alb over sl0 sl1 again" || echo "not whole again within 30 s: $(bond_desc)"); rlbd pid $pid -> $(mainpid); 'is gone' logged $gone, 'found' $found; ports up: '$ports' $(since "$t1")s after"
}

# The start at boot with the unit enabled: rlbd after the bond's device, no failed start, and
# its slaves taken up.
started_at_boot() {
    local st=$1 t0 n state starts fails missing first dev_t svc_t
    t0=$(ts)
    while fcmp "$(since "$t0")" '<' 30; do
        active && break
        sleep 0.5
    done
    n=$(prop NRestarts)
    state="$(prop ActiveState)/$(prop SubState)"
    starts=$(journalctl -b -u "$UNIT" -o cat --no-pager | grep -c 'Started .*Receive load balancing')
    fails=$(journalctl -b -u "$UNIT" -o cat --no-pager | grep -c 'Failed with result\|Main process exited')
    missing=$(journalctl -b -u "$UNIT" -o cat --no-pager | grep -c 'does not exist')
    first=$(journalctl -b -u "$UNIT" -o cat --no-pager | grep -m1 '^bond bond0: .* clients, ')
    dev_t=$(prop ActiveEnterTimestampMonotonic sys-subsystem-net-devices-bond0.device)
    svc_t=$(prop ExecMainStartTimestampMonotonic)
    # The slaves may come moments after the bond (networkd): rlbd must take them up by itself.
    t0=$(ts)
    while fcmp "$(since "$t0")" '<' 20; do
        [[ "$(prop StatusText)" == "bond bond0: sl0 sl1;"* ]] && break
        sleep 1
    done
    [ "$state" = active/running ] && [ "$n" = 0 ] && [ "$starts" = 1 ] && [ "$fails" = 0 ] &&
        [ "$missing" = 0 ] && [ "${dev_t:-0}" -gt 0 ] && [ "${svc_t:-0}" -ge "${dev_t:-0}" ] &&
        [[ "$(prop StatusText)" == "bond bond0: sl0 sl1;"* ]]
    check $? "boot with the unit enabled: rlbd starts after $st made bond0, with no failed start" \
        "$state, NRestarts $n, starts $starts, failures $fails, 'bond does not exist' lines $missing; bond0's device active at $(fcalc "${dev_t:-0} / 1e6")s, rlbd started at $(fcalc "${svc_t:-0} / 1e6")s; its first summary: ${first:-none}; now: $(prop StatusText)"
}

# Nothing at error in this boot's journal of the unit.
# `systemctl reload` of a bad file: ExecReload (`rlbd reload`) fails with the daemon's reason,
# the daemon runs on with its settings (same PID, the moved client where it was, still
# answering), and journalctl -p err names file, line and key. Needs MOVED.
reload_bad_file() {
    local pid where t0 rc out errs held=1 k
    pid=$(mainpid)
    where=$(on "$MOVED")
    printf '[capacity]\nsl0 = %s\nsl1 = %s\n[policy]\nthreshold = "high"\n' "$CAP" "$CAP" >"$CONF"
    t0=$(ts)
    out=$(systemctl reload "$UNIT" 2>&1)
    rc=$?
    for k in 1 2 3; do
        sleep 1
        [ "$(on "$MOVED")" = "$where" ] || held=0
    done
    journal_since "$t0" err >"$OUT/journal-reload-bad-err.txt"
    errs=$(grep -c "$CONF:5: policy.threshold: expected a number, found the string \"high\"" "$OUT/journal-reload-bad-err.txt")
    [ $rc != 0 ] && active && [ "$(mainpid)" = "$pid" ] && [ $held = 1 ] && status_json >/dev/null &&
        [ "$errs" -ge 2 ]
    check $? "systemctl reload of a bad $CONF exits non-zero; the daemon runs on with its settings, and journalctl -p err names file, line and key" \
        "exit $rc ($(head -c 200 <<<"$out" | tr '\n' '|')); $(prop ActiveState)/$(prop SubState), pid $pid -> $(mainpid); $MOVED on $where, 3 s after: $([ $held = 1 ] && echo stayed || echo left); lines at err naming $CONF:5 policy.threshold (daemon and rlbd reload): $errs"
    local refused
    refused=$(journalctl -b -u "$UNIT" -o cat --no-pager MESSAGE_ID=8c9d83c0ae91406eb6a5d890eb8746d7 | grep -c "not reloaded: $CONF:5: policy.threshold")
    [ "$refused" -ge 1 ]
    check $? "journalctl MESSAGE_ID=8c9d83c0ae91406eb6a5d890eb8746d7 (a refused configuration) finds the refused reload" \
        "$refused record(s) naming $CONF:5"
    cp "$STATE/bond0.toml.good" "$CONF"
    systemctl reload "$UNIT"
    check $? "systemctl reload of the good file again succeeds" "$(prop ActiveState)/$(prop SubState)"
    notify_reload
}

# Where systemd has it (253 and later), Type=notify-reload with no ExecReload: systemd sends
# SIGHUP and waits for RELOADING=1 (with MONOTONIC_USEC) and READY=1. Restores the unit after.
notify_reload() {
    local v rc t0 type
    v=$(systemctl --version | awk 'NR == 1 { print $2 }')
    if [ "${v%%.*}" -lt 253 ] 2>/dev/null; then
        say "systemd $v has no Type=notify-reload; its check is left to releases that have it"
        return
    fi
    mkdir -p "/run/systemd/system/$UNIT.d"
    printf '[Service]\nType=notify-reload\nExecReload=\n' >"/run/systemd/system/$UNIT.d/notify-reload.conf"
    systemctl daemon-reload
    systemctl restart "$UNIT"
    type=$(prop Type)
    t0=$(ts)
    timeout 30 systemctl reload "$UNIT"
    rc=$?
    [ "$type" = notify-reload ] && [ $rc = 0 ] && active &&
        journal_since "$t0" info | grep -q 'SIGHUP: configuration reloaded from'
    check $? "Type=notify-reload (systemd $v): systemctl reload waits for RELOADING=1 and READY=1 and succeeds" \
        "Type=$type; reload exit $rc in $(since "$t0")s; $(prop ActiveState)/$(prop SubState)"
    rm -rf "/run/systemd/system/$UNIT.d"
    systemctl daemon-reload
    systemctl restart "$UNIT"
}

clean_journal() { # $1: check name, $2: file
    journalctl -q -b -u "$UNIT" -p err -o short-monotonic --no-pager >"$OUT/$2"
    [ ! -s "$OUT/$2" ]
    check $? "$1" "$(wc -l <"$OUT/$2") lines at err or above: $(head -c 300 "$OUT/$2" | tr '\n' '|')"
}

# The switches are followed by a reboot, which loads the units anew: no daemon-reload now, and
# no SysV rc links (networking.service has an init script; update-rc.d alone takes seconds in
# the emulated guest, and systemd starts the unit from its wants link).
to_ifupdown() {
    SYSTEMCTL_SKIP_SYSV=1 systemctl disable --no-reload systemd-networkd.service systemd-networkd.socket \
        systemd-networkd-wait-online.service >/dev/null 2>&1
    cp /lab/interfaces.ifupdown /etc/network/interfaces
    SYSTEMCTL_SKIP_SYSV=1 systemctl enable --no-reload networking.service >/dev/null 2>&1
    say "switched to ifupdown: networkd disabled, bond0 in /etc/network/interfaces, networking.service enabled"
}
to_networkd() {
    SYSTEMCTL_SKIP_SYSV=1 systemctl disable --no-reload networking.service >/dev/null 2>&1
    printf 'auto lo\niface lo inet loopback\n' >/etc/network/interfaces
    SYSTEMCTL_SKIP_SYSV=1 systemctl enable --no-reload systemd-networkd.service >/dev/null 2>&1
    say "switched to networkd: networking.service disabled, systemd-networkd enabled"
}

# NetworkManager takes the bond over from networkd, as an administrator would switch: networkd
# stopped and disabled, its bond deleted, and nmcli makes bond0 and its two ports as profiles
# (keyfiles in /etc/NetworkManager/system-connections) that NetworkManager brings up now and
# at every boot.
to_networkmanager() {
    local rc=0
    SYSTEMCTL_SKIP_SYSV=1 systemctl disable --now systemd-networkd.service systemd-networkd.socket \
        systemd-networkd-wait-online.service >"$OUT/to-nm.log" 2>&1
    ip link del bond0 2>/dev/null
    # A server's NICs get no automatic "Wired connection" profiles: only the bond's ports
    mkdir -p /etc/NetworkManager/conf.d
    printf '[main]\nno-auto-default=*\n' >/etc/NetworkManager/conf.d/90-no-auto-default.conf
    systemctl enable --now NetworkManager.service >>"$OUT/to-nm.log" 2>&1 || rc=1
    nmcli general status >>"$OUT/to-nm.log" 2>&1
    nmcli connection add type bond ifname bond0 con-name bond0 \
        bond.options "mode=balance-alb,miimon=100" connection.autoconnect-ports true \
        ipv4.method manual ipv4.addresses "$SERVER/24" ipv6.method disabled >>"$OUT/to-nm.log" 2>&1 || rc=1
    for i in 0 1; do
        nmcli connection add type ethernet ifname "sl$i" con-name "bond0-sl$i" \
            slave-type bond master bond0 >>"$OUT/to-nm.log" 2>&1 || rc=1
    done
    bond_ready 30 || rc=1
    check $rc "nmcli makes bond0 (balance-alb over sl0, sl1) in place of networkd's" \
        "$(bond_desc); NetworkManager $(systemctl is-active NetworkManager.service), systemd-networkd $(systemctl is-active systemd-networkd.service); profiles: $(nmcli -t -f NAME,DEVICE connection show 2>&1 | tr '\n' ' ')"
}

reboot_now() {
    stop_sources
    journalctl -b -o short-monotonic --no-pager >"$OUT/journal-boot$1.txt"
    echo "$(($1 + 1))" >"$STATE/phase"
    sync
    echo "SLAB-REBOOT" | tee /dev/console
    systemctl reboot
}

# ---- boot 1: networkd ---------------------------------------------------------------------------

# apt install of the package under test; the good configuration kept in STATE.
install_package() {
    local rc t0 s
    t0=$(ts)
    DEBIAN_FRONTEND=noninteractive apt-get install -y "$DEB" >"$OUT/apt-install.log" 2>&1
    rc=$?
    s=$(dpkg-query -W -f='${Status} ${Version}' rlbd 2>/dev/null)
    [ $rc = 0 ] && [ "${s% *}" = "install ok installed" ] && getent group "$OPGROUP" >/dev/null
    check $? "apt install ./$(basename "$DEB")" "exit $rc in $(since "$t0")s; dpkg: $s; group $OPGROUP: $(getent group "$OPGROUP")"
    dpkg -L rlbd >"$STATE/dpkg-files"
    printf '[capacity]\nsl0 = %s\nsl1 = %s\n' "$CAP" "$CAP" >"$CONF"
    cp "$CONF" "$STATE/bond0.toml.good"
    usermod -aG "$OPGROUP" op
}

# systemctl enable --now; sets T_ENABLE. $1: the network stack that made bond0.
enable_now() {
    T_ENABLE=$(ts)
    systemctl enable --now "$UNIT" >"$OUT/enable.log" 2>&1
    check_started "$1: systemctl enable --now rlbd@bond0" $? "$T_ENABLE"
}

# Who the daemon runs as, and where it counts.
identity() {
    local pid ok
    pid=$(mainpid)
    local uid gid caps u c
    uid=$(awk '/^Uid:/ { print $2, $3, $4, $5 }' "/proc/$pid/status")
    gid=$(awk '/^Gid:/ { print $2, $3, $4, $5 }' "/proc/$pid/status")
    caps=$(awk '/^Cap(Inh|Prm|Eff|Bnd|Amb):/ { printf "%s%s ", $1, $2 }' "/proc/$pid/status")
    ok=0
    for u in $uid; do [ "$u" = 0 ] && ok=1; done
    for c in CapPrm CapEff CapBnd; do
        grep -q "^$c:[[:space:]]*0000008000003000$" "/proc/$pid/status" || ok=1
    done
    check $ok "the daemon has no user ID 0 and exactly CAP_NET_RAW, CAP_NET_ADMIN and CAP_BPF" \
        "pid $pid user $(ps -o user= -p "$pid") uid $uid gid $gid; $caps(CAP_NET_RAW = 0x2000, CAP_NET_ADMIN = 0x1000, CAP_BPF = 0x8000000000)"
    # With CAP_BPF and bpf(2) allowed, the unit counts every slave's frames in the kernel.
    local counting
    counting=$(status_json | jq -r '[.ports[] | .name + "=" + .counting + "/" + (.counting_hook // "-")] | join(" ")')
    local slots
    # (attached through tcx links on Linux >= 6.6, cls_bpf filters before)
    slots=$(journalctl -b -u "$UNIT" -o cat --no-pager | grep -c 'counting every frame in the kernel (eBPF, map: slots, hook: tc, attached: ')
    # The slot table too: as the unit's user (no CAP_PERFMON) the verifier is stricter than
    # for root, and a program it refuses falls back without a failure anywhere else.
    [ "$counting" = "sl0=ebpf/tc sl1=ebpf/tc" ] && [ "$slots" -ge 2 ]
    check $? "the unit counts in the kernel (eBPF) at both slaves' tc hooks, in the slot table" \
        "status: $counting; 'map: slots, hook: tc' logged $slots times"
}

# The operators' commands: status and metrics for root and group rlbd, refused to others.
operators() {
    sleep 1 # a second of rates for the metrics
    local who sout mout src mrc
    for who in root op; do
        if [ $who = root ]; then
            sout=$(rlbd status bond0 2>&1); src=$?
            mout=$(rlbd metrics bond0 2>&1); mrc=$?
        else
            sout=$(runuser -u op -- rlbd status bond0 2>&1); src=$?
            mout=$(runuser -u op -- rlbd metrics bond0 2>&1); mrc=$?
        fi
        printf '%s\n' "$sout" >"$OUT/status-$who.txt"
        printf '%s\n' "$mout" >"$OUT/metrics-$who.txt"
        [ $src = 0 ] && [ $mrc = 0 ] && grep -q '^sl0 ' <<<"$sout" && grep -q '^sl1 ' <<<"$sout" &&
            grep -q '^rlbd_port_up{bond="bond0",port="sl0"} 1$' <<<"$mout" && grep -q '^rlbd_port_up{bond="bond0",port="sl1"} 1$' <<<"$mout"
        check $? "rlbd status bond0 and rlbd metrics bond0 answer $([ $who = root ] && echo root || echo "user op (group $OPGROUP)")" \
            "status exit $src, $(grep -c '^sl[01] ' <<<"$sout") port lines; metrics exit $mrc, $(grep -c '^rlbd_' <<<"$mout") samples"
    done
    sout=$(runuser -u outsider -- rlbd status bond0 2>&1)
    src=$?
    [ $src != 0 ] && grep -qi 'permission denied' <<<"$sout"
    check $? "rlbd status is refused to a user outside group $OPGROUP" "exit $src: $sout"
    say "control socket: $(stat -c '%n %U:%G %a' /run/rlbd /run/rlbd/bond0.sock 2>&1 | tr '\n' ';')"
}

# The lab's move as a script finds it in the journal: by RLBD_REASON and RLBD_CLIENT, and by
# the move's MESSAGE_ID; its fields name the bond, both ports and the client. Needs MOVED.
MOVE_ID=4dab3318fc4a4242b535545f4eed1ed7
journal_fields() {
    local ip to rec n_id
    ip=$(cip "$MOVED")
    to=$(on "$MOVED")
    journalctl -b -u "$UNIT" -o json --no-pager RLBD_REASON=overload RLBD_CLIENT="$ip" >"$OUT/journal-move.json"
    rec=$(jq -c 'select(.MESSAGE | startswith("move ")) | {MESSAGE_ID, RLBD_BOND, RLBD_PORT, RLBD_FROM_PORT, RLBD_CLIENT, RLBD_CLIENT_MAC, RLBD_REASON, PRIORITY, SYSLOG_IDENTIFIER}' "$OUT/journal-move.json" | head -n 1)
    n_id=$(journalctl -b -u "$UNIT" -o cat --no-pager MESSAGE_ID=$MOVE_ID | grep -c "^move $ip ")
    jq -e --arg ip "$ip" --arg to "$to" --arg id $MOVE_ID '.MESSAGE_ID == $id and .RLBD_BOND == "bond0" and
        .RLBD_PORT == $to and .RLBD_FROM_PORT != $to and .RLBD_CLIENT == $ip and .RLBD_CLIENT_MAC != null and
        .PRIORITY == "6" and .SYSLOG_IDENTIFIER == "rlbd"' <<<"${rec:-null}" >/dev/null && [ "$n_id" -ge 1 ]
    check $? "journalctl -u $UNIT RLBD_REASON=overload RLBD_CLIENT=$ip finds the lab's move, with its fields; MESSAGE_ID=$MOVE_ID finds it too" \
        "record: ${rec:-none}; MESSAGE_ID query: $n_id move line(s) of $ip"
}

# Steering, then a journal clean from install to here. Sets MOVED. $1: the network stack.
steering() {
    start_sink
    move_and_measure "$1"
    [ -n "$MOVED" ] || MOVED=${PAIR%% *}
    journal_fields

    journal_since "$T_ENABLE" err >"$OUT/journal-clean1-err.txt"
    [ ! -s "$OUT/journal-clean1-err.txt" ]
    check $? "journal: nothing at error from install to here (start, status, a move)" \
        "$(wc -l <"$OUT/journal-clean1-err.txt") lines at err or above: $(head -c 300 "$OUT/journal-clean1-err.txt" | tr '\n' '|')"
}

# systemctl reload: kept settings and moves, a bad file refused, Type=notify-reload.
reloads() {
    local pid rc
    local where moved_before moved_after held=1 k
    pid=$(mainpid)
    where=$(on "$MOVED")
    moved_before=$(status_json | jq -r --arg ip "$(cip "$MOVED")" '.clients[] | select(.ip == $ip) | .moved.to // "none"')
    systemctl reload "$UNIT"
    rc=$?
    for k in 1 2 3 4 5; do
        sleep 1
        [ "$(on "$MOVED")" = "$where" ] || held=0
    done
    moved_after=$(status_json | jq -r --arg ip "$(cip "$MOVED")" '.clients[] | select(.ip == $ip) | .moved.to // "none"')
    [ $rc = 0 ] && [ "$(mainpid)" = "$pid" ] && [ $held = 1 ] && [ "$moved_before" != none ] &&
        [ "$moved_after" = "$moved_before" ] && journalctl -b -u "$UNIT" -o cat | grep -q 'reload'
    check $? "systemctl reload keeps the moved client where it is" \
        "exit $rc; pid $pid -> $(mainpid); $MOVED on $where, for 5 s after: $([ $held = 1 ] && echo stayed || echo left), now $(on "$MOVED"); rlbd's move: to $moved_before before, $moved_after after"
    reload_bad_file
}

# SIGSTOP: the watchdog restarts rlbd, and the new daemon resumes from its state file.
watchdog_resume() {
    local pid1 n0 t0
    pid1=$(mainpid)
    n0=$(prop NRestarts)
    t0=$(ts)
    kill -STOP "$pid1"
    while fcmp "$(since "$t0")" '<' 45; do
        [ "$(mainpid)" != "$pid1" ] && [ "$(mainpid)" != 0 ] && active && break
        sleep 1
    done
    local t_back wd
    t_back=$(since "$t0")
    wd=$(journalctl -b -u "$UNIT" -o short-monotonic --no-pager | grep -m1 -i 'watchdog timeout' | sed 's/^\[ *\([0-9.]*\)\].*/\1/')
    [ "$(mainpid)" != "$pid1" ] && active && [ -n "$wd" ] && [ "$(prop NRestarts)" = $((n0 + 1)) ]
    check $? "kill -STOP: the watchdog makes systemd kill and restart rlbd" \
        "watchdog timeout logged $([ -n "$wd" ] && fcalc "$wd - $t0" || echo never)s after SIGSTOP; running again (pid $pid1 -> $(mainpid)) after ${t_back}s; NRestarts $n0 -> $(prop NRestarts)"
    # A restart resumes: the new daemon takes the move over from its state file
    # (/run/rlbd/bond0.state, the unit's runtime directory). The moved client's neighbour entry
    # is flushed, so it re-ARPs and the driver answers with the slave it chooses; the new daemon
    # re-asserts the move (it does not move a client again), and the pair stays apart.
    # Every figure the check judges is read once per round and printed as read: a re-ARP the
    # driver answers flips a client for the moment before rlbd re-asserts, and a second reading
    # for the message could show another moment than the one judged.
    local a b took=0 moved_to="none" kept m="" now_m="none" now_a="none" now_b="none" ok=1 t js hist=""
    read -r a b <<<"$PAIR"
    kept=$(on "$MOVED")
    ip -n "$MOVED" neigh flush "$SERVER"
    t0=$(ts)
    while fcmp "$(since "$t0")" '<' 15; do
        sleep 1
        t=$(since "$t0")
        js=$(status_json)
        moved_to=$(jq -r --arg ip "$(cip "$MOVED")" '.clients[] | select(.ip == $ip) | .moved.to // "none"' <<<"$js")
        m=$(jq '.totals.moves_overload' <<<"$js")
        took=$(journalctl -b -u "$UNIT" -o cat | grep -c 'moves taken over')
        now_m=$(on "$MOVED")
        now_a=$(on "$a")
        now_b=$(on "$b")
        [ "${took:-0}" -ge 1 ] && [ "$now_m" = "$kept" ] && [ "$moved_to" = "$kept" ] &&
            [ "$now_a" != "$now_b" ] && [ "${m:-1}" = 0 ]
        ok=$?
        hist+="${t}s $now_a/$now_b/$moved_to/${m:-none}; "
        fcmp "$t" '>=' 6 && [ $ok = 0 ] && break
    done
    check $ok "after the watchdog restart, the new daemon takes the move over from its state file" \
        "'moves taken over' logged $took times; $MOVED's neighbour entry flushed; ${t}s later $a on $now_a, $b on $now_b; the new daemon's move of $MOVED: to $moved_to (was on $kept); its overload moves: ${m:-none}$([ $ok = 0 ] || echo "; rounds ($a/$b/move/overload moves): $hist")"
}

# SIGKILL: systemd restarts rlbd, and the clients' traffic never stops.
kill9() {
    local a b pid2 n1 t0 t_back
    read -r a b <<<"$PAIR"
    pid2=$(mainpid)
    n1=$(prop NRestarts)
    t0=$(ts)
    # Cheap samples (a builtin read of the clock and one ss each), parsed afterwards: a busy
    # loop of many processes would itself slow the emulated guest.
    # The samples run until 3 s after the daemon is back (the main loop says so through a file),
    # at most 60 s: a fixed window would end before the restart on a slow emulated guest, and a
    # starved sampler would cover less than it. The last sample is taken after the signal.
    rm -f "$STATE/kill9-stop"
    (
        end=$(awk -v t="$t0" 'BEGIN { printf "%d", t + 60 }')
        while :; do
            read -r now _ </proc/uptime
            echo "T $now"
            ss -tniH state established "( sport = :$PORT )"
            { [ -e "$STATE/kill9-stop" ] || [ "${now%.*}" -ge "$end" ]; } && break
            sleep 0.4
        done
    ) >"$OUT/kill9-ss" &
    local fpid=$!
    kill -9 "$pid2"
    while fcmp "$(since "$t0")" '<' 45; do
        [ "$(mainpid)" != "$pid2" ] && [ "$(mainpid)" != 0 ] && active && break
        sleep 1
    done
    t_back=$(since "$t0")
    sleep 3
    touch "$STATE/kill9-stop"
    wait "$fpid"
    # "uptime bytes_a bytes_b" per sample, then the smallest rate of each client over any window
    # of at least one second (Mbit/s)
    awk -v A="$(cip "$a")" -v B="$(cip "$b")" '
        /^T / { if (t != "") print t, x[A] + 0, x[B] + 0; t = $2; delete x; next }
        /bytes_received:/ { if (cur != "") { match($0, /bytes_received:[0-9]+/); x[cur] += substr($0, RSTART + 15, RLENGTH - 15) }; cur = ""; next }
        { cur = ""; if (index($0, " " A ":") || index($0, "\t" A ":")) cur = A; if (index($0, " " B ":") || index($0, "\t" B ":")) cur = B }
        END { if (t != "") print t, x[A] + 0, x[B] + 0 }' "$OUT/kill9-ss" >"$OUT/kill9-flow"
    local mins min1 min2 nwin span
    mins=$(awk '{ t[NR] = $1; a[NR] = $2; b[NR] = $3 }
        END { ma = mb = 1e9; w = 0
              for (i = 1; i <= NR; i++) { for (j = i + 1; j <= NR && t[j] - t[i] < 1; j++); if (j > NR) break
                  dt = t[j] - t[i]; x = (a[j] - a[i]) * 8 / dt / 1e6; y = (b[j] - b[i]) * 8 / dt / 1e6; w++
                  if (x < ma) ma = x; if (y < mb) mb = y }
              printf "%.1f %.1f %d %.1f", ma, mb, w, (NR > 1 ? t[NR] - t[1] : 0) }' "$OUT/kill9-flow")
    read -r min1 min2 nwin span <<<"$mins"
    [ "$(mainpid)" != "$pid2" ] && active && [ "$(prop NRestarts)" = $((n1 + 1)) ] &&
        fcmp "$min1" '>=' 1 && fcmp "$min2" '>=' 1 && fcmp "$span" '>=' "$t_back"
    check $? "kill -9: systemd restarts rlbd, and the clients' traffic never stops" \
        "running again (pid $pid2 -> $(mainpid)) after ${t_back}s; NRestarts $n1 -> $(prop NRestarts); over ${span}s from the kill, the lowest rate over any 1 s: $a $min1, $b $min2 Mbit/s ($nwin windows)"
    stop_sources
}

# A bad configuration file: the unit fails once with exit 78, and the error reaches the journal at err.
bad_config() {
    local rc t0
    local bad_line=5 out n_start fails
    printf '[capacity]\nsl0 = %s\nsl1 = %s\n[policy]\nthreshold = 7\n' "$CAP" "$CAP" >"$CONF"
    t0=$(ts)
    systemctl restart "$UNIT" >/dev/null 2>&1
    rc=$?
    # Longer than the unit's RestartSec: a restart loop would have started it again by then.
    local rs wait=13
    rs=$(prop RestartUSec)
    case "${rs%s}" in '' | *[!0-9]*) ;; *) wait=$((${rs%s} + 3)) ;; esac
    sleep "$wait"
    out=$(systemctl status --no-pager -n 20 "$UNIT" 2>&1)
    printf '%s\n' "$out" >"$OUT/status-badconfig.txt"
    n_start=$(journal_since "$t0" debug | grep -c 'Starting .*Receive load balancing')
    fails=$(journal_since "$t0" debug | grep -c 'Failed with result')
    [ $rc != 0 ] && [ "$(prop ActiveState)" = failed ] && [ "$(prop ExecMainStatus)" = 78 ] &&
        grep -q "$CONF:$bad_line" <<<"$out" && grep -q 'policy.threshold' <<<"$out" &&
        [ "$n_start" = 1 ] && [ "$fails" = 1 ]
    check $? "a bad $CONF: the unit fails once, naming file, line and key in systemctl status, and is not restarted" \
        "restart exit $rc; $(prop ActiveState) ($(prop Result)), exit status $(prop ExecMainStatus); starts in $wait s (RestartSec $rs): $n_start, failures: $fails; status says: $(grep -o "${CONF}[^ ]*: [^ ]*" <<<"$out" | head -n1)"
    # The error is written before logging starts (main.rs): at err only with its <3> prefix.
    journal_since "$t0" err >"$OUT/journal-badconfig-err.txt"
    grep -q "rlbd run: $CONF:$bad_line: policy.threshold" "$OUT/journal-badconfig-err.txt"
    check $? "journalctl -p err -u $UNIT finds the bad file's message (written before logging starts)" \
        "$(wc -l <"$OUT/journal-badconfig-err.txt") lines at err or above: $(head -c 300 "$OUT/journal-badconfig-err.txt" | tr '\n' '|')"
    cp "$STATE/bond0.toml.good" "$CONF"
    systemctl restart "$UNIT"
}

# check-config --bond looks at the live bond: bond0 passes (exit 0, what run would steer); a bond
# reporting arp_validate is refused (78) with what to change; setting its mode again, which
# clears arp_validate in the kernel, leaves only the next reason (no slaves).
check_config_live() {
    local out0 rc0 out1 rc1 out2 rc2 av
    out0=$(rlbd check-config --bond bond0 2>&1)
    rc0=$?
    ip link add rlbd-av type bond mode active-backup arp_interval 1000 arp_ip_target 198.18.0.250 arp_validate all
    av=$(ip -d link show rlbd-av 2>&1 | grep -o 'arp_validate [a-z_]*')
    out1=$(rlbd check-config --bond rlbd-av 2>&1)
    rc1=$?
    ip link set rlbd-av type bond mode balance-alb
    out2=$(rlbd check-config --bond rlbd-av 2>&1)
    rc2=$?
    ip link del rlbd-av
    printf '%s\n--- rlbd-av (%s):\n%s\n--- mode set again:\n%s\n' "$out0" "$av" "$out1" "$out2" >"$OUT/check-config-live.txt"
    [ $rc0 = 0 ] && grep -q 'rlbd run would steer' <<<"$out0" &&
        [ $rc1 = 78 ] && grep -q 'has arp_validate all (3)' <<<"$out1" &&
        [ $rc2 = 78 ] && ! grep -q arp_validate <<<"$out2"
    check $? "check-config --bond: bond0 passes; a bond with arp_validate is refused (78) with what to change, and a mode set again clears it" \
        "bond0: exit $rc0, $(grep -c . <<<"$out0") lines; rlbd-av ($av): exit $rc1: $(tail -n1 <<<"$out1" | head -c 160); mode balance-alb again: exit $rc2: $(tail -n1 <<<"$out2" | head -c 120)"
}

# The journal's priorities (after bond_remade: its 'is gone' warning).
priorities() {
    local w i
    w=$(journalctl -b -u "$UNIT" -p warning..warning -o cat --no-pager | grep -c 'is gone; waiting')
    i=$(journalctl -b -u "$UNIT" -p warning -o cat --no-pager | grep -c 'control socket /run/rlbd/bond0.sock')
    journalctl -b -u "$UNIT" -p warning -o short-monotonic --no-pager >"$OUT/journal-warning1.txt"
    [ "$w" -ge 1 ] && [ "$i" = 0 ] && journalctl -b -u "$UNIT" -p info..info -o cat | grep -q 'control socket /run/rlbd/bond0.sock'
    check $? "journalctl -p warning shows rlbd's warnings at their priority, and not its info lines" \
        "'bond gone' at warning: $w; info line 'control socket' within -p warning: $i"
}

# Boot 1 on both releases, as far as they share it: networkd's bond, the package, the unit,
# steering and the reloads.
boot1_start() {
    say "boot 1 (networkd): checks start at guest uptime $(ts) s"
    bond_ready 30
    check $? "bond0 made by networkd at boot: balance-alb over sl0, sl1, with 198.18.0.1/24" "$(bond_desc)"
    install_package
    enable_now networkd
    identity
    operators
    steering networkd
    reloads
}

boot1() {
    boot1_start
    watchdog_resume
    kill9
    bad_config
    check_config_live
    bond_remade networkd
    priorities
    to_ifupdown
    reboot_now 1
}

# ---- boot 2: ifupdown ---------------------------------------------------------------------------

boot2() {
    local rc t0
    say "boot 2 (ifupdown): checks start at guest uptime $(ts) s"
    bond_ready 30
    check $? "bond0 made by ifupdown at boot: balance-alb over sl0, sl1, with 198.18.0.1/24" "$(bond_desc); $(systemctl is-active networking.service) networking.service, $(systemctl is-active systemd-networkd.service) systemd-networkd"
    started_at_boot ifupdown
    systemctl disable --now "$UNIT" >"$OUT/disable.log" 2>&1
    t0=$(ts)
    systemctl enable --now "$UNIT" >"$OUT/enable2.log" 2>&1
    check_started "ifupdown: systemctl enable --now rlbd@bond0" $? "$t0"
    start_sink
    move_and_measure "ifupdown, after a reboot" 60
    stop_sources
    clean_journal "journal: nothing at error during the boot with ifupdown (start at boot, enable, a move)" journal-clean2-err.txt
    bond_remade ifupdown
    to_networkd
    san_for_boot
    reboot_now 2
}

# ---- Debian 13: boot 1 (networkd), boot 2 (NetworkManager) --------------------------------------
# The checks that ride on the release (the package, the unit on systemd 257 with
# Type=notify-reload, the journal, steering) run on both releases; the longest (watchdog, kill -9,
# the bond remade by networkd, ifupdown) on Debian 12 only, to keep CI's time.

boot1_trixie() {
    boot1_start
    stop_sources
    bad_config
    check_config_live
    to_networkmanager
    # rlbd follows the bond NetworkManager made (a new ifindex) without a restart
    local ports t0
    t0=$(ts)
    ports=$(ports_up_within 20)
    [ "$ports" = "sl0 sl1" ] && active
    check $? "rlbd follows bond0 from networkd to NetworkManager without a restart" \
        "ports up: '$ports' $(since "$t0")s after; NRestarts $(prop NRestarts); $(prop StatusText)"
    reboot_now 1
}

boot2_networkmanager() {
    say "boot 2 (NetworkManager): checks start at guest uptime $(ts) s"
    bond_ready 30
    check $? "bond0 made by NetworkManager at boot: balance-alb over sl0, sl1, with 198.18.0.1/24" \
        "$(bond_desc); NetworkManager $(systemctl is-active NetworkManager.service), systemd-networkd $(systemctl is-active systemd-networkd.service)"
    started_at_boot NetworkManager
    start_sink
    move_and_measure "NetworkManager, after a reboot" 60
    stop_sources
    clean_journal "journal: nothing at error during the boot with NetworkManager (start at boot, a move)" journal-clean2-err.txt
    bond_remade NetworkManager
    priorities
    purge
    journalctl -b -o short-monotonic --no-pager >"$OUT/journal-boot2.txt"
}

# ---- boot 3: networkd again ---------------------------------------------------------------------

boot3() {
    say "boot 3 (networkd): checks start at guest uptime $(ts) s"
    started_at_boot networkd
    start_sink
    move_and_measure "networkd, after a reboot" 40
    stop_sources
    clean_journal "journal: nothing at error during the boot with networkd (start at boot, a move)" journal-clean3-err.txt
    san_started_at_boot
    purge
    journalctl -b -o short-monotonic --no-pager >"$OUT/journal-boot3.txt"
    systemd-analyze --no-pager >"$OUT/boot-times.txt" 2>&1
}

# bond-san at boot (Debian 12, the boot into networkd): networkd makes bond-san (balance-alb)
# over two dummies, and rlbd@bond\x2dsan is enabled, not started: the device's appearance at
# boot must start it (the unit's wants link names the escaped device unit). No address on it,
# and not required for online, so the boot does not wait for it.
san_for_boot() {
    local d=/etc/systemd/network
    printf '[NetDev]\nName=bond-san\nKind=bond\n\n[Bond]\nMode=balance-alb\nMIIMonitorSec=100ms\n' >$d/30-bond-san.netdev
    printf '[Match]\nName=bond-san\n\n[Link]\nRequiredForOnline=no\n\n[Network]\nLinkLocalAddressing=no\nConfigureWithoutCarrier=yes\n' >$d/30-bond-san.network
    for i in 0 1; do
        printf '[NetDev]\nName=d%s\nKind=dummy\n' "$i" >"$d/30-d$i.netdev"
        printf '[Match]\nName=d%s\n\n[Link]\nRequiredForOnline=no\n\n[Network]\nBond=bond-san\n' "$i" >"$d/30-d$i.network"
    done
    printf '[capacity]\nd0 = 1000\nd1 = 1000\n' >/etc/rlbd/bond-san.toml
    systemctl enable "rlbd@$(systemd-escape bond-san).service" >"$OUT/san-enable.log" 2>&1
    say "bond-san for the next boot: networkd files written, rlbd@$(systemd-escape bond-san) enabled ($?)"
}

# The boot after san_for_boot: rlbd@bond\x2dsan started by bond-san's device, with both slaves,
# and never restarted. Then bond-san goes again (the unit disabled, networkd's files removed),
# for purge's own bond-san.
san_started_at_boot() {
    local san t0 ports dev_t svc_t state n
    san="rlbd@$(systemd-escape bond-san).service"
    t0=$(ts)
    ports=""
    while fcmp "$(since "$t0")" '<' 30; do
        ports=$(rlbd status --json bond-san 2>/dev/null | jq -r '[.ports[] | select(.state == "up") | .name] | join(" ")')
        [ "$ports" = "d0 d1" ] && break
        sleep 1
    done
    state="$(prop ActiveState "$san")/$(prop SubState "$san")"
    n=$(prop NRestarts "$san")
    dev_t=$(prop ActiveEnterTimestampMonotonic 'sys-subsystem-net-devices-bond\x2dsan.device')
    svc_t=$(prop ExecMainStartTimestampMonotonic "$san")
    [ "$state" = active/running ] && [ "$n" = 0 ] && [ "$ports" = "d0 d1" ] &&
        [ "${dev_t:-0}" -gt 0 ] && [ "${svc_t:-0}" -ge "${dev_t:-0}" ]
    check $? "$san starts at boot when networkd makes bond-san, with both slaves" \
        "$state, NRestarts $n; bond-san's device active at $(fcalc "${dev_t:-0} / 1e6")s, rlbd started at $(fcalc "${svc_t:-0} / 1e6")s; ports up: '$ports'; $(prop StatusText "$san")"
    systemctl disable --now "$san" >/dev/null 2>&1
    rm -f /etc/systemd/network/30-bond-san.* /etc/systemd/network/30-d[01].*
    networkctl reload >/dev/null 2>&1
    ip link del bond-san 2>/dev/null
    ip link del d0 2>/dev/null
    ip link del d1 2>/dev/null
}

# A second instance, on bond-san (two dummy slaves): a name with a dash, so its instance is
# escaped (rlbd@bond\x2dsan, from systemd-escape) while rlbd gets the name itself (%I). Enabled
# and started while the bond has no slaves yet, as at boot when networkd enslaves them a moment
# after the bond appears: rlbd must wait for them, not fail. Then `apt purge rlbd`: every
# instance stopped, no file of the package left, no enablement left; the administrator's own
# files in /etc/rlbd (bond0.toml, bond-san.toml) are kept.
purge() {
    local i running left f links rc pids t0 st1 san cmd1 wants
    modprobe dummy
    ip link add bond-san type bond mode balance-alb miimon 100
    ip link set bond-san up
    printf '[capacity]\nd0 = 1000\nd1 = 1000\n' >/etc/rlbd/bond-san.toml
    san="rlbd@$(systemd-escape bond-san).service"
    systemctl enable --now "$san" >/dev/null 2>&1
    rc=$?
    st1="$(prop ActiveState "$san")/$(prop SubState "$san"): $(prop StatusText "$san")"
    cmd1=$(tr '\0' ' ' <"/proc/$(prop MainPID "$san")/cmdline" 2>/dev/null)
    wants=$(find /etc/systemd/system -path '*bond\\x2dsan.device.wants/*' -printf '%f\n' 2>/dev/null)
    for i in 0 1; do
        ip link add "d$i" type dummy
        ip link set "d$i" master bond-san
        ip link set "d$i" up
    done
    t0=$(ts)
    local ports1=""
    while fcmp "$(since "$t0")" '<' 10; do
        ports1=$(rlbd status --json bond-san 2>/dev/null | jq -r '[.ports[] | select(.state == "up") | .name] | join(" ")')
        [ "$ports1" = "d0 d1" ] && break
        sleep 1
    done
    [ $rc = 0 ] && [ "$san" = 'rlbd@bond\x2dsan.service' ] &&
        [ "$cmd1" = "/usr/sbin/rlbd run --bond bond-san " ] && [ "$wants" = "$san" ] &&
        [[ "$st1" == "active/running: bond bond-san: no ports;"* ]] &&
        [ "$ports1" = "d0 d1" ] && [ "$(prop NRestarts "$san")" = 0 ]
    check $? "$san: enabled on its device, started on a bond without slaves yet, rlbd waits for them and takes them up" \
        "enable --now exit $rc; command line: $cmd1; wanted by the device: ${wants:-nothing}; before the slaves: $st1; ports up $(since "$t0")s after they were enslaved: '$ports1'; NRestarts $(prop NRestarts "$san")"
    running=$(systemctl list-units --no-legend --state=running 'rlbd@*' | awk '{ print $1 }' | LC_ALL=C sort | tr '\n' ' ')
    DEBIAN_FRONTEND=noninteractive apt-get purge -y rlbd >"$OUT/apt-purge.log" 2>&1
    rc=$?
    sleep 1
    left=""
    while read -r f; do
        [ -d "$f" ] && continue # /, /lib, /usr/share/doc: directories other packages share
        [ -f "$f" ] || [ -L "$f" ] && left="$left $f"
    done <"$STATE/dpkg-files"
    for f in /usr/share/doc/rlbd /usr/share/rlbd; do [ -e "$f" ] && left="$left $f/"; done
    links=$(find /etc/systemd/system -name 'rlbd@*' 2>/dev/null | tr '\n' ' ')
    pids=$(pgrep -x rlbd | tr '\n' ' ')
    local units etc
    units=$(systemctl list-units --all --no-legend 'rlbd@*' | grep -v 'not-found' | awk '{ print $1 }' | tr '\n' ' ')
    etc=$(find /etc/rlbd -mindepth 1 -printf '%f\n' 2>/dev/null | LC_ALL=C sort | tr '\n' ' ')
    [ "$running" = 'rlbd@bond0.service rlbd@bond\x2dsan.service ' ] && [ $rc = 0 ] && [ -z "$left" ] &&
        [ -z "$links" ] && [ -z "$pids" ] && [ -z "$units" ] && [ ! -e /run/rlbd ] &&
        [ "$etc" = "bond-san.toml bond0.toml " ] && ! dpkg-query -W rlbd >/dev/null 2>&1
    check $? "apt purge rlbd stops every instance and leaves no file of the package" \
        "running before: $running; purge exit $rc; left of $(wc -l <"$STATE/dpkg-files") package paths:${left:- none}; enable links: ${links:-none}; rlbd processes: ${pids:-none}; units: ${units:-none}; /run/rlbd $([ -e /run/rlbd ] && echo kept || echo gone); /etc/rlbd holds: ${etc:-nothing}; dpkg: $(dpkg-query -W -f='${Status}' rlbd 2>&1)"
}

done_now() {
    echo "SLAB-DONE" | tee /dev/console
    sync
    systemctl poweroff
}

phase=$(cat "$STATE/phase" 2>/dev/null || echo 1)
case "${RELEASE:-bookworm}/$phase" in
bookworm/1) boot1 ;;
bookworm/2) boot2 ;;
bookworm/3) boot3; done_now ;;
trixie/1) boot1_trixie ;;
trixie/2) boot2_networkmanager; done_now ;;
*) say "unknown phase $phase of ${RELEASE:-bookworm}" ;;
esac
