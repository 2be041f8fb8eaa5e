//! The GRO benchmark's tools (`gro.rs`): `ethtool` (GRO and TSO on a veth) installed when it is
//! missing, as `tests/run-all.sh` installs its tools (the machine's own apt configuration): a
//! missing tool is never a reason to skip the measure.

use std::process::{Command, Stdio};

use super::Res;

fn works(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn apt_get(args: &[&str]) -> bool {
    Command::new("apt-get")
        .args(args)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `tool` from the Debian package `package`, installed if missing (the package lists refreshed
/// first when the install fails on stale ones).
pub fn ensure(tool: &str, package: &str) -> Res<()> {
    if works(tool) {
        return Ok(());
    }
    println!("GRO benchmark: installing {package} (for {tool})");
    let install = ["install", "-y", "-qq", package];
    let installed = apt_get(&install) || (apt_get(&["update", "-qq"]) && apt_get(&install));
    if !installed {
        return Err(format!(
            "{tool} is missing and apt-get could not install {package}"
        ));
    }
    match works(tool) {
        true => Ok(()),
        false => Err(format!("{package} installed, but {tool} --version fails")),
    }
}
