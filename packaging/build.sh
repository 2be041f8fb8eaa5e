#!/usr/bin/env bash
# Builds the .deb (cargo-deb) and the .rpm (cargo-generate-rpm) of rlbd from one release build.
# Installs what it needs when missing: cargo-deb and cargo-generate-rpm (`cargo install
# --locked`), rpm and lintian (apt). Prints the path of each package, one per line, last.
#
#   packaging/build.sh            -> target/debian/rlbd_VERSION-1_ARCH.deb
#                                    target/generate-rpm/rlbd-VERSION-1.ARCH.rpm
#
# The package contents are described in Cargo.toml ([package.metadata.deb] and
# [package.metadata.generate-rpm]); the man pages are gzipped here into target/packaging/man/,
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
# Pinned: the versions this packaging was written and tested with (a newer one may want a
# newer Rust or change its defaults). Installing each takes a few minutes on two cores.
CARGO_DEB_VERSION=3.8.0
CARGO_GENERATE_RPM_VERSION=0.21.1
if ! cargo deb --version >/dev/null 2>&1; then
  say "installing cargo-deb $CARGO_DEB_VERSION"
  cargo install --locked cargo-deb --version "$CARGO_DEB_VERSION"
fi
if ! cargo generate-rpm --version >/dev/null 2>&1; then
  say "installing cargo-generate-rpm $CARGO_GENERATE_RPM_VERSION"
  cargo install --locked cargo-generate-rpm --version "$CARGO_GENERATE_RPM_VERSION"
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

say "deb"
# --no-build: reuse the release binary above; cargo-deb strips its copy.
rm -f target/debian/rlbd_*.deb
cargo deb --no-build --locked >&2
debs=(target/debian/rlbd_*.deb)
deb=${debs[0]}

say "rpm"
# cargo-generate-rpm packs files as they are: give it a stripped copy (cargo-deb strips its own).
strip --strip-unneeded -o target/packaging/rlbd target/release/rlbd
rm -f target/generate-rpm/rlbd-*.rpm
cargo generate-rpm >&2
rpms=(target/generate-rpm/rlbd-*.rpm)
rpm_file=${rpms[0]}

echo "$deb"
echo "$rpm_file"
