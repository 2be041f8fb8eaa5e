//! What runs inside the lab: starting, waiting for and stopping processes, Ctrl-C, and the
//! teardown that kills whatever is left and deletes the namespaces.

use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::{run_cmd, Lab, LabResult};

impl Lab {
    /// Starts a command inside a node's namespace (stdin null, stdout piped, stderr inherited;
    /// adjust with [`Lab::spawn_with`]). Every process in the lab's namespaces is killed on
    /// teardown.
    pub fn spawn_in(&self, node: &str, args: &[&str]) -> LabResult<Child> {
        self.spawn_with(node, args, Stdio::piped(), Stdio::inherit())
    }

    /// [`Lab::spawn_in`] with chosen stdout and stderr.
    pub fn spawn_with(
        &self,
        node: &str,
        args: &[&str],
        stdout: Stdio,
        stderr: Stdio,
    ) -> LabResult<Child> {
        let ns = self.ns(node);
        // `ip netns exec` execs the command itself, so the child's pid is the command's.
        let child = Command::new("ip")
            .args(["netns", "exec", &ns])
            .args(args)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .map_err(|e| format!("cannot start `{}` in {ns}: {e}", args.join(" ")))?;
        self.pids
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(child.id());
        Ok(child)
    }

    /// Fails if Ctrl-C or SIGTERM arrived.
    pub fn check_stop(&self) -> LabResult<()> {
        if self.stop.load(Ordering::Relaxed) {
            Err("interrupted: tearing the lab down".into())
        } else {
            Ok(())
        }
    }

    /// Sleeps, waking early (with an error) on Ctrl-C or SIGTERM.
    pub fn sleep(&self, d: Duration) -> LabResult<()> {
        let end = Instant::now() + d;
        loop {
            self.check_stop()?;
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(());
            }
            std::thread::sleep(left.min(Duration::from_millis(50)));
        }
    }

    /// Waits for a child to exit, for at most `timeout`; `Ok(None)` if it is still running.
    pub fn wait_child(
        &self,
        child: &mut Child,
        timeout: Duration,
    ) -> LabResult<Option<std::process::ExitStatus>> {
        let end = Instant::now() + timeout;
        loop {
            if let Some(st) = child.try_wait().map_err(|e| format!("wait: {e}"))? {
                return Ok(Some(st));
            }
            if Instant::now() >= end {
                return Ok(None);
            }
            self.sleep(Duration::from_millis(50))?;
        }
    }

    /// Sends SIGTERM, waits up to `grace`, then SIGKILLs; returns the exit status.
    pub fn stop_child(
        &self,
        child: &mut Child,
        grace: Duration,
    ) -> LabResult<std::process::ExitStatus> {
        if let Some(st) = child.try_wait().map_err(|e| format!("wait: {e}"))? {
            return Ok(st);
        }
        signal(child.id(), libc::SIGTERM);
        let end = Instant::now() + grace;
        while Instant::now() < end {
            if let Some(st) = child.try_wait().map_err(|e| format!("wait: {e}"))? {
                return Ok(st);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        child.wait().map_err(|e| format!("wait: {e}"))
    }

    /// Kills every process in the lab's namespaces and deletes the namespaces. Idempotent;
    /// returns the errors it met (it always tries every step).
    pub fn teardown(&mut self) -> Vec<String> {
        let mut errors = Vec::new();
        let mut pids: Vec<u32> =
            std::mem::take(&mut *self.pids.lock().unwrap_or_else(|e| e.into_inner()));
        for ns in &self.namespaces {
            if let Ok(out) = run_cmd(&["ip", "netns", "pids", ns]) {
                pids.extend(out.split_whitespace().filter_map(|p| p.parse::<u32>().ok()));
            }
        }
        pids.sort_unstable();
        pids.dedup();
        // Only processes still inside one of our namespaces are signalled (a recorded pid may
        // have exited and been reused).
        let ours: Vec<u32> = pids.into_iter().filter(|p| self.in_our_ns(*p)).collect();
        for &pid in &ours {
            signal(pid, libc::SIGTERM);
        }
        let end = Instant::now() + Duration::from_millis(1500);
        while Instant::now() < end && ours.iter().any(|p| self.in_our_ns(*p)) {
            std::thread::sleep(Duration::from_millis(50));
        }
        for &pid in &ours {
            if self.in_our_ns(pid) {
                signal(pid, libc::SIGKILL);
            }
        }
        for ns in self.namespaces.drain(..).rev() {
            if let Err(e) = run_cmd(&["ip", "netns", "del", &ns]) {
                errors.push(e);
            }
        }
        errors
    }

    fn in_our_ns(&self, pid: u32) -> bool {
        run_cmd(&["ip", "netns", "identify", &pid.to_string()])
            .map(|out| {
                out.split_whitespace()
                    .any(|n| self.namespaces.iter().any(|ns| ns == n))
            })
            .unwrap_or(false)
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for e in self.teardown() {
            eprintln!("rlbd lab teardown: {e}");
        }
    }
}

fn signal(pid: u32, sig: libc::c_int) {
    if let Ok(pid) = libc::pid_t::try_from(pid) {
        // SAFETY: kill has no memory-safety preconditions; pid > 0 names one process.
        unsafe {
            libc::kill(pid, sig);
        }
    }
}
