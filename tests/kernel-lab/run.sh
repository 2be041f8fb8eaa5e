#!/usr/bin/env bash
# tests/kernel-lab/run.sh: test rlbd against the real Linux bonding driver in QEMU guests, on
# several Debian kernels, in several topologies.
#
# Usage (as root, Debian bookworm host with the Rust toolchain and gcc):
#   tests/kernel-lab/run.sh                      the CI run: the scenarios of PLAN per kernel
#   KERNELS=6.1 tests/kernel-lab/run.sh          one kernel (its scenarios of PLAN), for a quick loop
#   SCENARIOS=all tests/kernel-lab/run.sh        every scenario on every kernel
#   STANDIN=1 SCENARIOS=all tests/kernel-lab/run.sh
#                                                the scenarios' plumbing with a stand-in, not rlbd
#
# The host kernel may have no bonding driver, so this boots Debian's own kernels under QEMU (TCG),
# one boot per kernel, each with an initramfs holding busybox, the host's iproute2, the needed
# modules, rlbd, rlbd-lab (traffic), klab-arp (klab-arp.c: crafted and sniffed ARP) and
# klab-frames (klab-frames.c: frames counted by guest, rewritten and duplicated), and runs
# guest-test.sh inside it: each of that kernel's scenarios on a fresh balance-alb bond with two veth
# slaves behind a bridge whose server-facing ports are capped with tc tbf (guest-test.sh describes
# the scenarios and their checks). All traffic stays inside the guest; the only network used is
# Debian's apt mirrors (packages).
#
# Kernels (series as words):
#   5.10  bullseye's (linux-image-amd64 of bullseye; the oldest Debian still serves)
#   6.1   bookworm's
#   6.12  bookworm-backports' (trixie's series; .ko.xz modules, decompressed when unpacked)
# Scenarios (names as words): flat vlan two-vlans two-addresses bridge macvlan ipvlan qinq
#   (guest-test.sh describes each), with veth slaves; guests guests-vlan: four guests (namespaces)
#   behind a bridge over the bond (guests-macvlan: containers on macvlans over it,
#   guest-macvlan.sh), measured with the kernel alone and then with rlbd's [guests]
#   (guest-guests.sh; `PLAN="6.12:guests" tests/kernel-lab/run.sh`; each prints a
#   "guests: kernel-alone=..." line, collected at the end of the run); SCENARIO@NIC runs a scenario with slaves
#   that are QEMU-emulated NICs instead (NIC: igb, virtio, e1000e; all: flat@igb vlan@igb
#   two-addresses@igb flat@virtio flat@e1000e): each slave is wired (a QEMU hub) to a
#   virtio-net NIC of the same guest that is the switch's port, so every frame a client sends
#   leaves through one NIC driver and reaches the bond through the other, GRO, several queues
#   and the NIC taking VLAN tags out included. Every check of the scenario applies, and one
#   more: per slave and per second, the bytes rlbd counted agree with the NIC's own receive
#   counter within 1%. One boot carries all of a kernel's NICs.
# Which scenarios run on which kernel (PLAN): every topology on at least one kernel. The default,
#   "6.12:flat,vlan,two-vlans,two-addresses,bridge,macvlan,ipvlan,qinq,guests,guests-vlan,two-addresses@igb
#   6.1:flat 5.10:flat,bridge,guests", keeps the lab within ~15 minutes of CI (measured: a boot
#   15-30 s, a scenario 30-90 s; docs/labs.md): every topology on the newest driver, the guests
#   flat and VLAN-aware, two-addresses through igb NICs too (several queues, GRO), the basics on
#   the older two, on 5.10 the bridge, whose ARPs the driver before 6.0 balances itself, and the
#   guests given up there (the unit's capabilities cannot load their programs on 5.10);
#   guests-macvlan (65-70 s of guest time) is left out: the plan already takes about 12 minutes,
#   over the 10 it should stay within (docs/labs.md). "all" in PLAN is
#   every scenario, the NIC ones too. KERNELS alone picks kernels of PLAN (a kernel PLAN does not name runs flat);
#   SCENARIOS ("all" for every one) runs those scenarios on every kernel of KERNELS (default: all
#   three).
#
# Output: each guest's console streamed (without its KLAB-SAMPLE lines), then a table with one row
# per scenario and kernel (cache/results.txt), then the timings per kernel and in total. Exit
# code: 0 when every check on every kernel passed, 1 when a check failed, 2 when a guest never
# printed its result line (boot failure, timeout).
#
# Steps, each skipped when its result is cached in tests/kernel-lab/cache/:
#   1. qemu-system-x86 (bookworm-backports) and busybox-static through a private apt configuration
#      (tests/lib/debian.sh; /etc/apt is not modified); each kernel package downloaded with
#      `apt-get download` and unpacked into cache/kernel-<series>/ (never installed).
#   2. rlbd and rlbd-lab built (cargo build --release), klab-arp built (gcc -static).
#   3. per kernel: the initramfs cache/<series>/lab.cpio, the boot (console in
#      cache/<series>/console.log), and per scenario cache/<series>/chart-<scenario>.svg drawn
#      with `rlbd-lab chart` from the scenario's KLAB-SAMPLE/KLAB-MARK lines (a chart that cannot
#      be made is a warning, never a failure).
#
# Environment overrides:
#   PLAN="..."      kernel:scenario,scenario... (or kernel:all), in the order to boot (the
#                    default is above)
#   KERNELS          kernel series to run (default: PLAN's; with SCENARIOS: all three)
#   SCENARIOS        scenarios to run on every kernel instead of PLAN's ("all" for every one)
#   STANDIN=0        1: a stand-in sends the moves instead of rlbd (guest-lib.sh), to prove a
#                    scenario measures what it should; its results say STAND-IN, not rlbd
#   CAP_MBIT=30      per-port tbf cap toward the server, Mbit/s (20-50)
#   GUESTS_DAEMON=1  the guests scenarios measure the kernel alone, then start rlbd with
#                    "[guests] enabled = true" and judge its figures (guest-guests.sh); 0: the
#                    kernel alone only
#   TOTAL_X=1.9      the pair's total with steering must reach TOTAL_X x CAP_MBIT (or 97% of
#                    the lab's ceiling in that scenario when the lab carried less) within 10 s
#   BASE_SECONDS=3   traffic seconds per stage without steering
#   HOLD_SECONDS=4   seconds a re-ARPed move is followed beyond the first 2
#   WIRE=0           1: print every ARP frame that crossed the slaves (KLAB-ARP lines)
#   SAMPLE=0         N > 0: rlbd runs with [capture] max_frames_per_sec = N (100: the lab's
#                    slaves are counted 1 in 8-32), to show the same decisions sampled
#   TIMEOUT          seconds a guest may run before qemu is killed (default from the scenarios)
#   LAB_WAIT_PCT=25  a scenario during which the guest's vCPU threads waited for a host CPU this
#                    share of the time they had work, or more (schedstat; printed per scenario),
#                    gets a "LAB:" line: its timings carry a starved emulator
#   TCG_PROBE=60     seconds a TCG boot may take to reach /init before it is killed and retried
#   BOOT_TRIES=3     TCG boots tried (a boot that hangs before /init is retried)
#   RLBD_BIN=PATH    use this rlbd binary instead of building one with cargo (rlbd-lab, the test
#                    tooling, is then taken from beside it)
#   KEEP_CACHE=1     0 removes the downloaded/unpacked kernels and the initramfs after the run
#   ACCEL=auto       auto|tcg|kvm; auto tries KVM only when it is not kvm_pvm and boots in time
#   MIRROR, SECURITY_MIRROR  Debian mirror URLs (default: taken from /etc/apt/sources.list*;
#                    no built-in fallback, see tests/lib/debian.sh)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
CACHE="$HERE/cache"
ALL_KERNELS="5.10 6.1 6.12"
ALL_SCENARIOS="flat vlan two-vlans two-addresses bridge macvlan ipvlan qinq"
# guests behind a bridge over the bond (guest-guests.sh): veth slaves only
GUEST_SCENARIOS="guests guests-vlan guests-macvlan"
NIC_SCENARIOS="flat@igb vlan@igb two-addresses@igb flat@virtio flat@e1000e"
ALL_NICS="igb virtio e1000e"
# Per NIC: QEMU's device, and its PCI slots (decimal) "slave0,slave1,switch0,switch1": the
# switch's port i is wired to slave i (guest-lib.sh finds them by these addresses). An igb's
# virtual functions take the slots 16 and 17 past its own: igb on 4 and 6 keeps them (20-23)
# clear of every other device.
# virtio-net reports a speed only when given one, and balance-alb takes back a slave whose link
# returns only when its speed and duplex are known (as every real NIC's are)
declare -A NIC_DEVICE=([igb]=igb [virtio]=virtio-net-pci,speed=1000,duplex=full [e1000e]=e1000e)
declare -A NIC_SLOT=([igb]=4,6,5,7 [virtio]=8,9,10,11 [e1000e]=12,13,14,15)
declare -A NIC_MODULE=([igb]=igb [virtio]=virtio_net [e1000e]=e1000e)
DEFAULT_PLAN="6.12:flat,vlan,two-vlans,two-addresses,bridge,macvlan,ipvlan,qinq,guests,guests-vlan,two-addresses@igb 6.1:flat 5.10:flat,bridge,guests"
PLAN=${PLAN:-$DEFAULT_PLAN}
SCENARIOS=${SCENARIOS:-}
[ "$SCENARIOS" = all ] && SCENARIOS="$ALL_SCENARIOS $NIC_SCENARIOS $GUEST_SCENARIOS"
STANDIN=${STANDIN:-0}
GUESTS_DAEMON=${GUESTS_DAEMON:-1}
CAP_MBIT=${CAP_MBIT:-30}
TOTAL_X=${TOTAL_X:-1.9}
BASE_SECONDS=${BASE_SECONDS:-3}
HOLD_SECONDS=${HOLD_SECONDS:-4}
WIRE=${WIRE:-0}
SAMPLE=${SAMPLE:-0}
case "$SAMPLE" in *[!0-9]* | '') echo "SAMPLE must be a number" >&2; exit 2 ;; esac
TCG_PROBE=${TCG_PROBE:-60}
BOOT_TRIES=${BOOT_TRIES:-3}
KEEP_CACHE=${KEEP_CACHE:-1}
ACCEL=${ACCEL:-auto}
KVM_PROBE=${KVM_PROBE:-30}
LAB_NAME=run.sh
# bullseye carries the 5.10 kernel; always listed, so the private lists stay the same whichever
# KERNELS a run asks for
APT_EXTRA_SUITES="${APT_EXTRA_SUITES:+$APT_EXTRA_SUITES }bullseye"
# shellcheck source=tests/lib/debian.sh
. "$HERE/../lib/debian.sh"

[ "$(id -u)" = 0 ] || die "run as root (installs packages, boots a VM)"
case "$CAP_MBIT" in *[!0-9]* | '') die "CAP_MBIT must be an integer" ;; esac
{ [ "$CAP_MBIT" -ge 20 ] && [ "$CAP_MBIT" -le 50 ]; } || die "CAP_MBIT must be within 20-50"
known() { # $1: what, $2: word, $3: the known words
    case " $3 " in *" $2 "*) ;; *) die "$1: unknown '$2' (known: $3)" ;; esac
}
known_scenario() { # $1: a scenario, or SCENARIO@NIC
    case "$1" in
    *@*)
        known "scenario of $1 (PLAN, SCENARIOS)" "${1%@*}" "${ALL_SCENARIOS% qinq}"
        known "NIC of $1 (PLAN, SCENARIOS)" "${1#*@}" "$ALL_NICS"
        ;;
    *) known "scenario (PLAN, SCENARIOS)" "$1" "$ALL_SCENARIOS $GUEST_SCENARIOS" ;;
    esac
}
nics_of() { # $1: scenarios; prints the NICs they use, once each
    local n
    for n in $ALL_NICS; do
        case " $1 " in *"@$n "*) printf '%s ' "$n" ;; esac
    done
}
# SC_OF[kernel]: the scenarios that kernel's guest runs
declare -A SC_OF=()
plan_kernels=""
for e in $PLAN; do
    k=${e%%:*}
    known "PLAN kernel" "$k" "$ALL_KERNELS"
    [ "$e" != "$k" ] || die "PLAN: '$e' names no scenarios (kernel:scenario,scenario... or kernel:all)"
    v=${e#*:}
    [ "$v" = all ] && v="$ALL_SCENARIOS $NIC_SCENARIOS $GUEST_SCENARIOS"
    SC_OF[$k]=${v//,/ }
    plan_kernels="$plan_kernels $k"
done
if [ -n "$SCENARIOS" ]; then
    KERNELS=${KERNELS:-$ALL_KERNELS}
else
    KERNELS=${KERNELS:-$plan_kernels}
fi
[ -n "${KERNELS// /}" ] || die "no kernel to run (KERNELS, PLAN)"
for k in $KERNELS; do
    known KERNELS "$k" "$ALL_KERNELS"
    if [ -n "$SCENARIOS" ]; then
        SC_OF[$k]=$SCENARIOS
    elif [ -z "${SC_OF[$k]:-}" ]; then
        SC_OF[$k]=flat
    fi
    for s in ${SC_OF[$k]}; do known_scenario "$s"; done
done
case "$STANDIN" in 0 | 1) ;; *) die "STANDIN must be 0 or 1" ;; esac
case "$GUESTS_DAEMON" in 0 | 1) ;; *) die "GUESTS_DAEMON must be 0 or 1" ;; esac
# a scenario takes 15-70 s of guest time under TCG (per kernel: 90 + 150 s per scenario);
# generous, so only a hang hits it
TIMEOUT_SET=${TIMEOUT:-}
mkdir -p "$CACHE"
T_START=$(now)
log "plan: $(for K in $KERNELS; do printf '%s: %s; ' "$K" "${SC_OF[$K]}"; done | sed 's/; $//')$([ "$STANDIN" = 1 ] && echo ' (STAND-IN)')"

# ---------------------------------------------------------------------------------------------
# 1. Packages
# ---------------------------------------------------------------------------------------------
T_DL=$(now)
ensure_qemu_busybox
log "qemu and busybox ready ($(elapsed "$T_DL")s)"

# ---------------------------------------------------------------------------------------------
# 2. rlbd, rlbd-lab and klab-arp
# ---------------------------------------------------------------------------------------------
T_BUILD=$(now)
if [ -n "${RLBD_BIN:-}" ]; then
    [ -x "$RLBD_BIN" ] || die "RLBD_BIN=$RLBD_BIN is not an executable"
else
    # rlbd-lab is the workspace's other package (lab/): --workspace lets --bin reach it.
    log "cargo build --release --workspace --bin rlbd --bin rlbd-lab"
    (cd "$REPO" && cargo build --release --quiet --workspace --bin rlbd --bin rlbd-lab) ||
        die "cargo build --release failed"
    RLBD_BIN="${CARGO_TARGET_DIR:-$REPO/target}/release/rlbd"
    [ -x "$RLBD_BIN" ] || die "no $RLBD_BIN after cargo build"
fi
RLBD_LAB_BIN="$(dirname "$RLBD_BIN")/rlbd-lab"
[ -x "$RLBD_LAB_BIN" ] || die "no $RLBD_LAB_BIN (the labs' traffic tooling) beside $RLBD_BIN"
KARP_BIN="$CACHE/klab-arp"
KFRAMES_BIN="$CACHE/klab-frames"
for tool in klab-arp klab-frames; do
    if [ ! -x "$CACHE/$tool" ] || [ "$HERE/$tool.c" -nt "$CACHE/$tool" ]; then
        command -v gcc >/dev/null || die "no gcc to build $HERE/$tool.c"
        gcc -static -O2 -Wall -Wextra -Werror -o "$CACHE/$tool" "$HERE/$tool.c" ||
            die "gcc -static $tool.c failed (static glibc: libc6-dev)"
    fi
done
T_BUILD_END=$(elapsed "$T_BUILD")
log "built: $RLBD_BIN, $RLBD_LAB_BIN, $KARP_BIN, $KFRAMES_BIN (${T_BUILD_END}s)"

# ---------------------------------------------------------------------------------------------
# 3. One boot per kernel
# ---------------------------------------------------------------------------------------------
QPID=""
SCHED_PID=""
PIDFILE=""
cleanup() {
    local rc=$? p
    trap - EXIT INT TERM HUP
    [ -n "$QPID" ] && kill "$QPID" 2>/dev/null || true
    [ -n "$SCHED_PID" ] && kill "$SCHED_PID" 2>/dev/null || true
    if [ -n "$PIDFILE" ] && [ -s "$PIDFILE" ]; then
        p=$(cat "$PIDFILE" 2>/dev/null || true)
        if [ -n "$p" ] && grep -q qemu "/proc/$p/comm" 2>/dev/null; then
            kill "$p" 2>/dev/null || true
            sleep 1
            kill -9 "$p" 2>/dev/null || true
        fi
    fi
    if [ "$KEEP_CACHE" = 0 ]; then
        rm -rf "$CACHE"/kernel-* "$CACHE/debs" "$CACHE"/*/root "$CACHE"/*/lab.cpio "$CACHE/apt/lists"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT TERM HUP

# copy_with_libs SRC DEST: a host binary into $ROOT with every shared library it loads (ldd lists
# the loader too)
copy_with_libs() {
    install -D -m 0755 "$1" "$ROOT$2"
    local lib
    for lib in $(ldd "$1" 2>/dev/null | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^\//) print $i }'); do
        [ -e "$ROOT$lib" ] || install -D -m 0755 "$(readlink -f "$lib")" "$ROOT$lib"
    done
}

# build_initramfs: $ROOT and $CPIO for kernel $KVER in $KDIR
build_initramfs() {
    local a b src m p args
    rm -rf "$ROOT"
    mkdir -p "$ROOT"/{bin,sbin,usr/bin,usr/sbin,etc/lab,klab,proc,sys,dev,run,tmp,root,var,lib/modules/"$KVER"}
    ln -s ../run "$ROOT/var/run"
    # busybox with its applets as symlinks in /bin (iproute2 lives in /usr/sbin, called by path)
    cp "$BUSYBOX" "$ROOT/bin/busybox"
    for a in $("$BUSYBOX" --list); do
        [ "$a" = busybox ] || ln -s busybox "$ROOT/bin/$a"
    done
    for b in ip tc bridge ss; do
        src=$(PATH=/usr/sbin:/sbin:/usr/bin:/bin command -v "$b") || die "host has no iproute2 '$b'"
        copy_with_libs "$src" "/usr/sbin/$b"
    done
    copy_with_libs "$RLBD_BIN" /usr/bin/rlbd
    src=$(PATH=/usr/sbin:/sbin:/usr/bin:/bin command -v setpriv) || die "host has no setpriv (util-linux)"
    copy_with_libs "$src" /usr/bin/setpriv
    copy_with_libs "$RLBD_LAB_BIN" /usr/bin/rlbd-lab
    install -m 0755 "$KARP_BIN" "$ROOT/usr/bin/klab-arp"
    install -m 0755 "$KFRAMES_BIN" "$ROOT/usr/bin/klab-frames"

    # modules, dependencies first (from modules.dep); bonding without a default bond0
    local -A seen=()
    local order=()
    local moddir="$KDIR/lib/modules/$KVER"
    visit() { # $1: path relative to moddir
        [ -n "${seen[$1]:-}" ] && return 0
        seen[$1]=1
        local deps d
        deps=$(awk -v m="$1:" '$1 == m { $1 = ""; print }' "$moddir/modules.dep")
        for d in $deps; do visit "$d"; done
        order+=("$1")
    }
    # tcp_diag: ss -i (per-client bytes); 8021q: VLANs (802.1Q and 802.1ad); macvlan, ipvlan: their
    # scenarios; sch_ingress (clsact), cls_bpf: rlbd's counting at the tc hooks (Debian builds
    # both as modules; a real system loads them on demand, nothing here does)
    local nic_modules="" n
    # the switch's ports are virtio-net NICs
    for n in $(nics_of "${SC_OF[$K]}"); do nic_modules="$nic_modules ${NIC_MODULE[$n]} virtio_net"; done
    for m in veth llc stp bridge 8021q bonding macvlan ipvlan sch_tbf sch_htb tcp_diag sch_ingress cls_bpf $nic_modules; do
        if ! p=$(grep -oE "^[^:]*/$m\.ko(\.[a-z]+)?:" "$moddir/modules.dep" | tr -d ':'); then
            # built into the kernel (Debian builds virtio's core in): nothing to load
            grep -qE "/$m\.ko\$" "$moddir/modules.builtin" 2>/dev/null && continue
            die "module $m not in $KVER's modules.dep nor modules.builtin"
        fi
        visit "$p"
    done
    : >"$ROOT/etc/lab/modules"
    for p in "${order[@]}"; do
        case "$p" in *.ko) ;; *) die "compressed module $p: not supported" ;; esac
        install -D -m 0644 "$moddir/$p" "$ROOT/lib/modules/$KVER/$p"
        args=""
        [ "$(basename "$p")" = bonding.ko ] && args="max_bonds=0"
        echo "/lib/modules/$KVER/$p $args" >>"$ROOT/etc/lab/modules"
    done

    local slots=""
    for n in $ALL_NICS; do slots="$slots $n:${NIC_SLOT[$n]}"; done
    cat >"$ROOT/etc/lab/env" <<EOF2
NIC_SLOTS="${slots# }"
CAP_MBIT=$CAP_MBIT
SCENARIOS="${SC_OF[$K]}"
STANDIN=$STANDIN
GUESTS_DAEMON=$GUESTS_DAEMON
TOTAL_X=$TOTAL_X
BASE_SECONDS=$BASE_SECONDS
HOLD_SECONDS=$HOLD_SECONDS
WIRE=$WIRE
SAMPLE=$SAMPLE
KVER=$KVER
EOF2
    install -m 0755 "$HERE/guest-test.sh" "$ROOT/klab/guest-test.sh"
    install -m 0644 "$HERE/guest-lib.sh" "$HERE/guest-flat.sh" "$HERE/guest-guests.sh" "$HERE/guest-macvlan.sh" "$ROOT/klab/"
    cat >"$ROOT/init" <<'EOF2'
#!/bin/busybox sh
export PATH=/bin:/usr/bin:/usr/sbin:/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /tmp
echo "KLAB: init started at guest uptime $(cut -d' ' -f1 /proc/uptime)s, kernel $(uname -r), $(nproc) CPUs"
while read -r mod args; do
    insmod "$mod" $args || echo "KLAB: insmod $mod failed"
done </etc/lab/modules
. /etc/lab/env
export NIC_SLOTS CAP_MBIT SCENARIOS STANDIN GUESTS_DAEMON TOTAL_X BASE_SECONDS HOLD_SECONDS WIRE SAMPLE
sh /klab/guest-test.sh
rc=$?
if [ "$rc" = 0 ]; then
    echo "KLAB-RESULT: PASS"
else
    echo "KLAB-RESULT: FAIL (guest-test exit $rc)"
fi
sync
poweroff -f
EOF2
    chmod 0755 "$ROOT/init"
    (cd "$ROOT" && find . | LC_ALL=C sort | "$BUSYBOX" cpio -o -H newc >"$CPIO" 2>/dev/null)
    log "initramfs $CPIO: $(du -h "$CPIO" | cut -f1), ${#order[@]} modules"
}

strip_console() { sed -u -e 's/\x1b\[[0-9;?]*[A-Za-z]//g' -e 's/\x1b[()][A-Za-z0-9]//g' -e 's/\x1b[=>c]//g' -e 's/\r//g'; }
stream_console() { # $1: pid to follow
    tail -n +1 -s 0.2 -F --pid="$1" "$RAW" 2>/dev/null | strip_console | while IFS= read -r line; do
        case "$line" in "KLAB-SAMPLE "*) continue ;; esac # for the chart only (console.log has them)
        printf '[%s] %s\n' "$K" "$line"
        case "$line" in
        *"KLAB: init started"*) now >"$KCACHE/t_init" ;;
        "KLAB-SCENARIO "*" begin "* | "KLAB-SCENARIO "*" end "*) echo "$line $(now)" >>"$KCACHE/scwin" ;;
        esac
    done
}

# The emulator's own share of the host's CPUs, which the guest cannot see (under TCG its clock
# is the host's, and a starved emulator only shows as a slow guest): once a second, the time
# qemu's vCPU threads ("CPU N/TCG") ran and the time they waited for a host CPU (schedstat),
# "host_time run_ns wait_ns".
sched_sampler() { # $1: qemu's pidfile
    local p="" r w a b d c
    while :; do
        [ -z "$p" ] && [ -s "$1" ] && p=$(cat "$1" 2>/dev/null)
        if [ -n "$p" ]; then
            [ -d "/proc/$p" ] || break
            r=0 w=0
            for d in /proc/"$p"/task/*; do
                c=$(cat "$d/comm" 2>/dev/null) || continue
                case "$c" in "CPU "*) ;; *) continue ;; esac
                if read -r a b _ <"$d/schedstat" 2>/dev/null; then r=$((r + a)) w=$((w + b)); fi
            done
            echo "$(now) $r $w"
        fi
        sleep 1
    done
}
# Per scenario of this boot: the share of the time the guest's vCPUs had work that they waited
# for a host CPU (the guest then runs that much slower than the clock its figures are read on).
# At LAB_WAIT_PCT or more the scenario's figures are the starved emulator's: a "LAB:" line says
# so (printed with the guests' own at the end), whatever its checks said.
LAB_WAIT_PCT=${LAB_WAIT_PCT:-25}
sched_report() {
    [ -s "$KCACHE/scwin" ] && [ -s "$KCACHE/sched.log" ] || return 0
    awk -v k="$K" -v lim="$LAB_WAIT_PCT" -v out="$KCACHE/host-lab.txt" '
        NR == FNR { t[NR] = $1; r[NR] = $2; w[NR] = $3; n = NR; next }
        $3 == "begin" { b[$2] = $NF; next }
        $3 == "end" && ($2 in b) {
            i0 = 0; i1 = 0
            for (i = 1; i <= n; i++) { if (!i0 && t[i] >= b[$2]) i0 = i; if (t[i] <= $NF) i1 = i }
            if (!i0 || i1 <= i0) next
            dr = r[i1] - r[i0]; dw = w[i1] - w[i0]
            pct = (dr + dw > 0) ? 100 * dw / (dr + dw) : 0
            printf "emulator during %s on %s: its vCPUs ran %.1f s, waited %.1f s for a host CPU (%.0f%% of the time they had work)\n", $2, k, dr / 1e9, dw / 1e9, pct
            if (pct >= lim)
                printf "LAB: %s: the guest'"'"'s vCPUs waited for a host CPU %.0f%% of the time they had work (>= %d%%; other work on the host): its timings carry the starved emulator\n", $2, pct, lim >> out
        }' "$KCACHE/sched.log" "$KCACHE/scwin"
}

# qemu_nics NICS: per NIC, its two slaves, each wired to a virtio-net NIC (the switch's port) at
# the PCI slots of NIC_SLOT by a pair of UDP sockets on loopback: a cable, which drops what the far
# end cannot take. (A QEMU hub instead holds the sender's frames while the far NIC is down, and a
# switch port's transmit ring that never empties makes the clients' TCP, in this same kernel, hold
# back every retransmission of the segments in it.) The ports are this run's: 20 from a base
# picked from the process id.
qemu_nics() {
    local n i link=0 s a b
    local base=$((30000 + ($$ % 1500) * 20))
    for n in $1; do
        IFS=, read -r -a s <<<"${NIC_SLOT[$n]}"
        for i in 0 1; do
            link=$((link + 1))
            a=$((base + 2 * link)) b=$((base + 2 * link + 1))
            printf -- '-netdev dgram,id=sl%s%s,local.type=inet,local.host=127.0.0.1,local.port=%s,remote.type=inet,remote.host=127.0.0.1,remote.port=%s ' \
                "$n" "$i" "$a" "$b"
            printf -- '-device %s,netdev=sl%s%s,addr=0x%x,mac=52:54:00:1%x:00:0%s,romfile= ' \
                "${NIC_DEVICE[$n]}" "$n" "$i" "${s[$i]}" "$link" "$i"
            printf -- '-netdev dgram,id=sw%s%s,local.type=inet,local.host=127.0.0.1,local.port=%s,remote.type=inet,remote.host=127.0.0.1,remote.port=%s ' \
                "$n" "$i" "$b" "$a"
            printf -- '-device virtio-net-pci,netdev=sw%s%s,addr=0x%x,mac=52:54:00:2%x:00:0%s,romfile= ' \
                "$n" "$i" "${s[$((i + 2))]}" "$link" "$i"
        done
    done
}

boot() { # $1: tcg|kvm, $2: seconds to reach /init (0: no probe). Sets QRC.
    local accel=$1 probe=$2 i
    # debug-threads: the vCPU threads are named "CPU N/TCG" (sched_sampler finds them so)
    local qemu=(qemu-system-x86_64 -name klab,debug-threads=on -accel "$accel" -smp 2 -m 1024 -nographic -nic none -no-reboot
        -kernel "$VMLINUZ" -initrd "$CPIO" -append 'console=ttyS0 quiet panic=-1' -pidfile "$PIDFILE")
    qemu+=($(qemu_nics "$(nics_of "${SC_OF[$K]}")"))
    [ "$accel" = kvm ] && qemu+=(-cpu host)
    rm -f "$RAW" "$PIDFILE" "$KCACHE/t_init" "$KCACHE/scwin" "$KCACHE/sched.log" "$KCACHE/host-lab.txt"
    : >"$RAW"
    log "booting Linux $KVER ($accel, timeout ${TIMEOUT}s; host load average $(cut -d' ' -f1-3 /proc/loadavg)): ${qemu[*]}"
    T_BOOT=$(now)
    timeout -k 10 "$TIMEOUT" "${qemu[@]}" </dev/null >"$RAW" 2>&1 &
    QPID=$!
    stream_console "$QPID" &
    local spid=$!
    sched_sampler "$PIDFILE" >"$KCACHE/sched.log" 2>/dev/null &
    SCHED_PID=$!
    if [ "$probe" -gt 0 ]; then
        for ((i = 0; i < probe * 5; i++)); do
            [ -e "$KCACHE/t_init" ] && break
            kill -0 "$QPID" 2>/dev/null || break
            sleep 0.2
        done
        if [ ! -e "$KCACHE/t_init" ]; then
            log "$accel did not reach /init within ${probe}s (qemu failed or too slow); stopping it"
            kill "$QPID" "$SCHED_PID" 2>/dev/null || true
            wait "$QPID" 2>/dev/null || true
            wait "$spid" "$SCHED_PID" 2>/dev/null || true
            QPID=""
            QRC=255
            return 1
        fi
    fi
    QRC=0
    wait "$QPID" || QRC=$?
    QPID=""
    wait "$spid" 2>/dev/null || true
    kill "$SCHED_PID" 2>/dev/null || true
    wait "$SCHED_PID" 2>/dev/null || true
    return 0
}

# Under TCG the guest kernel sometimes hangs before /init with RCU stall reports ("timer wakeup
# didn't happen"): seen about once in a dozen boots here, always before /init, never after. A
# boot that has not reached /init within TCG_PROBE seconds (normal: 6-15 s) is killed and tried
# again, up to BOOT_TRIES times; a hang after /init still fails the run through TIMEOUT.
boot_tcg() {
    local try
    for ((try = 1; try <= BOOT_TRIES; try++)); do
        boot tcg "$TCG_PROBE" && return 0
        log "TCG boot $try of $BOOT_TRIES did not reach /init within ${TCG_PROBE}s"
    done
    QRC=2
    return 1
}

# chart per scenario, from the scenario's own lines of the console log (never fails the run)
charts() {
    local s seg out
    for s in ${SC_OF[$K]}; do
        seg="$KCACHE/console-$s.log"
        awk -v s="$s" '$0 ~ "KLAB-SCENARIO " s " begin" { on = 1 } on { print } $0 ~ "KLAB-SCENARIO " s " end" { on = 0 }' \
            "$CONSOLE" >"$seg"
        rm -f "$KCACHE/chart-$s.svg"
        if out=$("$RLBD_LAB_BIN" chart --input "$seg" --output "$KCACHE/chart-$s.svg" --cap "$CAP_MBIT" \
            --title "kernel lab, $s$([ "$STANDIN" = 1 ] && echo ' (STAND-IN, not rlbd)'): receive rate per bond slave (Linux $KVER, balance-alb, tbf $CAP_MBIT Mbit/s per port)" 2>&1); then
            log "chart: $KCACHE/chart-$s.svg (${out% -> *})"
        else
            log "warning: no chart for $s: ${out:-$RLBD_LAB_BIN chart gave no reason}"
        fi
    done
}

declare -A K_RESULT=() K_TIME=() K_VER=() K_LOAD=()
for K in $KERNELS; do
    T_K=$(now)
    KCACHE="$CACHE/$K"
    KDIR="$CACHE/kernel-$K"
    mkdir -p "$KCACHE"
    if ! KVER=$(kernel_version_in "$KDIR" 2>/dev/null) ||
        [ -n "$(find "$KDIR/lib/modules" -name '*.ko.xz' -print -quit 2>/dev/null)" ]; then
        KPKG=$(kernel_package_of_series linux-image-amd64 "$K") || exit 2
        KVER=$(fetch_kernel "$KPKG" "$KDIR") || exit 2
    fi
    K_VER[$K]=$KVER
    TIMEOUT=${TIMEOUT_SET:-$((90 + 150 * $(wc -w <<<"${SC_OF[$K]}")))}
    VMLINUZ="$KDIR/boot/vmlinuz-$KVER"
    log "kernel $K: $KVER ready ($(elapsed "$T_K")s)"
    ROOT="$KCACHE/root"
    CPIO="$KCACHE/lab.cpio"
    RAW="$KCACHE/console.raw"
    CONSOLE="$KCACHE/console.log"
    PIDFILE="$KCACHE/qemu.pid"
    build_initramfs

    case "$ACCEL" in
    tcg) boot_tcg || true ;;
    kvm) boot kvm 0 ;;
    auto)
        if [ -w /dev/kvm ] && [ ! -d /sys/module/kvm_pvm ] && boot kvm "$KVM_PROBE"; then
            :
        else
            [ -d /sys/module/kvm_pvm ] && log "/dev/kvm is kvm_pvm (nested PVM): an unmodified kernel does not boot on it; using TCG"
            boot_tcg || true
        fi
        ;;
    *) die "ACCEL must be auto, tcg or kvm" ;;
    esac
    strip_console <"$RAW" >"$CONSOLE"
    sched_report | while IFS= read -r l; do log "$l"; done
    T_INIT="n/a"
    [ -e "$KCACHE/t_init" ] && T_INIT=$(awk -v a="$T_BOOT" -v b="$(cat "$KCACHE/t_init")" 'BEGIN { printf "%.1f", b - a }')
    [ "$QRC" = 124 ] && log "qemu killed after TIMEOUT=${TIMEOUT}s"
    charts
    RESULT=$(grep -a '^KLAB-RESULT:' "$CONSOLE" | tail -n1 || true)
    case "$RESULT" in
    "KLAB-RESULT: PASS"*) K_RESULT[$K]=PASS ;;
    "KLAB-RESULT: FAIL"*) K_RESULT[$K]=FAIL ;;
    *) K_RESULT[$K]="no result (qemu exit $QRC)" ;;
    esac
    K_TIME[$K]=$(elapsed "$T_K")
    K_LOAD[$K]=$(cut -d' ' -f1-3 /proc/loadavg)
    log "kernel $K ($KVER): ${K_RESULT[$K]}; boot-to-init ${T_INIT}s, guest run $(elapsed "$T_BOOT")s, kernel total ${K_TIME[$K]}s; host load average now ${K_LOAD[$K]}; console log: $CONSOLE"
done

# ---------------------------------------------------------------------------------------------
# 4. The table: one row per scenario and kernel
# ---------------------------------------------------------------------------------------------
{
    echo "kernel lab: $( [ "$STANDIN" = 1 ] && echo 'STAND-IN MODE (not rlbd: proves the scenarios measure what they should)' || echo "rlbd $("$RLBD_BIN" --version 2>/dev/null | head -n1)"), cap $CAP_MBIT Mbit/s per slave, total needs ${TOTAL_X}x"
    echo "  base: the pair without steering, x cap; ceil: the lab ceiling (pair on sl0, another client on sl1, no steering; not a check), x cap;"
    echo "  move: s after traffic start; total: best 2 s window, x cap; mean: 5 s mean, x cap;"
    echo "  arrive: sl1 frame rate / moved client's payload rate (>= 0.95: all of it on sl1); failover: s until the moved client receives again"
    echo "  count_%: NIC scenarios, |rlbd's counted bytes - the NIC's receive counter| per slave, %: over the window (<= 1) / the worst second"
    echo "  (two-vlans: one figure per VLAN stage, 100/200; facts: macvlan: the moved client's Mbit/s per rp_filter setting; qinq: rlbd's exit status)"
    for s in $ALL_SCENARIOS $NIC_SCENARIOS $GUEST_SCENARIOS; do
        for K in $KERNELS; do
            case " ${SC_OF[$K]} " in *" $s "*) ;; *) continue ;; esac
            line=$(grep -a "^KLAB-SUMMARY scenario=$s " "$CACHE/$K/console.log" 2>/dev/null | tail -n1 || true)
            [ -n "$line" ] || line="KLAB-SUMMARY scenario=$s verdict=NO-RESULT"
            echo "$line kernel=$K"
        done
    done | awk '
        BEGIN { n = split("scenario kernel place base ceil move total mean arrive rearp hostarp failover count checks verdict time fact", col, " ")
                split("scenario kernel placement base_x ceil_x move_s total_x mean_x arrive re-ARP host_ARP failover count_% checks verdict guest_s facts", head, " ")
                for (i = 1; i <= n; i++) w[i] = length(head[i]) }
        { r++; for (i = 2; i <= NF; i++) { k = $i; sub(/=.*/, "", k); v = $i; sub(/^[^=]*=/, "", v); c[r, k] = v }
          for (i = 1; i <= n; i++) { v = c[r, col[i]]; if (v == "") c[r, col[i]] = v = "-"; if (length(v) > w[i]) w[i] = length(v) } }
        END { for (i = 1; i <= n; i++) printf "%-" w[i] + 2 "s", head[i]; print ""
              for (j = 1; j <= r; j++) { for (i = 1; i <= n; i++) printf "%-" w[i] + 2 "s", c[j, col[i]]; print "" } }'
} | tee "$CACHE/results.txt"

T_TOTAL=$(elapsed "$T_START")
timing="build ${T_BUILD_END}s"
for K in $KERNELS; do timing="$timing; $K (${K_VER[$K]}) ${K_TIME[$K]}s ${K_RESULT[$K]} (host load after: ${K_LOAD[$K]})"; done
log "timings: $timing; whole run ${T_TOTAL}s"
rc=0
for K in $KERNELS; do
    case "${K_RESULT[$K]}" in
    PASS) ;;
    FAIL) [ "$rc" = 0 ] && rc=1 ;;
    *) rc=2 ;;
    esac
done
# the guests scenarios' one line each, per kernel
for K in $KERNELS; do
    for s in $GUEST_SCENARIOS; do
        case " ${SC_OF[$K]} " in *" $s "*) ;; *) continue ;; esac
        line=$(awk -v s="$s" '$0 ~ "KLAB-SCENARIO " s " begin" { on = 1 } on && /^guests: / { l = $0 } $0 ~ "KLAB-SCENARIO " s " end" { on = 0 } END { print l }' "$CACHE/$K/console.log" 2>/dev/null)
        log "$K $s: ${line:-guests: no line (the scenario did not finish)}"
    done
done
for K in $KERNELS; do
    grep -a '^LAB: ' "$CACHE/$K/console.log" 2>/dev/null | sed "s/^/[run.sh] the emulator, not rlbd, on $K: /" || true
    sed "s/^/[run.sh] the emulator, on $K: /" "$CACHE/$K/host-lab.txt" 2>/dev/null || true
done
[ "$STANDIN" = 1 ] && log "STAND-IN MODE: rlbd was not tested"
log "RESULT: $([ $rc = 0 ] && echo PASS || echo FAIL) ($(for K in $KERNELS; do printf '%s: %s; ' "$K" "${SC_OF[$K]}"; done | sed 's/; $//'))"
exit "$rc"
