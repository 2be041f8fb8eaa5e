# tests/lib/debian.sh: shared by the QEMU labs (tests/kernel-lab, tests/system-lab). Sourced, not
# run. Debian's packages through a private apt configuration (the host's /etc/apt is never
# modified), QEMU and busybox-static on the host, and Debian kernel packages downloaded and
# unpacked (never installed) into a cache folder.
#
# The caller sets, before sourcing:
#   LAB_NAME      prefix for log lines (e.g. run.sh)
#   CACHE         the lab's cache folder (gitignored)
# and may set:
#   MIRROR, SECURITY_MIRROR  Debian mirror URLs; by default read from the machine's own apt
#                 configuration (/etc/apt/sources.list, sources.list.d/*.list and *.sources). There
#                 is no built-in fallback: with no Debian mirror configured the lab stops and says so.
#
# Provides: log, die, now, elapsed, private_apt_update, private_apt_install, private_apt_download,
# ensure_qemu_busybox (sets BUSYBOX), kernel_package_of, kernel_package_of_series,
# kernel_package_in_suites, fetch_kernel (a
# kernel package unpacked with modules.dep).

log() { printf '[%s %s] %s\n' "${LAB_NAME:-lab}" "$(date +%T)" "$*"; }
die() { log "error: $*" >&2; exit 2; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# The first URL of the machine's apt configuration whose path ends in /$1 (debian or
# debian-security), without the trailing slash. One-line (.list) and deb822 (.sources) forms.
mirror_from_etc() {
    local f
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        grep -v '^[[:space:]]*#' "$f" | grep -oE "https?://[^ ]+/$1/?( |$)" | head -n1 | tr -d ' '
    done | head -n1 | sed 's#/$##'
}
MIRROR=${MIRROR:-$(mirror_from_etc debian)}
SECURITY_MIRROR=${SECURITY_MIRROR:-$(mirror_from_etc debian-security)}

APTDIR="$CACHE/apt"
APT_OPTS=(
    -o "Dir::Etc::sourcelist=$APTDIR/sources.list" -o "Dir::Etc::sourceparts=-"
    -o "Dir::State::lists=$APTDIR/lists" -o "Dir::Cache::pkgcache=$APTDIR/pkgcache.bin"
    -o "Dir::Cache::srcpkgcache=$APTDIR/srcpkgcache.bin" -o "APT::Sandbox::User=root"
    # Whole index files: a day-old private list patched by pdiffs was seen to lose
    # bookworm-backports' Packages altogether (no 6.12 kernel to be found).
    -o "Acquire::PDiffs=false"
)
APT_READY=0
# Suites beyond bookworm's own (bookworm, -updates, -security, -backports), one per word, from
# the same mirror: e.g. APT_EXTRA_SUITES="bullseye" for bullseye's kernel.
APT_EXTRA_SUITES=${APT_EXTRA_SUITES:-}

private_apt_update() {
    [ "$APT_READY" = 1 ] && return 0
    [ -n "$MIRROR" ] || die "no Debian mirror in this machine's apt configuration (/etc/apt/sources.list*); set MIRROR=URL (and SECURITY_MIRROR) to the mirror to use"
    mkdir -p "$APTDIR/lists/partial"
    local key=/usr/share/keyrings/debian-archive-keyring.gpg s
    {
        echo "deb [signed-by=$key] $MIRROR bookworm main"
        echo "deb [signed-by=$key] $MIRROR bookworm-updates main"
        [ -n "$SECURITY_MIRROR" ] && echo "deb [signed-by=$key] $SECURITY_MIRROR bookworm-security main"
        echo "deb [signed-by=$key] $MIRROR bookworm-backports main"
        for s in $APT_EXTRA_SUITES; do echo "deb [signed-by=$key] $MIRROR $s main"; done
    } >"$APTDIR/sources.list.new"
    # A changed list of suites invalidates the lists; otherwise refresh them at most once a day.
    if ! cmp -s "$APTDIR/sources.list.new" "$APTDIR/sources.list"; then
        mv "$APTDIR/sources.list.new" "$APTDIR/sources.list"
        rm -f "$APTDIR"/lists/*_InRelease
    else
        rm -f "$APTDIR/sources.list.new"
    fi
    if [ -z "$(find "$APTDIR/lists" -maxdepth 1 -name '*_InRelease' -mmin -1440 2>/dev/null | head -n1)" ]; then
        # To stderr: callers capture the stdout of functions that update first.
        log "apt-get update (private lists in $APTDIR)" >&2
        apt-get -qq "${APT_OPTS[@]}" update >"$APTDIR/update.log" 2>&1 ||
            { cat "$APTDIR/update.log" >&2; die "apt-get update failed"; }
    fi
    APT_READY=1
}

private_apt_install() { # args: apt-get install arguments
    private_apt_update
    DEBIAN_FRONTEND=noninteractive apt-get -qq -y --no-install-recommends "${APT_OPTS[@]}" \
        -o Dpkg::Use-Pty=0 install "$@" >"$APTDIR/install.log" 2>&1 ||
        { cat "$APTDIR/install.log" >&2; die "apt-get install $* failed"; }
}

private_apt_download() { # $1: folder, then package names
    local dir=$1
    shift
    private_apt_update
    mkdir -p "$dir"
    (cd "$dir" && apt-get -qq "${APT_OPTS[@]}" download "$@" >/dev/null) || die "apt-get download $* failed"
}

# qemu-system-x86 from bookworm-backports (the plain bookworm one conflicts with the machine's
# qemu-utils backport) and busybox-static. Sets BUSYBOX.
ensure_qemu_busybox() {
    if ! command -v qemu-system-x86_64 >/dev/null; then
        log "installing qemu-system-x86 from bookworm-backports" >&2
        private_apt_install -t bookworm-backports qemu-system-x86
    fi
    if ! dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'ok installed'; then
        log "installing busybox-static" >&2
        private_apt_install busybox-static
    fi
    BUSYBOX=/bin/busybox
    [ -x "$BUSYBOX" ] || die "no $BUSYBOX after installing busybox-static"
    command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 missing after install"
}

# The newest kernel image package matching a regex, as apt sees it (e.g. the one
# linux-image-amd64 depends on: fetch_kernel "$(kernel_package_of linux-image-amd64)" DIR).
kernel_package_of() { # $1: a metapackage, $2: optional apt-cache show -t release
    private_apt_update
    local t=()
    [ -n "${2:-}" ] && t=(-t "$2")
    apt-cache "${APT_OPTS[@]}" "${t[@]}" show --no-all-versions "$1" |
        sed -n 's/^Depends: *//p' | tr ',' '\n' | sed 's/[ (].*//' | grep -m1 '^linux-image-[0-9]' ||
        die "cannot find the package that $1 depends on"
}

# The kernel image package of one kernel series (e.g. 5.10, 6.1, 6.12): the one that the newest
# version of metapackage $1 in that series depends on, in whichever suite of the private lists
# carries it (bullseye's 5.10 needs APT_EXTRA_SUITES="bullseye"; 6.12 is in bookworm-backports).
kernel_package_of_series() { # $1: a metapackage (linux-image-amd64), $2: series
    private_apt_update
    apt-cache "${APT_OPTS[@]}" show "$1" | awk -v s="$2." '
        /^Version: / { v = $2; next }
        /^Depends: / && index(v, s) == 1 { print v "\t" $0 }' |
        sort -V -r | head -n1 | tr ',' '\n' | sed -n 's/.*\(linux-image-[0-9][^ ,(]*\).*/\1/p' | head -n1 |
        grep . || die "no $1 of the $2 series in the private apt lists (suites: bookworm* $APT_EXTRA_SUITES)"
}

# The kernel image package that the newest version of metapackage $1 found in one of suites $2
# (words: "trixie trixie-updates") depends on: for a lab that boots one release's own kernel
# while the private lists carry several releases.
kernel_package_in_suites() { # $1: a metapackage, $2: suites
    private_apt_update
    local v
    v=$(apt-cache "${APT_OPTS[@]}" madison "$1" | awk -F' *[|] *' -v s=" $2 " '
        { split($3, u, " "); split(u[2], w, "/"); if (index(s, " " w[1] " ")) { print $2; exit } }')
    [ -n "$v" ] || die "no $1 in suites $2 of the private apt lists"
    apt-cache "${APT_OPTS[@]}" show "$1=$v" | sed -n 's/^Depends: *//p' | tr ',' '\n' |
        sed 's/[ (].*//' | grep -m1 '^linux-image-[0-9]' || die "cannot find the package that $1 $v depends on"
}

# The kernel version whose vmlinuz and modules.dep are both in $1 (an unpacked kernel tree).
kernel_version_in() {
    local v
    for v in "$1"/lib/modules/*/; do
        v=$(basename "$v")
        [ -f "$1/boot/vmlinuz-$v" ] && [ -s "$1/lib/modules/$v/modules.dep" ] && { echo "$v"; return 0; }
    done
    return 1
}

# Unpacks kernel package $1 (downloaded, never installed) into folder $2 with a modules.dep from
# busybox depmod; compressed modules (.ko.xz, 6.12 on) are decompressed first, since busybox
# insmod takes plain .ko files. Skipped when $2 already holds it. Prints the kernel version.
fetch_kernel() {
    local pkg=$1 dir=$2 v deb
    v=${pkg#linux-image-}
    # A tree unpacked by an older version of this function may still hold .ko.xz files.
    if [ "$(kernel_version_in "$dir" 2>/dev/null)" = "$v" ] &&
        [ -z "$(find "$dir/lib/modules/$v" -name '*.ko.xz' -print -quit 2>/dev/null)" ]; then
        echo "$v"
        return 0
    fi
    private_apt_download "$CACHE/debs" "$pkg"
    deb=$(ls "$CACHE/debs/${pkg}_"*.deb | head -n1)
    log "unpacking $(basename "$deb")" >&2
    rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
    dpkg-deb -x "$deb" "$dir.tmp"
    # Debian 13's kernel packages ship their modules under /usr (merged /usr)
    if [ -d "$dir.tmp/usr/lib/modules" ] && [ ! -e "$dir.tmp/lib/modules" ]; then
        mkdir -p "$dir.tmp/lib" && mv "$dir.tmp/usr/lib/modules" "$dir.tmp/lib/modules"
    fi
    [ -f "$dir.tmp/boot/vmlinuz-$v" ] || die "no boot/vmlinuz-$v in $deb"
    if [ -n "$(find "$dir.tmp/lib/modules/$v" -name '*.ko.xz' -print -quit)" ]; then
        log "decompressing $v's modules (.ko.xz)" >&2
        find "$dir.tmp/lib/modules/$v" -name '*.ko.xz' -print0 | xargs -0 -r -n 64 xz -d
    fi
    log "depmod $v" >&2
    "${BUSYBOX:-/bin/busybox}" depmod -b "$dir.tmp" "$v"
    rm -rf "$dir" && mv "$dir.tmp" "$dir"
    rm -f "$deb" # the unpacked tree is the cache
    echo "$v"
}
