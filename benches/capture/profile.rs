//! The receiver's kernel share from a CPU profile of the whole machine taken during the flood.
//!
//! The other measure (the sender's CPU per frame minus that of a run without a receiver) is the
//! difference of two figures of about 3 µs each on this kind of VM, and it moves by hundreds of
//! ns from one run to the next: more than the whole cost it is after. Here `perf record`
//! samples every CPU at a fixed period of CPU time, and the share is the CPU time of the
//! samples taken inside one of the hooks a receiver adds to the receive path (the tc hook's
//! classifiers, the packet taps, rlbd's programs) divided by the frames sent. Each sample is
//! counted once, by the first hook in its call chain, so nested hooks are not counted twice.
//! Some of a hook's work is inlined into the receive path's core function (tcx runs its
//! programs from there; the taps are called from there): the core's own time per frame above
//! that of the round's run without a receiver is added. What it leaves out: work a hook causes
//! outside itself (cache lines it evicts), which no profile sees.
//!
//! Needs `perf` on the PATH; `RLBD_BENCH_PERF=0` skips it. Without it the table's hook column
//! is empty and the summary falls back to the difference.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use rlbd_lab::perf::hook_and_self_samples;

use super::Res;

/// The functions that run a receiver's hook for a received frame: the tc ingress classifiers
/// (the `clsact` filters, or the tcx programs of Linux >= 6.6) and the packet taps (classic or
/// TPACKET receive; the socket filter runs inside them).
const HOOKS: &str = "^(tc_run|tcx_run|tpacket_rcv|packet_rcv|bpf_prog_[0-9a-f]+_rlbd_.*)$";
/// The receive path's core, where the hooks are called from (and tcx's are inlined).
const CORE: &str = "__netif_receive_skb_core";
/// CPU time between two samples, in ns: 10,000 samples per busy CPU-second.
const PERIOD_NS: u64 = 100_000;

pub struct Profile {
    child: Child,
    path: PathBuf,
}

/// Whether profiles are taken: `perf` answers and `RLBD_BENCH_PERF` is not `0`.
pub fn available() -> bool {
    std::env::var("RLBD_BENCH_PERF").as_deref() != Ok("0")
        && Command::new("perf")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
}

impl Profile {
    /// Samples every CPU.
    pub fn start(tag: &str) -> Res<Profile> {
        Profile::record(Command::new("perf"), &["-a"], tag)
    }

    /// Samples the tasks `tids`; perf itself runs on `cpu`.
    pub fn start_tasks(tids: &[i32], cpu: usize, tag: &str) -> Res<Profile> {
        let list: Vec<String> = tids.iter().map(i32::to_string).collect();
        let mut taskset = Command::new("taskset");
        taskset.args(["-c", &cpu.to_string(), "perf"]);
        Profile::record(taskset, &["-t", &list.join(",")], tag)
    }

    /// `perf` (or what runs it, `cmd`) recording call chains every `PERIOD_NS` of CPU time in
    /// `target` (perf's options that choose what to sample).
    fn record(mut cmd: Command, target: &[&str], tag: &str) -> Res<Profile> {
        let path =
            std::env::temp_dir().join(format!("rlbd-bench-{}-{tag}.perf", std::process::id()));
        let child = cmd
            .args(["record", "-q", "-g", "-e", "cpu-clock"])
            .args(["-c", &PERIOD_NS.to_string()])
            .args(target)
            .arg("-o")
            .arg(&path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot run perf record: {e}"))?;
        // perf opens its events before it samples anything: a flood started at once would
        // lose its first frames' samples.
        std::thread::sleep(std::time::Duration::from_millis(500));
        Ok(Profile { child, path })
    }

    /// Stops the recording; perf's report of its samples by the first caller matching
    /// `parents` and by symbol (`percent samples parent [k] symbol` rows).
    pub fn report(mut self, parents: &str) -> Res<String> {
        // SIGINT: perf writes its file and exits (taskset execs it: the pid is perf's).
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGINT) };
        let _ = self.child.wait();
        let out = Command::new("perf")
            .args(["report", "-i"])
            .arg(&self.path)
            .args(["--no-children", "--sort", "parent,sym", "-p", parents])
            .args(["-n", "--stdio", "-g", "none"])
            .stderr(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run perf report: {e}"))?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// CPU time per frame inside the hooks, and in the receive core itself, over the
    /// profile's whole length.
    pub fn finish(self, frames: u64) -> Res<(f64, f64)> {
        let path = self.path.display().to_string();
        let (hooks, core) = hook_and_self_samples(&self.report(HOOKS)?, CORE)
            .ok_or_else(|| format!("perf report printed no sample counts for {path}"))?;
        let per_frame = |n: u64| (n * PERIOD_NS) as f64 / frames.max(1) as f64;
        Ok((per_frame(hooks), per_frame(core)))
    }
}

impl Drop for Profile {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.path);
        let _ = std::fs::remove_file(self.path.with_extension("perf.old"));
    }
}
