#!/bin/sh
# wire.sh: the system lab's "hardware", made at boot by lab-wire.service before the network
# configuration starts (see tests/system-lab/image/common/etc/systemd/system/lab-wire.service).
#
#   root namespace: sl0, sl1 (veth, down and unconfigured: systemd-networkd or ifupdown makes
#                   bond0 over them)
#   sw:  bridge br0 with ports p0, p1 (the peers of sl0, sl1; tc tbf CAP_MBIT toward the
#        server) and pc1..pc4 (the peers of the clients' eth0)
#   c1..c4: eth0 198.18.0.11 .. 198.18.0.14/24
set -eu
# shellcheck source=/dev/null # written by run.sh on the run disk
. /lab/env
for m in veth bridge sch_tbf; do modprobe "$m"; done
for ns in sw c1 c2 c3 c4; do
    ip netns add "$ns"
    ip -n "$ns" link set lo up
done
ip -n sw link add br0 type bridge stp_state 0 forward_delay 0
ip -n sw link set br0 up
for i in 0 1; do
    ip link add "sl$i" address "02:00:00:00:00:1$i" type veth peer name "p$i" netns sw
    ip -n sw link set "p$i" master br0
    ip -n sw link set "p$i" up
    # tbf's burst must hold at least rate/HZ (HZ=250); 64 kB does up to ~130 Mbit/s.
    tc -n sw qdisc add dev "p$i" root tbf rate "${CAP_MBIT}mbit" burst 64kb latency 50ms
done
for i in 1 2 3 4; do
    ip link add eth0 netns "c$i" address "02:00:00:00:01:0$i" type veth peer name "pc$i" netns sw
    ip -n sw link set "pc$i" master br0
    ip -n sw link set "pc$i" up
    ip -n "c$i" addr add "198.18.0.1$i/24" dev eth0
    ip -n "c$i" link set eth0 up
done
# Straight to the console: the host waits for this line to know that userspace runs.
echo "SLAB: wire: sl0, sl1 -> switch br0 (tbf ${CAP_MBIT} Mbit/s per port), clients c1..c4" | tee /dev/console
