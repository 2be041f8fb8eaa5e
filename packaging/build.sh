#!/usr/bin/env bash
# Builds the .deb (cargo-deb) and the .rpm (rpmbuild) of rlbd from one release build.
# Installs what it needs when missing: cargo-deb (`cargo install --locked`), rpm and lintian
# (apt). Prints the path of each package, one per line, last.
#
#   packaging/build.sh            -> target/debian/rlbd_VERSION-1_ARCH.deb
#                                    target/rpm/rlbd-VERSION-1.ARCH.rpm
#   RLBD_RUNBOOK_BASE=https://wiki.example.org/rlbd/operations packaging/build.sh
#                                    the alerts' runbook URLs under that address (default: the
#                                    guide the packages install, file:///usr/share/doc/rlbd/)
#
# The package contents are described in Cargo.toml ([package.metadata.deb]) and
# packaging/rpm/rlbd.spec; the man pages are gzipped here into target/packaging/man/,
# the shell completions generated into target/packaging/completions/ (`rlbd completions SHELL`),
# and the .rpm takes a stripped copy of the binary from target/packaging/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

say() { printf '%s\n' "packaging/build.sh: $*" >&2; }

need_apt=()
command -v rpm >/dev/null || need_apt+=(rpm)
command -v lintian >/dev/null || need_apt+=(lintian)
command -v gzip >/dev/null || need_apt+=(gzip)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    say "missing ${need_apt[*]}; run as root or install them"
    exit 1
  fi
  say "installing ${need_apt[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
# Pinned: the version this packaging was written and tested with (a newer one may want a newer
# Rust or change its defaults). Built unoptimized: it runs for seconds, and that halves its
# install on two cores (42 s against 82 s; the .deb it makes is the same, byte for byte).
CARGO_DEB_VERSION=3.8.0
if ! cargo deb --version >/dev/null 2>&1; then
  say "installing cargo-deb $CARGO_DEB_VERSION"
  CARGO_PROFILE_DEV_DEBUG=0 cargo install --locked --debug cargo-deb --version "$CARGO_DEB_VERSION"
fi

say "release build"
cargo build --release --locked --bin rlbd >&2

# Man pages: gzip -n (no name or time stamp) so the packages are reproducible.
mkdir -p target/packaging/man
for page in man/rlbd.8 man/rlbd.toml.5; do
  gzip -9 -n -c "$page" >"target/packaging/man/$(basename "$page").gz"
done

# Shell completions, generated from the command-line definitions by the binary itself.
mkdir -p target/packaging/completions
target/release/rlbd completions bash >target/packaging/completions/rlbd.bash
target/release/rlbd completions zsh >target/packaging/completions/_rlbd
target/release/rlbd completions fish >target/packaging/completions/rlbd.fish

# The alert rules, with their runbook URLs under RLBD_RUNBOOK_BASE when set (the address where
# this site publishes docs/operations.md), else as they are (the guide the packages install).
mkdir -p target/packaging/monitoring
if [ -n "${RLBD_RUNBOOK_BASE:-}" ]; then
  packaging/monitoring/runbook-base.sh "$RLBD_RUNBOOK_BASE" \
    <packaging/monitoring/rlbd-rules.yml >target/packaging/monitoring/rlbd-rules.yml
else
  cp packaging/monitoring/rlbd-rules.yml target/packaging/monitoring/rlbd-rules.yml
fi

say "deb"
# --no-build: reuse the release binary above; cargo-deb strips its copy.
rm -f target/debian/rlbd_*.deb
cargo deb --no-build --locked >&2
debs=(target/debian/rlbd_*.deb)
deb=${debs[0]}

say "rpm"
# rpmbuild packs files as they are: give it a stripped copy (cargo-deb strips its own). The spec
# reads every file relative to the build directory, the source tree.
strip --strip-unneeded -o target/packaging/rlbd target/release/rlbd
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
# The package's architecture is the binary's: the toolchain's host (cargo builds for it above),
# in rpm's words.
host=$(rustc -vV | sed -n 's/^host: //p')
case "${host%%-*}" in
  x86_64 | aarch64 | i686 | s390x | ppc64le) arch=${host%%-*} ;;
  powerpc64le) arch=ppc64le ;;
  riscv64gc) arch=riscv64 ;;
  armv7) arch=armv7hl ;;
  *)
    say "no rpm architecture known for the toolchain's host $host"
    exit 1
    ;;
esac
rm -rf target/rpm
rpmbuild -bb --quiet \
  --define "_builddir $PWD" \
  --define "_rpmdir $PWD/target/rpm" \
  --define "_buildrootdir $PWD/target/rpm/buildroot" \
  --define "_build_name_fmt %%{NAME}-%%{VERSION}-%%{RELEASE}.%%{ARCH}.rpm" \
  --define "_buildhost localhost" \
  --define "rlbd_version $version" \
  --define "rlbd_arch $arch" \
  packaging/rpm/rlbd.spec >&2
rpm_file=target/rpm/rlbd-$version-1.$arch.rpm

echo "$deb"
echo "$rpm_file"
