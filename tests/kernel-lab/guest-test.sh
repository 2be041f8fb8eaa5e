#!/bin/sh
# guest-test.sh: runs as the kernel-lab guest's test (busybox sh, started by /init of the
# initramfs that run.sh builds). Not meant for a host: it builds network namespaces and a bond.
#
# Topology (addresses in 198.18.0.0/24 only):
#   srv: bond0 (balance-alb, miimon 100) 198.18.0.1 with slaves sl0, sl1 (veth)
#   sw:  bridge br0 with ports p0, p1 (peers of sl0, sl1; tc tbf CAP_MBIT toward the server)
#        and pc1..pc4 (peers of the clients' eth0)
#   c1..c4: eth0 198.18.0.11 .. 198.18.0.14
# Phase 1: the driver alone; c1 and c3 (both on slave 0) send at once: the bond gets one cap.
# Phase 2: rlbd run must move one of them to slave 1 and keep it there.
# Prints one PASS/FAIL line per check; exits 0 only when every check passed.
# iproute2 is called by full path: busybox runs its own applets ahead of PATH.

IP=/usr/sbin/ip
TC=/usr/sbin/tc
SS=/usr/sbin/ss
RLBD=/usr/bin/rlbd
CAP=${CAP_MBIT:-30}
PHASES=${PHASES:-1 2}
S1=${SECONDS_1:-8}
SERVER=198.18.0.1
PORT=5001
FAILS=0
CHECKS=0

ts() { cut -d' ' -f1 /proc/uptime; }
say() { echo "[$(ts)] $*"; }
verdict() { # $1: 0 = pass, $2: check name, $3: figures
    CHECKS=$((CHECKS + 1))
    if [ "$1" = 0 ]; then
        echo "PASS: $2 -- $3"
    else
        echo "FAIL: $2 -- $3"
        FAILS=$((FAILS + 1))
    fi
}
# awk-based float helpers
fcmp() { awk -v a="$1" -v b="$3" "BEGIN { exit !(a $2 b) }"; } # fcmp A '>=' B
fcalc() { awk "BEGIN { printf \"%.1f\", $1 }"; }

srv() { $IP netns exec srv "$@"; }

# "uptime rx_sl0 rx_sl1" from the server's own namespace
snap() { echo "$(ts) $(srv cat /sys/class/net/sl0/statistics/rx_bytes /sys/class/net/sl1/statistics/rx_bytes | tr '\n' ' ')"; }
# rates between two snaps: "mbit_sl0 mbit_sl1 mbit_total seconds"
rates() {
    echo "$1 $2" | awk '{ dt = $4 - $1; a = ($5 - $2) * 8 / dt / 1e6; b = ($6 - $3) * 8 / dt / 1e6;
        printf "%.1f %.1f %.1f %.1f\n", a, b, a + b, dt }'
}
# server MAC in client $1's neighbour table (empty when none)
nmac() { $IP -n "$1" neigh show "$SERVER" | sed -n 's/.* lladdr \([0-9a-f:]*\).*/\1/p'; }
slave_macs() { set -- $(srv cat /sys/class/net/sl0/address /sys/class/net/sl1/address); MAC0=$1; MAC1=$2; }
sname() {
    case "$1" in
    "") echo none ;;
    "$MAC0") echo sl0 ;;
    "$MAC1") echo sl1 ;;
    *) echo "other" ;;
    esac
}
print_table() { # $1: title, $2: "m0 m1 total dt"
    set -- "$1" $2
    echo "  $1 (window ${5}s, cap ${CAP} Mbit/s per port)"
    echo "    slave  MAC                rx Mbit/s"
    printf '    sl0    %s  %9s\n' "$MAC0" "$2"
    printf '    sl1    %s  %9s\n' "$MAC1" "$3"
    printf '    total                     %9s  (%.2fx cap)\n' "$4" "$(fcalc "$4 / $CAP")"
}

start_source() { # $1: client, $2: seconds; call it directly (not in $(...)) and take $!
    $IP netns exec "$1" $RLBD lab-source --to "$SERVER:$PORT" --seconds "$2" >"/tmp/src-$1.out" 2>&1 &
}

setup() {
    say "building the lab: bond0 balance-alb, 2 slaves, bridge, tbf ${CAP}mbit, 4 clients"
    for ns in srv sw c1 c2 c3 c4; do
        $IP netns add $ns || return 1
        $IP -n $ns link set lo up
    done
    $IP -n sw link add br0 type bridge stp_state 0 forward_delay 0 || return 1
    $IP -n sw link set br0 up
    $IP -n srv link add bond0 type bond mode balance-alb miimon 100 || return 1
    for i in 0 1; do
        $IP link add sl$i netns srv address 02:00:00:00:00:1$i type veth peer name p$i netns sw || return 1
        $IP -n srv link set sl$i master bond0 || return 1
        $IP -n sw link set p$i master br0
        $IP -n sw link set p$i up
        $TC -n sw qdisc add dev p$i root tbf rate "${CAP}mbit" burst 64kb latency 50ms || return 1
    done
    $IP -n srv link set bond0 up
    $IP -n srv addr add "$SERVER/24" dev bond0
    for i in 1 2 3 4; do
        $IP link add eth0 netns c$i address 02:00:00:00:01:0$i type veth peer name pc$i netns sw || return 1
        $IP -n sw link set pc$i master br0
        $IP -n sw link set pc$i up
        $IP -n c$i addr add 198.18.0.1$i/24 dev eth0
        $IP -n c$i link set eth0 up
    done
    # both slaves up in the bond
    n=0
    while [ $n -lt 50 ]; do
        s=$(srv cat /sys/class/net/sl0/bonding_slave/mii_status /sys/class/net/sl1/bonding_slave/mii_status | tr '\n' ' ')
        [ "$s" = "up up " ] && break
        sleep 0.1
        n=$((n + 1))
    done
    say "slave mii status: $s; $(srv cat /sys/class/net/bond0/bonding/mode)"
    slave_macs
    say "bond0 $(srv cat /sys/class/net/bond0/address), sl0 $MAC0, sl1 $MAC1"
    srv $RLBD lab-sink --listen "$SERVER:$PORT" >/tmp/sink.log 2>&1 &
    SINK_PID=$!
    return 0
}

placements() {
    # ARP in order c1, c2, c3, c4: the driver's round robin gives c1,c3 -> slave 0, c2,c4 -> slave 1
    for i in 1 2 3 4; do
        $IP netns exec c$i ping -c 1 -W 3 "$SERVER" >/dev/null 2>&1 || say "c$i: ping failed"
    done
    got=""
    for i in 1 2 3 4; do
        m=$(nmac c$i)
        say "placement: c$i -> $m ($(sname "$m"))"
        got="$got $(sname "$m")"
    done
    [ "$got" = " sl0 sl1 sl0 sl1" ]
    verdict $? "driver placement c1,c3 on sl0 and c2,c4 on sl1" "got c1..c4 ->$got"
}

phase1() {
    echo "=== PHASE 1: the driver alone (no rlbd), c1 + c3 for ${S1}s ==="
    start_source c1 "$S1"
    p1=$!
    start_source c3 "$S1"
    p3=$!
    sleep 2
    a=$(snap)
    sleep $((S1 - 3))
    b=$(snap)
    wait "$p1" "$p3"
    r=$(rates "$a" "$b")
    say "lab-source bytes sent: c1 $(cat /tmp/src-c1.out) c3 $(cat /tmp/src-c3.out)"
    print_table "phase 1, c1 + c3, no rlbd" "$r"
    set -- $r
    P1_TOTAL=$3
    fcmp "$3" '>=' "$(fcalc "0.6 * $CAP")"
    verdict $? "phase 1 traffic flows (total >= 0.6x cap)" "total $3 Mbit/s, sl0 $1, sl1 $2"
    fcmp "$3" '<' "$(fcalc "1.3 * $CAP")"
    verdict $? "phase 1 without rlbd the total stays near one cap (< 1.3x cap)" \
        "total $3 Mbit/s < $(fcalc "1.3 * $CAP")"
}

say "guest test: CAP_MBIT=$CAP PHASES='$PHASES'"
if ! setup; then
    verdict 1 "lab setup" "a command failed"
    exit 1
fi
placements
for ph in $PHASES; do
    case "$ph" in
    1) phase1 ;;
    2) if command -v phase2 >/dev/null 2>&1; then phase2; else say "phase 2 not written yet"; fi ;;
    esac
done
kill "$SINK_PID" 2>/dev/null
echo "=== $CHECKS checks: $((CHECKS - FAILS)) passed, $FAILS failed ==="
[ "$FAILS" = 0 ]
