#!/usr/bin/env bash
# tests/kernel-lab/run.sh: test rlbd against a real Linux bonding driver in a QEMU guest.
#
# Usage (as root, Debian bookworm host with the Rust toolchain):
#   tests/kernel-lab/run.sh
#
# The host kernel may have no bonding driver, so this boots Debian's own kernel under QEMU (TCG)
# with an initramfs holding busybox, the host's iproute2, the needed modules and rlbd, and runs
# tests/kernel-lab/guest-test.sh inside it: a balance-alb bond with two veth slaves behind a
# bridge whose server-facing ports are capped with tc tbf, four clients, bulk TCP traffic.
#   phase 1: the driver alone (no rlbd): c1 and c3 share slave 0, the bond gets one port's cap;
#   phase 2: `rlbd run` must move one of them to slave 1 and keep it there (re-ARP, server ARP
#            request, slave failure, active-slave change).
# All traffic stays inside the guest; the only network used is Debian's apt mirrors (packages).
# The exit code is the guest's verdict: 0 when every check passed, 1 when a check failed, 2 when
# the guest never printed its result line (boot failure, timeout).
#
# Steps, each skipped when its result is cached in tests/kernel-lab/cache/:
#   1. qemu-system-x86 from bookworm-backports and busybox-static, installed through a private apt
#      configuration (cache/apt/; /etc/apt is not modified); Debian's kernel package (the one
#      linux-image-amd64 depends on) downloaded with `apt-get download`, unpacked with dpkg-deb -x
#      (not installed), modules.dep made with `busybox depmod`.
#   2. rlbd built (cargo build --release), initramfs cache/lab.cpio built.
#   3. the guest booted; its console is streamed here (without its KLAB-SAMPLE lines) and kept in
#      cache/console.log.
#   4. (always, pass or fail) cache/chart.svg drawn from the console log with `rlbd-lab chart`:
#      the receive rate of sl0 and sl1 over time from the guest's `KLAB-SAMPLE <uptime>
#      sl0=<rx_bytes> sl1=<rx_bytes>` lines (every 0.5 s through phases 1 and 2), with the
#      moments of its `KLAB-MARK <uptime> <label>` lines marked. A chart that cannot be made is a
#      warning, never a failure.
#
# Environment overrides:
#   CAP_MBIT=30      per-port tbf cap toward the server, Mbit/s (20-50)
#   TIMEOUT=300      seconds for the whole guest run before qemu is killed
#   TCG_PROBE=60     seconds a TCG boot may take to reach /init before it is killed and retried
#   BOOT_TRIES=3     TCG boots tried (a boot that hangs before /init is retried)
#   RLBD_BIN=PATH    use this rlbd binary instead of building one with cargo (rlbd-lab, the test
#                    tooling, is then taken from beside it)
#   KEEP_CACHE=1     0 removes the downloaded/unpacked kernel and the initramfs after the run
#   PHASES="1 2"     which guest phases to run ("1" = driver-only baseline)
#   SECONDS_1=8      traffic seconds in phase 1
#   ACCEL=auto       auto|tcg|kvm; auto tries KVM only when it is not kvm_pvm and boots in time
#   MIRROR, SECURITY_MIRROR  Debian mirror URLs (default: taken from /etc/apt/sources.list*;
#                    no built-in fallback, see tests/lib/debian.sh)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
CACHE="$HERE/cache"
CAP_MBIT=${CAP_MBIT:-30}
TIMEOUT=${TIMEOUT:-300}
TCG_PROBE=${TCG_PROBE:-60}
BOOT_TRIES=${BOOT_TRIES:-3}
KEEP_CACHE=${KEEP_CACHE:-1}
PHASES=${PHASES:-1 2}
SECONDS_1=${SECONDS_1:-8}
ACCEL=${ACCEL:-auto}
KVM_PROBE=${KVM_PROBE:-30}
LAB_NAME=run.sh
# shellcheck source=tests/lib/debian.sh
. "$HERE/../lib/debian.sh"

[ "$(id -u)" = 0 ] || die "run as root (installs packages, boots a VM)"
case "$CAP_MBIT" in *[!0-9]* | '') die "CAP_MBIT must be an integer" ;; esac
{ [ "$CAP_MBIT" -ge 20 ] && [ "$CAP_MBIT" -le 50 ]; } || die "CAP_MBIT must be within 20-50"
mkdir -p "$CACHE"
T_START=$(now)

# ---------------------------------------------------------------------------------------------
# 1. Packages and the kernel
# ---------------------------------------------------------------------------------------------
T_DL=$(now)
ensure_qemu_busybox
KDIR="$CACHE/kernel"
if ! KVER=$(kernel_version_in "$KDIR" 2>/dev/null); then
    KPKG=$(kernel_package_of linux-image-amd64)
    KVER=$(fetch_kernel "$KPKG" "$KDIR")
fi
VMLINUZ="$KDIR/boot/vmlinuz-$KVER"
T_DL_END=$(elapsed "$T_DL")
log "packages and kernel $KVER ready (${T_DL_END}s)"

# ---------------------------------------------------------------------------------------------
# 2. rlbd and the initramfs
# ---------------------------------------------------------------------------------------------
T_BUILD_END="skipped (RLBD_BIN given)"
if [ -n "${RLBD_BIN:-}" ]; then
    [ -x "$RLBD_BIN" ] || die "RLBD_BIN=$RLBD_BIN is not an executable"
else
    log "cargo build --release"
    T_CARGO=$(now)
    (cd "$REPO" && cargo build --release --quiet --bin rlbd --bin rlbd-lab) || die "cargo build --release failed"
    RLBD_BIN="${CARGO_TARGET_DIR:-$REPO/target}/release/rlbd"
    [ -x "$RLBD_BIN" ] || die "no $RLBD_BIN after cargo build"
    T_BUILD_END="$(elapsed "$T_CARGO")s"
    log "built $RLBD_BIN ($T_BUILD_END)"
fi

T_INITRD=$(now)
ROOT="$CACHE/root"
CPIO="$CACHE/lab.cpio"
MODDIR="$KDIR/lib/modules/$KVER"
rm -rf "$ROOT"
mkdir -p "$ROOT"/{bin,sbin,usr/bin,usr/sbin,etc/lab,proc,sys,dev,run,tmp,root,var,lib/modules/"$KVER"}
ln -s ../run "$ROOT/var/run"

# busybox with its applets as symlinks in /bin (iproute2 lives in /usr/sbin and is called by path)
cp "$BUSYBOX" "$ROOT/bin/busybox"
for a in $("$BUSYBOX" --list); do
    [ "$a" = busybox ] || ln -s busybox "$ROOT/bin/$a"
done

# host binaries and every shared library they load (ldd lists the loader too)
copy_with_libs() { # $1: source binary, $2: destination path inside the root
    install -D -m 0755 "$1" "$ROOT$2"
    local lib
    for lib in $(ldd "$1" 2>/dev/null | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^\//) print $i }'); do
        [ -e "$ROOT$lib" ] || install -D -m 0755 "$(readlink -f "$lib")" "$ROOT$lib"
    done
}
for b in ip tc bridge ss; do
    src=$(PATH=/usr/sbin:/sbin:/usr/bin:/bin command -v "$b") || die "host has no iproute2 '$b'"
    copy_with_libs "$src" "/usr/sbin/$b"
done
copy_with_libs "$RLBD_BIN" /usr/bin/rlbd
RLBD_LAB_BIN="$(dirname "$RLBD_BIN")/rlbd-lab"
[ -x "$RLBD_LAB_BIN" ] || die "no $RLBD_LAB_BIN (the labs' traffic tooling) beside $RLBD_BIN"
copy_with_libs "$RLBD_LAB_BIN" /usr/bin/rlbd-lab

# modules, dependencies first (from modules.dep); bonding without a default bond0
declare -A MOD_SEEN=()
MOD_ORDER=()
mod_visit() { # $1: path relative to MODDIR
    [ -n "${MOD_SEEN[$1]:-}" ] && return 0
    MOD_SEEN[$1]=1
    local deps d
    deps=$(awk -v m="$1:" '$1 == m { $1 = ""; print }' "$MODDIR/modules.dep")
    for d in $deps; do mod_visit "$d"; done
    MOD_ORDER+=("$1")
}
for m in veth llc stp bridge bonding sch_tbf sch_htb tcp_diag; do # tcp_diag: ss -i (per-client bytes)
    p=$(grep -oE "^[^:]*/$m\.ko(\.[a-z]+)?:" "$MODDIR/modules.dep" | tr -d ':') || die "module $m not in modules.dep"
    mod_visit "$p"
done
: >"$ROOT/etc/lab/modules"
for p in "${MOD_ORDER[@]}"; do
    case "$p" in *.ko) ;; *) die "compressed module $p: not supported" ;; esac
    install -D -m 0644 "$MODDIR/$p" "$ROOT/lib/modules/$KVER/$p"
    args=""
    [ "$(basename "$p")" = bonding.ko ] && args="max_bonds=0"
    echo "/lib/modules/$KVER/$p $args" >>"$ROOT/etc/lab/modules"
done

cat >"$ROOT/etc/lab/env" <<EOF2
CAP_MBIT=$CAP_MBIT
PHASES="$PHASES"
SECONDS_1=$SECONDS_1
KVER=$KVER
EOF2
install -m 0755 "$HERE/guest-test.sh" "$ROOT/guest-test.sh"
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
export CAP_MBIT PHASES SECONDS_1
sh /guest-test.sh
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
T_INITRD_END=$(elapsed "$T_INITRD")
log "initramfs $CPIO: $(du -h "$CPIO" | cut -f1), ${#MOD_ORDER[@]} modules (${T_INITRD_END}s)"

# ---------------------------------------------------------------------------------------------
# 3. Boot
# ---------------------------------------------------------------------------------------------
RAW="$CACHE/console.raw"
CONSOLE="$CACHE/console.log"
PIDFILE="$CACHE/qemu.pid"
QPID=""
cleanup() {
    local rc=$? p
    trap - EXIT INT TERM HUP
    [ -n "$QPID" ] && kill "$QPID" 2>/dev/null || true
    if [ -s "$PIDFILE" ]; then
        p=$(cat "$PIDFILE" 2>/dev/null || true)
        if [ -n "$p" ] && grep -q qemu "/proc/$p/comm" 2>/dev/null; then
            kill "$p" 2>/dev/null || true
            sleep 1
            kill -9 "$p" 2>/dev/null || true
        fi
    fi
    if [ "$KEEP_CACHE" = 0 ]; then
        rm -rf "$CACHE/kernel" "$CACHE/kernel.tmp" "$CACHE/debs" "$CACHE/root" "$CPIO" "$CACHE/apt/lists"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT TERM HUP

strip_console() { sed -u -e 's/\x1b\[[0-9;?]*[A-Za-z]//g' -e 's/\x1b[()][A-Za-z0-9]//g' -e 's/\x1b[=>c]//g' -e 's/\r//g'; }
stream_console() { # $1: pid to follow
    tail -n +1 -s 0.2 -F --pid="$1" "$RAW" 2>/dev/null | strip_console | while IFS= read -r line; do
        case "$line" in "KLAB-SAMPLE "*) continue ;; esac # for the chart only (console.log has them)
        printf '%s\n' "$line"
        case "$line" in *"KLAB: init started"*) now >"$CACHE/t_init" ;; esac
    done
}

boot() { # $1: tcg|kvm, $2: seconds to reach /init (0: no probe). Sets QRC.
    local accel=$1 probe=$2 i
    local qemu=(qemu-system-x86_64 -accel "$accel" -smp 2 -m 1024 -nographic -nic none -no-reboot
        -kernel "$VMLINUZ" -initrd "$CPIO" -append 'console=ttyS0 quiet panic=-1' -pidfile "$PIDFILE")
    [ "$accel" = kvm ] && qemu+=(-cpu host)
    rm -f "$RAW" "$PIDFILE" "$CACHE/t_init"
    : >"$RAW"
    log "booting ($accel): ${qemu[*]}"
    T_BOOT=$(now)
    timeout -k 10 "$TIMEOUT" "${qemu[@]}" </dev/null >"$RAW" 2>&1 &
    QPID=$!
    stream_console "$QPID" &
    local spid=$!
    if [ "$probe" -gt 0 ]; then
        for ((i = 0; i < probe * 5; i++)); do
            [ -e "$CACHE/t_init" ] && break
            kill -0 "$QPID" 2>/dev/null || break
            sleep 0.2
        done
        if [ ! -e "$CACHE/t_init" ]; then
            log "$accel did not reach /init within ${probe}s (qemu failed or too slow); stopping it"
            kill "$QPID" 2>/dev/null || true
            wait "$QPID" 2>/dev/null || true
            wait "$spid" 2>/dev/null || true
            QPID=""
            QRC=255
            return 1
        fi
    fi
    QRC=0
    wait "$QPID" || QRC=$?
    QPID=""
    wait "$spid" 2>/dev/null || true
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

T_INIT="n/a"
[ -e "$CACHE/t_init" ] && T_INIT=$(awk -v a="$T_BOOT" -v b="$(cat "$CACHE/t_init")" 'BEGIN { printf "%.1f", b - a }')
log "timings: packages+kernel ${T_DL_END}s, cargo build ${T_BUILD_END}, initramfs ${T_INITRD_END}s, boot-to-init ${T_INIT}s, guest run $(elapsed "$T_BOOT")s, whole run $(elapsed "$T_START")s"
[ "$QRC" = 124 ] && log "qemu killed after TIMEOUT=${TIMEOUT}s"

# ---------------------------------------------------------------------------------------------
# 4. The chart (never fails the run)
# ---------------------------------------------------------------------------------------------
CHART="$CACHE/chart.svg"
rm -f "$CHART"
if CHART_OUT=$("$RLBD_LAB_BIN" chart --input "$CONSOLE" --output "$CHART" --cap "$CAP_MBIT" \
    --title "kernel lab: receive rate per bond slave (Linux $KVER, balance-alb, tbf $CAP_MBIT Mbit/s per port)" 2>&1); then
    log "chart: $CHART (${CHART_OUT% -> *})"
else
    log "warning: no chart made: ${CHART_OUT:-$RLBD_LAB_BIN chart gave no reason}"
fi
RESULT=$(grep -a '^KLAB-RESULT:' "$CONSOLE" | tail -n1 || true)
log "console log: $CONSOLE"
case "$RESULT" in
"KLAB-RESULT: PASS"*) log "RESULT: PASS"; exit 0 ;;
"KLAB-RESULT: FAIL"*) log "RESULT: ${RESULT#KLAB-RESULT: }"; exit 1 ;;
*) log "RESULT: no result line from the guest (qemu exit $QRC)"; exit 2 ;;
esac
