//! Steps the namespace tests and the packing lab share: the `rlbd-lab` sink and sources as
//! processes in the lab; with the demo's steps (daemon, log tail, watching for a move)
//! re-exported, so one module holds a scenario's every step.

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use rlbd::demo::netns::{Lab, LabResult, SERVER_IP, SINK_PORT};
pub use rlbd::demo::scenario::*;

/// Starts `LAB_EXE sink` (the `rlbd-lab` binary) on the server's IPv4 address and waits until it
/// listens.
pub fn start_sink(lab: &Lab, lab_exe: &Path) -> LabResult<Child> {
    start_sink_on(lab, lab_exe, &format!("{SERVER_IP}:{SINK_PORT}"))
}

/// Starts `LAB_EXE sink --listen LISTEN` in the server namespace and waits until it listens.
pub fn start_sink_on(lab: &Lab, lab_exe: &Path, listen: &str) -> LabResult<Child> {
    let exe = lab_exe.to_string_lossy();
    let mut child = lab.spawn_with(
        "srv",
        &[&exe, "sink", "--listen", listen],
        Stdio::null(),
        Stdio::inherit(),
    )?;
    wait_listening(lab, listen, || {
        child
            .try_wait()
            .map_err(|e| format!("wait: {e}"))
            .map(|s| s.map(|s| s.to_string()))
    })?;
    Ok(child)
}

/// A running `rlbd-lab source` in one client.
pub struct Source {
    pub client: String,
    pub child: Child,
}

/// Starts `LAB_EXE source` in each client, all at once, for `seconds`.
pub fn start_sources(
    lab: &Lab,
    lab_exe: &Path,
    clients: &[&str],
    seconds: f64,
) -> LabResult<Vec<Source>> {
    let exe = lab_exe.to_string_lossy();
    let to = format!("{SERVER_IP}:{SINK_PORT}");
    let secs = format!("{seconds}");
    clients
        .iter()
        .map(|c| {
            let child = lab.spawn_in(c, &[&exe, "source", "--to", &to, "--seconds", &secs])?;
            Ok(Source {
                client: c.to_string(),
                child,
            })
        })
        .collect()
}

/// Waits for every source (at most `timeout` in all) and returns (client, bytes sent).
pub fn finish_sources(
    lab: &Lab,
    sources: Vec<Source>,
    timeout: Duration,
) -> LabResult<Vec<(String, u64)>> {
    let end = Instant::now() + timeout;
    let mut sent = Vec::new();
    for mut s in sources {
        let left = end.saturating_duration_since(Instant::now());
        if lab.wait_child(&mut s.child, left)?.is_none() {
            lab.stop_child(&mut s.child, Duration::from_millis(500))?;
            return Err(format!("the source in {} did not finish in time", s.client));
        }
        let out = s
            .child
            .wait_with_output()
            .map_err(|e| format!("wait: {e}"))?;
        let text = String::from_utf8_lossy(&out.stdout);
        let bytes = text.trim().parse::<u64>().map_err(|_| {
            format!(
                "the source in {} printed {:?} ({})",
                s.client,
                text.trim(),
                out.status
            )
        })?;
        sent.push((s.client, bytes));
    }
    Ok(sent)
}
