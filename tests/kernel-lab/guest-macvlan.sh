# guest-macvlan.sh: the guests-macvlan scenario's topology and probe (sourced by guest-test.sh
# after guest-guests.sh, whose phases, checks and summary line it shares: run_guests).
#
# Containers on macvlans over the bond: four guests g1..g4, each a namespace whose eth0 is a
# macvlan (mode bridge) made on bond0 in the server's namespace and moved into the guest's, MAC
# 02:00:00:00:03:0N, address 198.18.0.3N. The host's own address 198.18.0.1 sits on mv0, a
# macvlan of its own namespace (MAC 02:00:00:00:00:30): rlbd must take it as the host's (its
# clients steered by ARP), never as a guest; arp_ignore 1, so that only mv0 answers for it. The
# slaves' egress is capped as in `guests`.
#
# The probe, before the guests: what the server's namespace sees of a macvlan's MAC. A macvlan
# that is up puts its MAC on its lower device's unicast address list (dev_uc_add), wherever the
# macvlan itself now lives; `bridge fdb show dev bond0` dumps that list (ndo_dflt_fdb_dump:
# `self permanent` entries). Printed as one MACVLAN-PROBE line: whether the MAC is in bond0's
# dump after each step (made down in the server's namespace, up, moved into another namespace,
# up there, deleted), which lists hold a macvlan made over bond0.100 and moved out, and how many
# `bridge monitor fdb` events named either MAC (0: nothing is notified, the list must be read
# again to see a container come or go).

MVH_MAC=02:00:00:00:00:30

# "yes" when bond0's own FDB dump (in srv) holds MAC $1 (on device $2, bond0 when empty)
mv_listed() {
    if srv $BRIDGE fdb show dev "${2:-bond0}" | grep -qi "^$1 "; then echo yes; else echo no; fi
}

macvlan_probe() {
    _a=02:00:00:00:05:01 _b=02:00:00:00:05:02
    $IP netns exec srv $BRIDGE monitor fdb >/tmp/mvmon.log 2>&1 &
    _mon=$!
    sleep 0.5
    $IP netns add px || return 1
    NSES="$NSES px"
    srv $IP link add mvx link bond0 address $_a type macvlan mode bridge || return 1
    _p="made(down)=$(mv_listed $_a)"
    srv $IP link set mvx up
    _p="$_p up=$(mv_listed $_a)"
    _entry=$(srv $BRIDGE fdb show dev bond0 | grep -i "^$_a " | tr -s ' ')
    srv $IP link set mvx netns px
    _p="$_p moved=$(mv_listed $_a)"
    $IP -n px link set mvx up
    _p="$_p up_in_ns=$(mv_listed $_a)"
    $IP -n px link set mvx down
    _p="$_p down_in_ns=$(mv_listed $_a)"
    $IP -n px link set mvx up
    $IP -n px link del mvx
    _p="$_p deleted=$(mv_listed $_a)"
    srv $IP link add link bond0 name bond0.100 type vlan id 100 || return 1
    srv $IP link set bond0.100 up
    srv $IP link add mvy link bond0.100 address $_b type macvlan mode bridge || return 1
    srv $IP link set mvy netns px
    $IP -n px link set mvy up
    _p="$_p vlan(bond0=$(mv_listed $_b),bond0.100=$(mv_listed $_b bond0.100))"
    $IP -n px link del mvy
    srv $IP link del bond0.100
    sleep 0.5
    kill $_mon 2>/dev/null
    wait $_mon 2>/dev/null
    _n=$(grep -ci -e "$_a" -e "$_b" /tmp/mvmon.log)
    echo "MACVLAN-PROBE $(uname -r): $_p monitor_events=$_n entry=[$_entry]"
    [ "$_n" = 0 ] || sed 's/^/    monitor: /' /tmp/mvmon.log | grep -i -e "$_a" -e "$_b" | head -n 10
}

guests_macvlan_topology() {
    base_topology || return 1
    for i in 0 1; do
        srv $TC qdisc replace dev sl$i root tbf rate "${CAP}mbit" burst 64kb latency 50ms || return 1
    done
    macvlan_probe || say "the macvlan probe failed"
    srv $IP link add mv0 link bond0 address $MVH_MAC type macvlan mode bridge || return 1
    srv $IP link set mv0 up
    srv $IP addr add "$HOSTIP/24" dev mv0 || return 1
    # only mv0 answers for its address (without it bond0 answers too, balanced by the driver,
    # and the client keeps whichever answer came last): the host's clients start on the active
    # slave, for rlbd to move
    srv sysctl -qw net.ipv4.conf.all.arp_ignore=1
    EXTRA_MACS="$MVH_MAC=mv0"
    for i in 1 2 3 4; do
        $IP netns add g$i || return 1
        NSES="$NSES g$i"
        $IP -n g$i link set lo up
        anchor g$i
        srv $IP link add mvg$i link bond0 address "$(gmac $i)" type macvlan mode bridge || return 1
        srv $IP link set mvg$i netns g$i || return 1
        $IP -n g$i link set mvg$i name eth0 || return 1
        $IP -n g$i link set eth0 up
        $IP -n g$i addr add "$(gip $i)/24" dev eth0 || return 1
    done
    SETUP_MAC0=$MAC0 SETUP_MAC1=$MAC1
    say "bond0 $(srv cat /sys/class/net/bond0/address); mv0 $MVH_MAC ($HOSTIP, the host's); guests g1..g4 $(gip 1)..$(gip 4) on macvlans in their own namespaces"
    say "bond0's own FDB entries: $(srv $BRIDGE fdb show dev bond0 | grep -v '^33:33\|^01:' | tr '\n' ';')"
    client_net "" "$GNET" "" || return 1
    guests_sinks
}

# rlbd took the host's own macvlan for the host's: no guest line names its MAC
guests_macvlan_checks() {
    [ "$G_KIND" = macvlan ] && [ "${GIVEN_UP:-0}" = 0 ] || return 0
    _placed=$(grep -ci "guest $(gmac 1)\|guest $(gmac 2)\|guest $(gmac 3)\|guest $(gmac 4)" /tmp/rlbd.log)
    ! grep -qi "guest $MVH_MAC" /tmp/rlbd.log && [ "$_placed" -gt 0 ]
    verdict $? own-macvlan "rlbd learns the containers' macvlans as guests and the host's own mv0 as the host's" \
        "$_placed log lines name a container's MAC; mv0's: $(grep -ci "guest $MVH_MAC" /tmp/rlbd.log)"
}
