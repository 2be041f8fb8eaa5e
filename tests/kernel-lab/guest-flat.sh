# guest-flat.sh: the flat scenario's extra checks (sourced by guest-test.sh): the active-slave
# change and, with rlbd, the bond changing under a running daemon.

# state of port $1 as rlbd reports it ("up", "down", "absent"; empty when it lists no such port)
port_state() {
    srv $RLBD status --json 2>/dev/null |
        sed -n 's/.*"name":"'"$1"'","ifindex":[0-9]*,"mac":"[^"]*","state":"\([a-z]*\)".*/\1/p'
}
# wait up to $3 s for port $1 to reach state $2; prints the seconds it took or "never"
wait_state() {
    t0=$(ts)
    while fcmp "$(fcalc "$(ts) - $t0")" '<=' "$3"; do
        [ "$(port_state "$1")" = "$2" ] && { fcalc "$(ts) - $t0"; return 0; }
        sleep 0.2
    done
    echo never
    return 1
}
enslave() { # bond, slaves...
    b=$1
    shift
    for sl in "$@"; do
        srv $IP link set "$sl" down
        srv $IP link set "$sl" master "$b"
        srv $IP link set "$sl" up
    done
}

flat_extras() {
    # sl1 is back (failover); now sl0, the active slave, fails: alb makes sl1 active and swaps
    # the MACs of sl0 and sl1. Both clients must receive again: a client the driver placed
    # itself is re-steered by the driver only after 2-3 s, and TCP's back-off adds to that; a
    # client nobody re-steers never receives.
    sleep 4
    say "before sl0 down: c1 -> $(cstate c1 198.18.0.1), c3 -> $(cstate c3 198.18.0.1); active $(srv cat /sys/class/net/bond0/bonding/active_slave)"
    pre1=$(cstate c1 198.18.0.1)
    pre3=$(cstate c3 198.18.0.1)
    cut_mark
    cable sl0 down
    mark "sl0 down (sl1 active)"
    cs_now
    f=$(flow_track "$CS" 8 198.18.0.11 198.18.0.13)
    set -- $f
    say "kB per interval (c1/c3): $(flow_show)"
    old0=$MAC0
    slave_macs
    say "after sl0 down: active $(srv cat /sys/class/net/bond0/bonding/active_slave); sl0 $MAC0, sl1 $MAC1 (bond0 $(srv cat /sys/class/net/bond0/address), sl0 had $old0)"
    [ "$1" != never ] && [ "$2" != never ] && fcmp "$1" '<=' 8 && fcmp "$2" '<=' 8
    r=$?
    [ $r = 0 ] || failover_state "c1:198.18.0 c3:198.18.0"
    verdict $r active-change "active-slave change followed: c1 and c3 both receive within 8 s" \
        "c1 (was on $pre1) receives at ${1}s, c3 (was on $pre3) at ${2}s after sl0 down"
    cable sl0 up
    if [ "$STANDIN" = 1 ]; then
        echo "SKIP: $SC/runtime: the bond changing under a running daemon needs rlbd (STANDIN=1)"
        return 0
    fi
    runtime_changes
}

# A slave released and enslaved again, the bond deleted and made again: rlbd must follow each
# from link events, keep running, and be whole again afterwards.
runtime_changes() {
    srv $IP link set sl1 nomaster
    mark "sl1 released, back"
    w=$(wait_state sl1 absent 3)
    verdict $? release "slave released: rlbd drops sl1" "sl1 absent after ${w}s"
    enslave bond0 sl1
    w=$(wait_state sl1 up 5)
    verdict $? enslave "slave enslaved again: rlbd takes sl1 back" "sl1 up after ${w}s"

    srv $IP link del bond0
    mark "bond0 deleted"
    sleep 2
    rlbd_alive && grep -q "bond bond0 is gone; waiting for it to return" /tmp/rlbd.log
    verdict $? bond-gone "bond deleted: rlbd logs it and waits" "$(grep -c 'is gone' /tmp/rlbd.log) log line(s); alive: $(rlbd_alive && echo yes || echo no)"
    srv $IP link add bond0 type bond mode balance-alb miimon 100
    enslave bond0 sl0 sl1
    srv $IP link set bond0 up
    srv $IP addr add 198.18.0.1/24 dev bond0
    mark "bond0 made again"
    w0=$(wait_state sl0 up 5)
    r0=$?
    w1=$(wait_state sl1 up 5)
    [ $r0 = 0 ] && [ $? = 0 ]
    verdict $? bond-back "bond made again: rlbd resumes on its slaves" "sl0 up after ${w0}s, sl1 after ${w1}s; $(grep -c 'bond bond0 (ifindex' /tmp/rlbd.log) 'found' log lines"
}
