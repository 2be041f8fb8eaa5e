//! The host side of the lab: root, the iproute2 tools, commands, and Ctrl-C.

use std::io;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, OnceLock};

use super::LabResult;

static STOP: OnceLock<Arc<AtomicBool>> = OnceLock::new();

/// The flag set by SIGINT/SIGTERM (a second signal exits at once). Registered once per process.
pub fn stop_flag() -> Arc<AtomicBool> {
    STOP.get_or_init(|| {
        let flag = Arc::new(AtomicBool::new(false));
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            // Order matters: the first signal only sets the flag, a second one exits.
            let _ = signal_hook::flag::register_conditional_shutdown(sig, 130, Arc::clone(&flag));
            let _ = signal_hook::flag::register(sig, Arc::clone(&flag));
        }
        flag
    })
    .clone()
}

/// Whether this process runs as root (the lab needs CAP_NET_ADMIN and CAP_SYS_ADMIN).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Checks that the iproute2 tools the lab runs are installed.
pub fn check_tools() -> LabResult<()> {
    for tool in ["ip", "tc", "bridge"] {
        match Command::new(tool).arg("-V").output() {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(format!(
                    "`{tool}` not found: the namespace lab needs iproute2 \
                     (Debian/Ubuntu: apt-get install iproute2; Fedora: dnf install iproute iproute-tc)"
                ))
            }
            Err(e) => return Err(format!("cannot run `{tool}`: {e}")),
        }
    }
    Ok(())
}

/// Runs a command and returns its stdout, or an error carrying its stderr.
pub fn run_cmd(args: &[&str]) -> LabResult<String> {
    let out = output(args)?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "`{}` failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn output(args: &[&str]) -> LabResult<Output> {
    Command::new(args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run `{}`: {e}", args.join(" ")))
}
