# guest-lib.sh: helpers of the kernel-lab guest, sourced by guest-test.sh (busybox sh inside the
# QEMU guest that tests/kernel-lab/run.sh boots). Not meant for a host.
#
# Every scenario is built from one base (addresses in 198.18.0.0/16 only):
#   srv: bond0 (balance-alb, miimon 100) with slaves sl0, sl1 (veth); the server's addresses sit
#        on bond0, on VLANs over it, on a bridge over it or on a macvlan over it (per scenario)
#   sw:  bridge br0 with ports p0, p1 (peers of sl0, sl1; tc tbf CAP_MBIT toward the server) and
#        pc1..pc4 (peers of the clients' eth0)
#   c1..c4: eth0 with MAC 02:00:00:00:01:0N, addresses per scenario (198.18.<net>.1N)
# iproute2 is called by full path: busybox runs its own applets ahead of PATH.

IP=/usr/sbin/ip
TC=/usr/sbin/tc
SS=/usr/sbin/ss
RLBD=/usr/bin/rlbd
KARP=/usr/bin/klab-arp
RLBD_LAB=/usr/bin/rlbd-lab # test-only tooling: traffic sink and source
LAB_SINK="$RLBD_LAB sink"
LAB_SOURCE="$RLBD_LAB source"
CAP=${CAP_MBIT:-30}
PORT=5001
STANDIN=${STANDIN:-0}
BASE_SECONDS=${BASE_SECONDS:-3}
HOLD_SECONDS=${HOLD_SECONDS:-4}
# The issue's bar for "the two heavy clients reach two ports' worth".
TOTAL_X=${TOTAL_X:-1.9}
WIRE=${WIRE:-0}
# N > 0: rlbd samples past N packets a second (max_frames_per_sec).
SAMPLE=${SAMPLE:-0}

ts() { cut -d' ' -f1 /proc/uptime; }
say() { echo "[$(ts)] $*"; }
fcmp() { awk -v a="$1" -v b="$3" "BEGIN { exit !(a $2 b) }"; } # fcmp A '>=' B
fcalc() { awk "BEGIN { printf \"%.1f\", $1 }"; }
fcalc2() { awk "BEGIN { printf \"%.2f\", $1 }"; }
# In the server's namespace. Not for a background job that is killed later: `srv cmd &` forks a
# subshell, and killing it (its $!) would leave cmd running.
srv() { $IP netns exec srv "$@"; }
kernel_before() { # $1 $2: major minor; true when the running kernel is older
    _r=$(uname -r)
    _maj=${_r%%.*}; _r=${_r#*.}; _min=${_r%%[!0-9]*}
    [ "$_maj" -lt "$1" ] || { [ "$_maj" = "$1" ] && [ "$_min" -lt "$2" ]; }
}

# ---- verdicts ----------------------------------------------------------------------------------
# Each check prints "PASS: <scenario>/<id>: <what> -- <figures>" (or FAIL). Counts are kept per
# scenario (SC_*) and for the whole boot (ALL_*).
ALL_CHECKS=0
ALL_FAILS=0
# A throughput check that fell short while the guest's CPUs were busy (BUSY_LAB_PCT or more; a
# quiet host leaves them 60-70% busy at these rates) measured the emulator, not rlbd: it is
# said as "LAB:", counted apart (ALL_LAB) and not failed. What the move did is judged by the
# checks that do not ride on the emulator's speed (the frames' arrival on the new port).
BUSY_LAB_PCT=${BUSY_LAB_PCT:-90}
ALL_LAB=0
verdict_rate() { # $1: 0 = pass, $2: guest CPU busy %, $3..: as verdict's $2..
    if [ "$1" != 0 ] && [ "$2" -ge "$BUSY_LAB_PCT" ]; then
        SC_CHECKS=$((SC_CHECKS + 1)) ALL_CHECKS=$((ALL_CHECKS + 1)) ALL_LAB=$((ALL_LAB + 1))
        echo "LAB: $SC/$3: $4 -- $5; the guest's CPUs were $2% busy (>= $BUSY_LAB_PCT): the emulator was the ceiling here, not rlbd"
        return 0
    fi
    _v=$1
    shift 2
    verdict "$_v" "$@"
}
verdict() { # $1: 0 = pass, $2: check id, $3: what, $4: figures
    SC_CHECKS=$((SC_CHECKS + 1))
    ALL_CHECKS=$((ALL_CHECKS + 1))
    if [ "$1" = 0 ]; then
        echo "PASS: $SC/$2: $3 -- $4"
    else
        echo "FAIL: $SC/$2: $3 -- $4"
        SC_FAILS=$((SC_FAILS + 1))
        ALL_FAILS=$((ALL_FAILS + 1))
    fi
    return "$1"
}
# Figures for the summary table: fig KEY VALUE appends VALUE to F_KEY ("/"-separated per stage).
fig() { eval "F_$1=\"\${F_$1:+\$F_$1/}$2\""; }

# ---- rates -------------------------------------------------------------------------------------
# "uptime rx_sl0 rx_sl1": the server's slave counters from /proc/<pid>/net/dev of its anchor
# (see anchor), read with builtins right after the clock, so that neither a process start-up
# under TCG blurs the interval nor the reading loads the CPUs it measures
snap() {
    read -r _u _ </proc/uptime
    _r0=""; _r1=""
    while read -r _l; do
        case "$_l" in
        sl0:*) set -- ${_l#*:}; _r0=$1 ;;
        sl1:*) set -- ${_l#*:}; _r1=$1 ;;
        esac
    done <"/proc/$ANCHOR_srv/net/dev"
    echo "$_u $_r0 $_r1"
}
# "busy total": the guest's CPU time in jiffies, all CPUs (from /proc/stat's first line, read
# with builtins). Under TCG the guest's clock is the host's, so a starved emulator shows as a
# guest whose CPUs are busy: what the lab's figures carry is then the emulator's ceiling.
cpu_snap() {
    read -r _c _us _ni _sy _id _io _irq _sirq _st _ </proc/stat
    _b=$((_us + _ni + _sy + _irq + _sirq + _st))
    echo "$_b $((_b + _id + _io))"
}
busy_pct() { # $1 $2: two cpu_snap readings; the share of CPU time busy between them, %
    echo "$1 $2" | awk '{ d = $4 - $2; printf "%.0f", (d > 0 ? 100 * ($3 - $1) / d : 0) }'
}

# rates between two snaps: "mbit_sl0 mbit_sl1 mbit_total seconds"
rates() {
    echo "$1 $2" | awk '{ dt = $4 - $1; a = ($5 - $2) * 8 / dt / 1e6; b = ($6 - $3) * 8 / dt / 1e6;
        printf "%.1f %.1f %.1f %.1f\n", a, b, a + b, dt }'
}
print_table() { # $1: title, $2: "m0 m1 total dt"
    set -- "$1" $2
    echo "  $1 (window ${5}s, cap ${CAP} Mbit/s per port)"
    echo "    slave  MAC                rx Mbit/s"
    printf '    sl0    %s  %9s\n' "$MAC0" "$2"
    printf '    sl1    %s  %9s\n' "$MAC1" "$3"
    printf '    total                     %9s  (%.2fx cap)\n' "$4" "$(fcalc2 "$4 / $CAP")"
}
# TCP payload bytes the server received, per key, in the order given. A key is a client address
# (every connection from it) or CLIENT/SERVER (the connections from CLIENT to SERVER).
fbytes() {
    srv $SS -tniH state established "( sport = :$PORT )" | awk -v keys="$*" '
        BEGIN { n = split(keys, k, " ") }
        /bytes_received:/ {
            if (peer != "") {
                match($0, /bytes_received:[0-9]+/); v = substr($0, RSTART + 15, RLENGTH - 15)
                for (i = 1; i <= n; i++) if (k[i] == peer || k[i] == peer "/" local) b[i] += v
            }
            peer = ""; next
        }
        { peer = ""; local = ""; for (i = 1; i <= NF; i++) if ($i ~ /^[0-9.]+:[0-9]+$/) {
              a = $i; sub(/:[0-9]+$/, "", a); if (local == "") local = a; else peer = a } }
        END { for (i = 1; i <= n; i++) printf "%d ", b[i] + 0; print "" }'
}

# ---- where a client sends ----------------------------------------------------------------------
# Where a client sends is read from its ARP table through /proc/<pid>/net/arp of a process
# anchored in its namespace (anchor), with shell builtins: the loops below sample every 0.2 s,
# and a process per reading would load the emulated CPUs they measure. The *_v forms set a
# variable; the plain forms print it (for use outside the loops).
ANCHORS=""
anchor() { # $1: namespace
    $IP netns exec "$1" sleep 1000000 &
    eval "ANCHOR_$1=$!"
    ANCHORS="$ANCHORS $!"
}
# NMAC: the MAC in client $1's ARP table for address $2 (empty when none or incomplete)
nmac_v() {
    NMAC=""
    eval "_pid=\$ANCHOR_$1"
    while read -r _ip _hw _fl _mac _rest; do
        [ "$_ip" = "$2" ] && [ "$_fl" != 0x0 ] && NMAC=$_mac
    done <"/proc/$_pid/net/arp"
}
nmac() { nmac_v "$@"; echo "$NMAC"; }
slave_macs() { set -- $(srv cat /sys/class/net/sl0/address /sys/class/net/sl1/address); MAC0=$1; MAC1=$2; }
# SNAME: the name of server MAC $1 (sl0, sl1, a name from EXTRA_MACS "MAC=name ...", other, none)
sname_v() {
    case "$1" in
    "") SNAME=none; return ;;
    "$MAC0") SNAME=sl0; return ;;
    "$MAC1") SNAME=sl1; return ;;
    esac
    SNAME=other
    for _e in $EXTRA_MACS; do
        [ "${_e%%=*}" = "$1" ] && SNAME=${_e#*=}
    done
}
sname() { sname_v "$1"; echo "$SNAME"; }
# CSTATE: the port client $1 sends to for all of the addresses $2..: its name, or "mixed(a,b)"
cstate_v() {
    _c=$1
    shift
    CSTATE=""
    _all=""
    for _a in "$@"; do
        nmac_v "$_c" "$_a"
        sname_v "$NMAC"
        _all="${_all:+$_all,}$SNAME"
        [ -z "$CSTATE" ] && CSTATE=$SNAME
        [ "$CSTATE" != "$SNAME" ] && CSTATE=mixed
    done
    [ "$CSTATE" = mixed ] && CSTATE="mixed($_all)"
}
cstate() { cstate_v "$@"; echo "$CSTATE"; }

# The guest's uptime in centiseconds, in CS, from builtins only: the loops below sample every
# 0.2 s, and a process per clock reading would load the emulated CPUs they measure.
cs_now() {
    read _u _ </proc/uptime
    CS=$((${_u%.*} * 100 + 1${_u#*.} - 100))
}
secs() { printf '%d.%02d' $(($1 / 100)) $(($1 % 100)); } # centiseconds -> "s.cc"
# The best 2 s window of the pair's total, Mbit/s, in a file of "uptime rx_sl0 rx_sl1 ..." samples
# a second apart (0 with fewer than three)
best_window() {
    awk '{ t[NR] = $1; x[NR] = $2 + $3 } END { m = 0; for (i = 3; i <= NR; i++) { v = (x[i] - x[i - 2]) * 8 / (t[i] - t[i - 2]) / 1e6; if (v > m) m = v }
        printf "%.1f", m }' "$1"
}

# Follow client $1 (addresses $5..) from $2 (centiseconds) for $3 s, wanting port $4. Sets TRACE
# (changes, "t:port"), LAST, OK_AT (start of the final run on $4, or never), NDEV (samples not on
# $4) and MAXDEV (longest time off $4, s; a deviation still open at the end counts up to the end).
track() {
    _c=$1; _t0=$2; _dur=$(($3 * 100)); _want=$4
    shift 4
    TRACE=""; LAST=""; OK_AT=never; NDEV=0
    _max=0; _prev=""; _dev=""
    while :; do
        cs_now
        _rel=$((CS - _t0))
        [ "$_rel" -gt "$_dur" ] && break
        cstate_v "$_c" "$@"
        _s=$CSTATE
        [ "$_s" != "$_prev" ] && TRACE="$TRACE $(secs $_rel)s:$_s" && _prev=$_s
        if [ "$_s" = "$_want" ]; then
            if [ -n "$_dev" ]; then
                [ $((_rel - _dev)) -gt "$_max" ] && _max=$((_rel - _dev))
                _dev=""
            fi
            [ "$OK_AT" = never ] && OK_AT=$(secs $_rel)
        else
            NDEV=$((NDEV + 1))
            [ -z "$_dev" ] && _dev=$_rel
            OK_AT=never
        fi
        LAST=$_s
        sleep 0.2
    done
    [ -n "$_dev" ] && [ $((_dur - _dev)) -gt "$_max" ] && _max=$((_dur - _dev))
    MAXDEV=$(secs $_max)
}

# Sample the server's bytes per key ($3.., see fbytes) from $1 (centiseconds), every ~0.25 s, for
# at least 1.5 s and at most $2 s: it stops once every key has received again. Samples stay in
# /tmp/flow. Prints, per key, the first time (s after $1) at which an interval delivered more than
# FLOW_MIN bytes (3000, two segments, unless set), or "never". A flow sent to a dead MAC gets
# exactly nothing; one sharing a capped port may get little (TCP is unfair under tbf, and 5.10's
# more so after losses).
FLOW_MIN=3000
flow_track() {
    _t0=$1; _until=$(($2 * 100)); shift 2
    : >/tmp/flow
    while :; do
        cs_now
        _rel=$((CS - _t0))
        echo "$(secs $_rel) $(fbytes "$@")" >>/tmp/flow
        [ "$_rel" -gt "$_until" ] && break
        [ "$_rel" -gt 150 ] && awk -v n=$# -v min="$FLOW_MIN" '
            NR > 1 { for (i = 1; i <= n; i++) if ($(i + 1) - p[i] >= min) ok[i] = 1 }
            { for (i = 1; i <= n; i++) p[i] = $(i + 1) }
            END { for (i = 1; i <= n; i++) if (!ok[i]) exit 1 }' /tmp/flow && break
        sleep 0.25
    done
    awk -v n=$# -v min="$FLOW_MIN" '
        NR > 1 { for (i = 1; i <= n; i++) if (at[i] == "" && $(i + 1) - p[i] >= min) at[i] = $1 }
        { for (i = 1; i <= n; i++) p[i] = $(i + 1) }
        END { for (i = 1; i <= n; i++) printf "%s ", (at[i] == "" ? "never" : at[i]); print "" }' /tmp/flow
}
# kB delivered per interval for each key in /tmp/flow: "t:kB/kB ..."
flow_show() {
    awk 'NR > 1 { printf "%s:", $1; for (i = 2; i <= NF; i++) printf "%s%d", (i > 2 ? "/" : ""), ($i - p[i]) / 1000; printf " " }
        { for (i = 2; i <= NF; i++) p[i] = $i } END { print "" }' /tmp/flow
}

# ---- chart lines (run.sh draws one chart per scenario from them) --------------------------------
# KLAB-SAMPLE <uptime> sl0=<rx_bytes> sl1=<rx_bytes> every 0.5 s while a scenario runs; one shell
#   in the server's namespace reads the clock and both counters with builtins (no process per
#   sample but sleep); an unreadable counter prints as "sl1=".
# KLAB-MARK <uptime> <label> at the moments worth marking.
SAMPLER_PID=""
sampler_start() {
    [ -n "$SAMPLER_PID" ] && return 0
    $IP netns exec srv sh -c 'd=/sys/class/net; while :; do
        a=; b=; read t _ </proc/uptime; read a <$d/sl0/statistics/rx_bytes; read b <$d/sl1/statistics/rx_bytes
        echo "KLAB-SAMPLE $t sl0=$a sl1=$b"; sleep 0.5; done' 2>/dev/null &
    SAMPLER_PID=$!
}
sampler_stop() {
    [ -z "$SAMPLER_PID" ] && return 0
    kill "$SAMPLER_PID" 2>/dev/null
    wait "$SAMPLER_PID" 2>/dev/null
    SAMPLER_PID=""
}
mark() { read _mark_t _ </proc/uptime; echo "KLAB-MARK $_mark_t $*"; }

# ---- traffic -----------------------------------------------------------------------------------
SRC_PIDS=""
start_source() { # $1: client, $2: server address, $3: seconds
    $IP netns exec "$1" $LAB_SOURCE --to "$2:$PORT" --seconds "$3" >"/tmp/src-$1-$2.out" 2>&1 &
    SRC_PIDS="$SRC_PIDS $!"
}
stop_sources() {
    [ -z "$SRC_PIDS" ] && return 0
    kill $SRC_PIDS 2>/dev/null
    wait $SRC_PIDS 2>/dev/null
    SRC_PIDS=""
}
# every client of $1 ("c1 c3") to every address of $2, for $3 s
start_pair() {
    for _c in $1; do
        for _a in $2; do start_source "$_c" "$_a" "$3"; done
    done
}

cmac() { echo "02:00:00:00:01:0${1#c}"; } # c3 -> its eth0's MAC
cip() { echo "$2.1${1#c}"; }              # cip c3 198.18.100 -> 198.18.100.13

# ---- the base topology -------------------------------------------------------------------------
# With NIC set (a SCENARIO@NIC scenario), the slaves are QEMU-emulated NICs, each wired to a
# NIC that is the switch's port: run.sh's NIC_SLOTS gives each NIC's PCI slots (decimal) as
# NIC:slave0,slave1,switch0,switch1.
NIC=""
nic_port() { # $1: PCI slot (decimal); the netdev there, in this namespace (virtio's is a level down)
    _pd="/sys/bus/pci/devices/0000:00:$(printf %02x "$1").0"
    ls "$_pd/net/" "$_pd"/virtio*/net/ 2>/dev/null | grep -v -e '^$' -e ':$' | head -n 1
}
# nic_wire I: NIC slave I into srv as sl$I, its wired partner into sw as p$I. A namespace
# deleted by the last scenario hands its NICs back a moment later, under the names they had
# there (or devN when taken): they are found by their PCI address, waited for up to 10 s, and
# renamed twice (through a name no other device has) so that no name is ever taken.
nic_wire() {
    _slots=""
    for _e in $NIC_SLOTS; do [ "${_e%%:*}" = "$NIC" ] && _slots=${_e#*:}; done
    [ -n "$_slots" ] || { say "no PCI slots known for NIC $NIC (NIC_SLOTS: $NIC_SLOTS)"; return 1; }
    IFS=, read -r _s0 _s1 _w0 _w1 <<EOF2
$_slots
EOF2
    eval "_ss=\$_s$1 _ws=\$_w$1"
    _n=0
    while :; do
        _s=$(nic_port "$_ss")
        _w=$(nic_port "$_ws")
        [ -n "$_s" ] && [ -n "$_w" ] && break
        if [ $_n -ge 50 ]; then
            say "$NIC: no netdev at PCI slot $_ss or $_ws (driver not loaded?); netdevs: $(ls /sys/class/net | tr '\n' ' '); PCI: $(for _p in /sys/bus/pci/devices/*; do printf '%s=%s ' "${_p##*/}" "$(ls "$_p/net" "$_p"/virtio*/net 2>/dev/null | tr '\n' ,)"; done)"
            return 1
        fi
        sleep 0.2
        _n=$((_n + 1))
    done
    for _d in "$_s:nic$_ss:sl$1:srv" "$_w:nic$_ws:p$1:sw"; do
        IFS=: read -r _from _tmp _to _ns <<EOF2
$_d
EOF2
        $IP link set "$_from" down
        [ "$_from" = "$_tmp" ] || $IP link set "$_from" name "$_tmp" || return 1
        # another NIC's, back from the last scenario under this name: out of the way
        if [ -e "/sys/class/net/$_to" ]; then
            $IP link set "$_to" down
            $IP link set "$_to" name "x$(cat "/sys/class/net/$_to/ifindex")" || return 1
        fi
        $IP link set "$_tmp" name "$_to" || return 1
        $IP link set "$_to" netns "$_ns" || return 1
    done
    $IP -n srv link set "sl$1" address "02:00:00:00:00:1$1" || return 1
    # No interrupt throttling: the emulated Intel NICs time it on QEMU timers, which under TCG
    # hold a quiet queue's frames long enough for its TCP to time out (virtio has none).
    [ "$NIC" = virtio ] || srv klab-arp coalesce "sl$1" 0 || return 1
    say "sl$1: $NIC ($(sed -n 's/^DRIVER=//p' "/sys/bus/pci/devices/0000:00:$(printf %02x "$_ss").0/uevent" 2>/dev/null) driver), wired to p$1"
}
# cable SLAVE down|up: a cable pulled or put back: the slave's link, and with NICs the switch's
# port wired to it (a veth's peer loses its carrier by itself, a QEMU hub passes no link state;
# a switch whose port stays up keeps sending the slave's frames into it)
# A pulled cable: the slave goes down, and with NICs (whose link the switch's port does not
# follow) the switch's port leaves the bridge. It stays up: a port set down keeps the frames in
# its transmit ring, and since the clients' TCP shares this kernel, each client then holds back
# every retransmission of a segment still there (TcpExt TCPSpuriousRtxHostQueues), which no
# re-steering can help and no real client sees.
cable() {
    srv $IP link set "$1" "$2"
    [ -n "$NIC" ] || return 0
    if [ "$2" = down ]; then
        $IP -n sw link set "p${1#sl}" nomaster
    else
        $IP -n sw link set "p${1#sl}" master br0
    fi
    return 0
}
NSES=""
base_topology() {
    say "building the lab: bond0 balance-alb, 2 slaves${NIC:+ (emulated $NIC NICs)}, bridge, tbf ${CAP}mbit, 4 clients"
    for ns in srv sw c1 c2 c3 c4; do
        $IP netns add $ns || return 1
        NSES="$NSES $ns"
        $IP -n $ns link set lo up
        anchor $ns
    done
    $IP -n sw link add br0 type bridge stp_state 0 forward_delay 0 || return 1
    $IP -n sw link set br0 up
    $IP -n srv link add bond0 type bond mode balance-alb miimon 100 || return 1
    for i in 0 1; do
        if [ -n "$NIC" ]; then
            nic_wire $i || return 1
        else
            $IP link add sl$i netns srv address 02:00:00:00:00:1$i type veth peer name p$i netns sw || return 1
        fi
        $IP -n srv link set sl$i master bond0 || return 1
        $IP -n sw link set p$i master br0
        $IP -n sw link set p$i up
        # replace: a NIC keeps the qdisc of its last scenario
        $TC -n sw qdisc replace dev p$i root tbf rate "${CAP}mbit" burst 64kb latency 50ms || return 1
    done
    $IP -n srv link set bond0 up
    for i in 1 2 3 4; do
        $IP link add eth0 netns c$i address 02:00:00:00:01:0$i type veth peer name pc$i netns sw || return 1
        $IP -n sw link set pc$i master br0
        $IP -n sw link set pc$i up
        $IP -n c$i link set eth0 up
    done
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
    sampler_start
    sniff_start
}
# client addresses: $1 = interface suffix ("" or ".100"), $2 = net ("198.18.100"), VLAN id in $3,
# its protocol in $4 (802.1Q when empty, or 802.1ad)
client_net() {
    for i in 1 2 3 4; do
        dev=eth0
        if [ -n "$3" ]; then
            dev=eth0.$3
            $IP -n c$i link add link eth0 name "$dev" type vlan proto "${4:-802.1Q}" id "$3" || return 1
            $IP -n c$i link set "$dev" up
        fi
        $IP -n c$i addr add "$2.1$i/24" dev "$dev" || return 1
    done
}
start_sink() {
    $IP netns exec srv $LAB_SINK --listen "0.0.0.0:$PORT" >/tmp/sink.log 2>&1 &
    SINK_PID=$!
}
# "c1:ADDR=sl0 c2:ADDR=sl1 ...": each client pings ADDR in that order (the driver assigns ports
# round robin in ARP order) and the port its entry names right after is checked against the
# expected one ("sl0|mv0": either; empty: any); one check. Read at once because the server's own neighbour probes
# a few seconds later send the bond's MAC and blur the driver's answer until it re-announces.
# With $2 (seconds) the entries are read that long after the last ping instead: for a shape where
# the server's own ARP request follows each first contact (it reverts the client to the bond's
# MAC at once), the driver's placement shows only after its re-announcement 2-3 s later.
placement() {
    _got=""
    _ok=0
    for _p in $1; do
        _c=${_p%%:*}; _r=${_p#*:}; _a=${_r%%=*}
        $IP netns exec "$_c" ping -c 1 -W 3 "$_a" >/dev/null 2>&1 || say "$_c: ping $_a failed"
        [ -z "${2:-}" ] && placement_read "$_p"
    done
    if [ -n "${2:-}" ]; then
        _early=""
        for _p in $1; do
            _c=${_p%%:*}; _r=${_p#*:}; _a=${_r%%=*}
            _early="$_early $_c:$_a->$(sname "$(nmac "$_c" "$_a")")"
        done
        sleep "$2"
        for _p in $1; do placement_read "$_p"; done
        _got="$_got ($2 s after the last ping; right after it:$_early)"
    fi
    fig place "$([ $_ok = 0 ] && echo ok || echo BAD)"
    verdict $_ok place "the driver alone answers each client's ARP with the expected port" "wanted $(echo $1); got$_got"
}
placement_read() { # $1: "c1:ADDR=want"; appends to _got, _ok=1 on a mismatch
    _c=${1%%:*}; _r=${1#*:}; _a=${_r%%=*}; _want=${_r#*=}
    _s=$(sname "$(nmac "$_c" "$_a")")
    _got="$_got $_c:$_a->$_s"
    case "|$_want|" in "||" | *"|$_s|"*) ;; *) _ok=1 ;; esac
}

teardown() {
    stop_sources
    standin_stop
    steer_stop
    sampler_stop
    [ -n "${SNIFF_PID:-}" ] && kill "$SNIFF_PID" 2>/dev/null && wait "$SNIFF_PID" 2>/dev/null
    SNIFF_PID=""
    [ -n "${SINK_PID:-}" ] && kill "$SINK_PID" 2>/dev/null && wait "$SINK_PID" 2>/dev/null
    SINK_PID=""
    [ -n "$ANCHORS" ] && kill $ANCHORS 2>/dev/null && wait $ANCHORS 2>/dev/null
    ANCHORS=""
    # a process left in a namespace keeps it, its devices and its CPU use alive into the next
    # scenario: say so and end it
    for ns in $NSES; do
        _left=$($IP netns pids "$ns" 2>/dev/null | tr '\n' ' ')
        if [ -n "$_left" ]; then
            say "teardown: processes left in $ns: $(for _p in $_left; do printf '%s(%s) ' "$_p" "$(cat /proc/$_p/comm 2>/dev/null)"; done)"
            kill $_left 2>/dev/null
        fi
        $IP netns del "$ns" 2>/dev/null
    done
    NSES=""
}

# ---- the wire ----------------------------------------------------------------------------------
# Every ARP frame in or out of sl0/sl1 goes to /tmp/arp.log (klab-arp sniff) while a scenario
# runs; wire_summary counts what left the slaves, by kind and VLAN:
#   steer   a gratuitous-form reply (sender = target): rlbd's update (or the stand-in's)
#   driver  any other reply: the driver's answer or re-announcement
#   request the host's ARP requests
SNIFF_PID=""
sniff_start() {
    $IP netns exec srv $KARP sniff 100000 sl0 sl1 >/tmp/arp.log 2>/tmp/arp.err &
    SNIFF_PID=$!
}
wire_summary() {
    [ "$WIRE" = 1 ] && sed 's/^/KLAB-ARP /' /tmp/arp.log
    # fields: ARP t iface dir vlan=V src > dst op sha= spa= tha= tpa=
    awk '$4 == "out" {
            kind = ($9 == "request") ? "request" : "driver"
            if ($9 == "reply" && substr($10, 5) == substr($12, 5) && substr($11, 5) == substr($13, 5)) kind = "steer"
            n[$3 " " kind " " $5]++ }
        END { for (k in n) print k, n[k] }' /tmp/arp.log | sort | awk '
        { printf "%s%s %s %s: %d", (NR > 1 ? "; " : ""), $1, $2, $3, $4 } END { print "" }' |
        sed "s/^/KLAB-WIRE $SC (ARP frames out of the slaves): /"
    [ -s /tmp/arp.err ] && say "klab-arp sniff: $(head -n 3 /tmp/arp.err)"
}

# ---- steering: rlbd, or (STANDIN=1) the stand-in ----------------------------------------------
RLBD_PID=""
steer_start() { # rlbd on bond0 for the scenario (nothing in stand-in mode)
    [ "$STANDIN" = 1 ] && return 0
    mark "rlbd started"
    # Without CAP_SYS_ADMIN and CAP_PERFMON, as the packaged unit runs it: the verifier refuses
    # such a user programs it lets full root load.
    _conf=""
    if [ "$SAMPLE" -gt 0 ]; then
        printf '[capture]\nmax_frames_per_sec = %s\n' "$SAMPLE" >/tmp/rlbd-sample.toml
        _conf="--config /tmp/rlbd-sample.toml"
    fi
    # shellcheck disable=SC2086 # _conf: no argument, or two
    $IP netns exec srv /usr/bin/setpriv --bounding-set=-sys_admin,-perfmon \
        $RLBD run $_conf --bond bond0 --capacity "sl0=$CAP" --capacity "sl1=$CAP" -v >/tmp/rlbd.log 2>&1 &
    RLBD_PID=$!
    sleep 1
    if rlbd_alive; then
        say "rlbd running (pid $RLBD_PID)"
        # Every one of the lab's kernels can count in the kernel (eBPF; rlbd runs as root here,
        # without CAP_SYS_ADMIN and CAP_PERFMON),
        # in the slot table the daemon maps (Linux >= 5.5), not the hash fallback, at the tc
        # hooks (a ring buffer for ARP/ND: Linux >= 5.8), not in a socket filter behind a
        # packet tap: through tcx links where the kernel has them (Linux >= 6.6), else clsact
        # and cls_bpf direct-action filters.
        # A slave's socket opens when rlbd sees it: under TCG that can take a few seconds.
        # On 5.10 the verifier refuses a user without CAP_PERFMON any comparison with a pointer
        # ("R3 pointer comparison prohibited"), so no program there can bound a packet pointer:
        # the tc program cannot load, and the socket filter (no packet pointers) counts.
        _hook="tc, attached: tcx"
        case "$(uname -r)" in
            5.10.*) _hook=socket ;;
            5.* | 6.[0-5].*) _hook="tc, attached: cls_bpf" ;;
        esac
        _t=0
        while :; do
            _n=$(grep -o "port sl[01]: counting every frame in the kernel (eBPF, map: slots, hook: $_hook)" /tmp/rlbd.log | sort -u | wc -l | tr -d ' ')
            _why=$(grep -m1 -e 'cannot count in the kernel' -e 'not at the tc hooks' /tmp/rlbd.log | cut -c1-300)
            [ "$_hook" = socket ] && _why=$(grep -m1 -e 'cannot count in the kernel' /tmp/rlbd.log | cut -c1-300)
            [ "$_n" = 2 ] || [ -n "$_why" ] || [ "$_t" -ge 10 ] && break
            sleep 1
            _t=$((_t + 1))
        done
        [ "$_n" = 2 ]
        verdict $? ebpf "rlbd counts both slaves' frames in the kernel (eBPF, slot table, hook: $_hook)" "$_n of 2 ports${_why:+; $_why}"
    else
        wait "$RLBD_PID"
        say "rlbd exited at once (status $?): $(tail -n 3 /tmp/rlbd.log)"
    fi
}
rlbd_alive() { [ -n "$RLBD_PID" ] && kill -0 "$RLBD_PID" 2>/dev/null; }
steer_stop() {
    [ -z "$RLBD_PID" ] && return 0
    kill "$RLBD_PID" 2>/dev/null
    wait "$RLBD_PID" 2>/dev/null
    RLBD_PID=""
    if [ "$SAMPLE" -gt 0 ]; then
        _most=$(sed -n 's/.*counting one frame in \([0-9]*\) in the kernel.*/\1/p' /tmp/rlbd.log | sort -n | tail -n1)
        echo "KLAB-RATIO $SC (sampled): max_frames_per_sec $SAMPLE, counted at most 1 in ${_most:-1}"
        # A sampled run whose ports were never sampled showed nothing: say so as a failure.
        if grep -q "counting every frame in the kernel" /tmp/rlbd.log; then
            [ "${_most:-1}" -ge 2 ]
            verdict $? sampled "rlbd counted the slaves sampled, as on a busy port" \
                "max_frames_per_sec $SAMPLE: at most 1 in ${_most:-1}"
        fi
    fi
    n=$(wc -l </tmp/rlbd.log)
    echo "--- rlbd log ($n lines; the last ${RLBD_LOG_LINES:-60}) ---"
    tail -n "${RLBD_LOG_LINES:-60}" /tmp/rlbd.log
    echo "--- end of rlbd log ---"
}

# The stand-in (STANDIN=1 only): not rlbd, a fixed-purpose loop that proves a scenario measures
# what it should. Every 0.3 s it sends each target "CLIENT/SERVER_IP/VLAN" the update rlbd would
# send (klab-arp send: gratuitous-form unicast reply, tagged when VLAN is set) naming sl1's MAC,
# out of sl1 while sl1 is up, else sl0's out of sl0. It reads the MACs each time (alb swaps them
# when the active slave changes). It never looks at the wire: its repeats are what re-assert.
STANDIN_PID=""
standin_start() { # $1: targets "c1/198.18.0.1/ c1/198.18.100.1/100 ..."
    [ "$STANDIN" = 1 ] || return 0
    standin_stop
    mark "stand-in started"
    _sargs=""
    for _t in $1; do
        _c=${_t%%/*}; _r=${_t#*/}; _a=${_r%%/*}; _v=${_r#*/}
        _sargs="$_sargs $(cmac "$_c")/$_a/$_v"
    done
    $IP netns exec srv sh -c 'd=/sys/class/net; while :; do
        read st <$d/sl1/operstate
        if [ "$st" = up ]; then p=sl1; else p=sl0; fi
        read m <$d/$p/address
        for t in '"$_sargs"'; do
            c=${t%%/*}; r=${t#*/}; a=${r%%/*}; v=${r#*/}
            '"$KARP"' send $p $m $c $a $v
        done
        sleep 0.3
    done' >/tmp/standin.log 2>&1 &
    STANDIN_PID=$!
    say "STAND-IN (not rlbd) moving$(for _t in $1; do printf ' %s' "$_t"; done) to sl1"
}
standin_stop() {
    [ -z "$STANDIN_PID" ] && return 0
    kill "$STANDIN_PID" 2>/dev/null
    wait "$STANDIN_PID" 2>/dev/null
    STANDIN_PID=""
}
