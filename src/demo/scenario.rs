//! Steps of `rlbd demo` the labs' tests share: waiting for a listener, the daemon in the
//! server namespace, its log, and watching for a client's move. The lab crate adds the ones only
//! the tests use (sink and sources as `rlbd-lab` processes).

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use super::netns::{Lab, LabResult};

/// Waits (at most 3 s) until something in the server namespace listens on `listen`;
/// `exited()` tells when the listener died first.
pub fn wait_listening(
    lab: &Lab,
    listen: &str,
    mut exited: impl FnMut() -> LabResult<Option<String>>,
) -> LabResult<()> {
    let end = Instant::now() + Duration::from_secs(3);
    // ss prints a wildcard IPv6 listener as `*:PORT`: match on the port.
    let port = listen.rsplit(':').next().unwrap_or(listen);
    loop {
        let out = lab.exec_in("srv", &["ss", "-Htln"])?;
        if out.contains(&format!(":{port} ")) || out.contains(listen) {
            return Ok(());
        }
        if let Some(st) = exited()? {
            return Err(format!("the lab sink exited at once ({st})"));
        }
        if Instant::now() >= end {
            return Err(format!(
                "the lab sink does not listen on {listen} after 3 s"
            ));
        }
        lab.sleep(Duration::from_millis(50))?;
    }
}

/// Starts `EXE run --ports p0,p1,.. --capacity p0=CAP .. -v` over every port of the lab in the
/// server namespace, its stdout and stderr appended to `log`.
pub fn start_daemon(lab: &Lab, exe: &Path, log: &Path, extra: &[&str]) -> LabResult<Child> {
    let (file, file2) = output_to(log, true)?;
    let exe = exe.to_string_lossy();
    let ports = lab.ports().join(",");
    let caps: Vec<String> = lab
        .ports()
        .iter()
        .map(|p| format!("{p}={}", lab.cap_mbit()))
        .collect();
    let mut args = vec![&*exe, "run", "--ports", &ports];
    for c in &caps {
        args.extend(["--capacity", c.as_str()]);
    }
    args.extend_from_slice(extra);
    lab.spawn_with("srv", &args, file, file2)
}

/// A process's stdout and stderr, both into the file at `path`: appended to, or made anew.
pub fn output_to(path: &Path, append: bool) -> LabResult<(Stdio, Stdio)> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .append(append)
        .truncate(!append)
        .open(path)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let twin = file
        .try_clone()
        .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    Ok((Stdio::from(file), Stdio::from(twin)))
}

/// The last `lines` lines of a file (for reports).
pub fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// A client seen on a new port.
#[derive(Debug, Clone, PartialEq)]
pub struct Move {
    /// Seconds after the lab was built.
    pub t: f64,
    pub client: String,
    pub to_port: Option<&'static str>,
}

/// Polls the clients' neighbour entries every 100 ms until one of them no longer points at
/// `from_port` (returned), `until` passes (`None`), or `keep_going` returns false (`None`).
pub fn watch_move(
    lab: &Lab,
    clients: &[&str],
    from_port: &str,
    until: Instant,
    mut keep_going: impl FnMut() -> bool,
) -> LabResult<Option<Move>> {
    while Instant::now() < until && keep_going() {
        for c in clients {
            let port = lab.client_port(c)?;
            if port != Some(from_port) && port.is_some() {
                return Ok(Some(Move {
                    t: lab.elapsed(),
                    client: c.to_string(),
                    to_port: port,
                }));
            }
        }
        lab.sleep(Duration::from_millis(100))?;
    }
    Ok(None)
}
