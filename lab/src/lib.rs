//! The labs' test tooling, kept out of the shipped daemon's crate: the spoofed-source flooder,
//! the packing lab, the kernel lab's chart, perf sampling, and the `rlbd-lab` binary (sink,
//! source, flood, chart) the tests, benches and QEMU labs run. The namespace lab, traffic,
//! sampler and chart are `rlbd demo`'s own ([`rlbd::demo`]); they are re-exported here so a test
//! finds every lab piece in one crate.

pub use rlbd::demo::{chart, netns, sample, traffic};

mod devsample;
pub mod flood;
pub mod labchart;
pub mod packing;
pub mod perf;
pub mod scenario;

use std::path::{Path, PathBuf};

/// The `rlbd-lab` binary beside the daemon binary `daemon` (a workspace's binaries of one profile
/// share a directory). A test or bench of the `rlbd` package cannot have cargo build another
/// package's binary, so the scripts build it first, in the profile `rlbd` was built in:
/// `cargo build --profile test -p rlbd-lab` for the tests, `--release` for the benches.
pub fn exe_beside(daemon: &Path) -> Result<PathBuf, String> {
    let exe = daemon.with_file_name("rlbd-lab");
    if exe.is_file() {
        Ok(exe)
    } else {
        Err(format!(
            "no {} beside {}: build the lab tooling first, in the same profile \
             (`cargo build --profile test -p rlbd-lab` for the tests, \
             `cargo build --release -p rlbd-lab` for the benches)",
            exe.display(),
            daemon.display()
        ))
    }
}
