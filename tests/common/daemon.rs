//! A daemon in the namespace lab for the fault and hostile-LAN tests: started with its own
//! control socket, log and environment, asked for its status, measured (CPU, RSS), stopped.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::{exe, root_or_skip};
use rlbd::status::StatusReport;
use rlbd_lab::netns::{Lab, LabResult};
use rlbd_lab::scenario::Source;

pub const CAP: u32 = 100;
static LAB: Mutex<()> = Mutex::new(());

/// The daemon in the lab's server, with its own control socket, log and environment.
pub struct Daemon {
    pub child: Child,
    pub socket: PathBuf,
    pub log: PathBuf,
}

pub fn tmp(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name)
}

pub fn start(lab: &Lab, tag: &str, env: &[(&str, &str)], extra: &[&str]) -> LabResult<Daemon> {
    let socket = tmp(&format!("{}-{tag}.sock", lab.prefix()));
    let log = tmp(&format!("{}-{tag}.log", lab.prefix()));
    let _ = std::fs::remove_file(&log);
    let file = std::fs::File::create(&log).map_err(|e| e.to_string())?;
    let cap0 = format!("p0={CAP}");
    let cap1 = format!("p1={CAP}");
    let ns = lab.ns("srv");
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &ns, "env"]);
    for (k, v) in env {
        cmd.arg(format!("{k}={v}"));
    }
    cmd.arg(exe())
        .args([
            "run",
            "--ports",
            "p0,p1",
            "--capacity",
            &cap0,
            "--capacity",
            &cap1,
        ])
        .arg("--control-socket")
        .arg(&socket)
        .args(extra)
        .stdin(Stdio::null())
        .stdout(file.try_clone().map_err(|e| e.to_string())?)
        .stderr(file);
    let child = cmd.spawn().map_err(|e| format!("cannot start rlbd: {e}"))?;
    let d = Daemon { child, socket, log };
    let end = Instant::now() + Duration::from_secs(5);
    while status(&d).is_err() {
        if Instant::now() > end {
            return Err(format!(
                "rlbd did not answer on {} within 5 s:\n{}",
                d.socket.display(),
                rlbd_lab::scenario::tail(&d.log, 20)
            ));
        }
        lab.sleep(Duration::from_millis(100))?;
    }
    Ok(d)
}

pub fn status(d: &Daemon) -> Result<StatusReport, String> {
    let mut s = UnixStream::connect(&d.socket).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(3))).ok();
    s.write_all(b"status\n").map_err(|e| e.to_string())?;
    let mut text = String::new();
    s.read_to_string(&mut text).map_err(|e| e.to_string())?;
    serde_json::from_str(&text).map_err(|e| format!("{e}: {text:.200}"))
}

/// (CPU seconds used, RSS in KiB) of a process.
pub fn cpu_rss(pid: u32) -> (f64, u64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command's closing parenthesis: state is field 3, utime 14, stime 15.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        f.get(i - 3)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let cpu = (ticks(14) + ticks(15)) / hz;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    (cpu, rss)
}

pub fn signal(pid: u32, sig: i32) {
    // SAFETY: plain kill(2) on a child we started.
    unsafe { libc::kill(pid as i32, sig) };
}

pub fn stop(lab: &Lab, d: &mut Daemon) {
    signal(d.child.id(), libc::SIGCONT);
    let _ = lab.stop_child(&mut d.child, Duration::from_secs(3));
}

/// The end of a scenario: its traffic `sources` and the daemon stopped, the daemon's log kept
/// at `log` (shown with the failures).
pub fn finish(lab: &Lab, d: &mut Daemon, sources: &mut [Source], log: &Path) {
    for s in sources {
        let _ = lab.stop_child(&mut s.child, Duration::from_millis(500));
    }
    stop(lab, d);
    let _ = std::fs::copy(&d.log, log);
}

/// Runs one lab scenario and concludes it (teardown checked, failures with the daemon's log).
pub fn lab_test(what: &str, f: impl FnOnce(&Lab, &Path) -> LabResult<Vec<String>>) {
    lab_test_with(what, rlbd_lab::netns::LabOptions::default(), f)
}

pub fn lab_test_with(
    what: &str,
    opts: rlbd_lab::netns::LabOptions,
    f: impl FnOnce(&Lab, &Path) -> LabResult<Vec<String>>,
) {
    if !root_or_skip() {
        return;
    }
    let _guard = LAB.lock().unwrap_or_else(|e| e.into_inner());
    let lab = Lab::build_with(CAP, opts).expect("building the lab");
    let prefix = lab.prefix().to_string();
    let log = tmp(&format!("{prefix}-{what}.log"));
    let result = f(&lab, &log);
    drop(lab);
    super::conclude(what, &prefix, &log, result);
}
