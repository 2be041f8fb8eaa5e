//! The GRO benchmark's second measure of rlbd's programs (`gro.rs`): a CPU profile of the
//! receive side's tasks over the transfer (`perf record -t`), and the share of its samples taken
//! inside rlbd's programs (the helpers they call included).
//!
//! The kernel's run-time statistics time each program run with two clock reads, and on this
//! kind of VM an empty program already shows about 80 ns a run: a program's run time is an upper
//! bound of what it costs. A profile has no such floor: its samples inside the programs are their
//! own instructions only. What it leaves out is the hook's dispatch, inlined into the receive
//! core (`tcx_run` in `__netif_receive_skb_core`): a lower bound. Both are shown; the statistics
//! judge. Only with `RLBD_BENCH_GRO_PERF=1`, and `perf` (`RLBD_BENCH_PERF=0` skips it too).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::Res;

/// rlbd's programs, as perf names JIT-compiled eBPF (`bpf_prog_<tag>_<name>`).
const RLBD_PROGS: &str = "^bpf_prog_[0-9a-f]+_rlbd_.*$";
/// CPU time between two samples, in ns: 10,000 samples per busy CPU-second.
const PERIOD_NS: u64 = 100_000;

pub struct TaskProfile {
    child: Child,
    path: PathBuf,
}

impl TaskProfile {
    /// Samples the tasks `tids`; perf itself runs on `cpu`.
    pub fn start(tids: &[i32], cpu: usize, tag: &str) -> Res<TaskProfile> {
        let path =
            std::env::temp_dir().join(format!("rlbd-bench-{}-{tag}.perf", std::process::id()));
        let list: Vec<String> = tids.iter().map(i32::to_string).collect();
        let child = Command::new("taskset")
            .args(["-c", &cpu.to_string(), "perf", "record", "-q", "-g"])
            .args(["-e", "cpu-clock", "-c", &PERIOD_NS.to_string()])
            .args(["-t", &list.join(","), "-o"])
            .arg(&path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot run perf record: {e}"))?;
        // perf opens its events before it samples anything.
        std::thread::sleep(Duration::from_millis(300));
        Ok(TaskProfile { child, path })
    }

    /// The samples inside rlbd's programs, and all the samples.
    pub fn finish(mut self) -> Res<(u64, u64)> {
        // SIGINT: perf writes its file and exits (taskset execs it: the pid is perf's).
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGINT) };
        let _ = self.child.wait();
        let out = Command::new("perf")
            .args(["report", "-i"])
            .arg(&self.path)
            .args(["--no-children", "--sort", "parent,sym", "-p", RLBD_PROGS])
            .args(["-n", "--stdio", "-g", "none"])
            .stderr(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run perf report: {e}"))?;
        let (under, all) = parent_and_all(&String::from_utf8_lossy(&out.stdout));
        if all == 0 {
            return Err(format!("perf took no samples ({})", self.path.display()));
        }
        Ok((under, all))
    }
}

impl Drop for TaskProfile {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.path);
        let _ = std::fs::remove_file(self.path.with_extension("perf.old"));
    }
}

/// From `perf report --sort parent,sym -p RE -n` rows (`percent samples parent [k] symbol`):
/// the samples under a parent matching RE, and all.
fn parent_and_all(report: &str) -> (u64, u64) {
    let (mut under, mut all) = (0, 0);
    for line in report.lines().filter(|l| !l.starts_with('#')) {
        let words: Vec<&str> = line.split_whitespace().collect();
        let [pct, n, parent, ..] = words[..] else {
            continue;
        };
        let (true, Ok(n)) = (pct.ends_with('%'), n.parse::<u64>()) else {
            continue;
        };
        all += n;
        if parent != "[other]" {
            under += n;
        }
    }
    (under, all)
}
