//! The namespace benchmark. Two namespaces joined by a veth (`tx0` - `rx0`); a sender
//! (`rlbd-lab flood`, raw AF_PACKET + `sendmmsg`, pre-built frames) pinned to one CPU in the
//! first, and in the second, pinned to the other CPU and one at a time: rlbd's capture path as
//! the daemon runs it (`recv.rs`: the real filter, sampling or not, `parse`,
//! `ClientTable::account`, the port's counter request and roll-over every second), rlbd counting
//! in the kernel (the eBPF program in place of the filter, its map read and fed to the table
//! every second) or a naive `pnet_datalink` receiver. The receivers are this binary again, started with `ip netns exec`
//! and a role argument.
//!
//! On a veth the receive side of the kernel (the filter, the copy into the ring or the socket
//! queue) runs on the sender's CPU, inside its `sendmmsg`: the sender's CPU per frame with a
//! receiver minus without one (in the same round) is that receiver's kernel share.

use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rlbd_lab::flood::FloodReport;
use rlbd_lab::netns::is_root;

use super::lab::{
    backlog_drops, check_stop, expect_line, lines_of, wait_for_other_labs, wait_for_quiet, Pair,
};
use super::plan::{plan, Receiver};
use super::profile::{self, Profile};
use super::{kv, report, Res, ROLE_ARG, RX_CPU, RX_MAC, TX_CPU};

pub const FRAMES: u64 = 2_000_000;
pub const SOURCES: u32 = 10_000;
const SIZES: &str = "64,1500";
/// Frames sent before a sampled run's measured flood, so that its ratio has settled (the
/// measured part is the steady state; a surge is met within a tenth of a second).
const WARM_UP: u64 = 1_000_000;
/// Sources of the accuracy run: each carries 2% of the port's frames.
pub const ACCURACY_SOURCES: u32 = 50;

#[derive(Default, Clone)]
pub struct Run {
    pub label: String,
    pub sources: u32,
    pub table: Option<usize>,
    pub flood: FloodReport,
    pub at_rx0: u64,
    pub backlog_drops: u64,
    pub recv: Option<String>,
    /// This run's sender CPU per frame minus that of a run without a receiver just before it.
    pub kern_ns: Option<f64>,
    /// CPU time per frame inside the receive hooks, from a profile of the flood (`profile.rs`),
    /// with the receive core's own time above the round's run without a receiver.
    pub hook_ns: Option<f64>,
    /// The receive core's own CPU time per frame, from the same profile.
    pub core_ns: Option<f64>,
    /// Over the rounds, for the summary.
    pub spread: String,
    /// Over the rounds: the most frames a run's receiver socket dropped, and the most a
    /// run's sender sent that its receiver did not count (exact runs only).
    pub worst_drops: u64,
    pub worst_lost: u64,
}

impl Run {
    pub fn recv_u64(&self, key: &str) -> Option<u64> {
        kv(self.recv.as_deref()?.split_whitespace(), key)?
            .parse()
            .ok()
    }

    pub fn recv_str(&self, key: &str) -> Option<&str> {
        kv(self.recv.as_deref()?.split_whitespace(), key)
    }

    /// The receiver's kernel share: from the profile when one was taken, else the difference.
    pub fn kernel_ns(&self) -> Option<f64> {
        self.hook_ns.or(self.kern_ns)
    }

    pub fn sender_ns(&self) -> f64 {
        self.flood.cpu_ns as f64 / self.flood.sent.max(1) as f64
    }

    /// Receiver CPU per frame it counted (for a sampled receiver: per frame kept).
    pub fn recv_ns(&self) -> Option<f64> {
        Some(self.recv_u64("cpu_ns")? as f64 / self.recv_u64("counted")?.max(1) as f64)
    }

    /// Receiver CPU per frame sent (on the wire).
    pub fn daemon_ns(&self) -> Option<f64> {
        Some(self.recv_u64("cpu_ns")? as f64 / self.flood.sent.max(1) as f64)
    }

    pub fn ratio(&self) -> u32 {
        self.recv_u64("ratio").unwrap_or(1) as u32
    }
}

fn flood(pair: &Pair, count: u64, sources: u32) -> Res<FloodReport> {
    let lab_exe = rlbd_lab::exe_beside(Path::new(env!("CARGO_BIN_EXE_rlbd")))?;
    let out = Command::new("ip")
        .args(["netns", "exec", &pair.tx])
        .arg(&lab_exe)
        .arg("flood")
        .args(["--iface", "tx0", "--dst-mac", &RX_MAC.to_string()])
        .args(["--count", &count.to_string()])
        .args(["--sources", &sources.to_string(), "--sizes", SIZES])
        .args(["--cpu", &TX_CPU.to_string()])
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run the sender: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    FloodReport::from_output(&text)
        .ok_or_else(|| format!("the sender printed {:?} ({})", text.trim(), out.status))
}

fn start_receiver(pair: &Pair, receiver: Receiver) -> Res<Option<(Child, mpsc::Receiver<String>)>> {
    let role: Vec<String> = match receiver {
        Receiver::None => return Ok(None),
        Receiver::Rlbd {
            capacity,
            sampling,
            per_client,
        } => vec![
            "recv-rlbd".into(),
            format!("capacity={capacity}"),
            sampling.arg(),
            format!("per-client={}", u8::from(per_client)),
        ],
        Receiver::Pnet => vec!["recv-pnet".into()],
        Receiver::TcFloor => vec!["recv-floor".into()],
    };
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut c = Command::new("ip")
        .args(["netns", "exec", &pair.rx])
        .arg(&me)
        .arg(ROLE_ARG)
        .args(&role)
        .args(["iface=rx0".to_string(), format!("cpu={RX_CPU}")])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("cannot start the receiver: {e}"))?;
    let lines = lines_of(c.stdout.take().expect("piped stdout"));
    if let Err(e) = expect_line(&lines, "ready", Duration::from_secs(10)) {
        let _ = c.kill();
        let _ = c.wait();
        return Err(e);
    }
    Ok(Some((c, lines)))
}

fn one_run(pair: &Pair, label: &str, receiver: Receiver, sources: u32, profile: bool) -> Res<Run> {
    check_stop()?;
    let mut child = start_receiver(pair, receiver)?;
    if receiver.warms_up() {
        flood(pair, WARM_UP, sources)?;
        std::thread::sleep(Duration::from_millis(300));
        if let Some((c, _)) = &mut child {
            let stdin = c.stdin.as_mut().expect("piped stdin");
            stdin
                .write_all(b"mark\n")
                .and_then(|()| stdin.flush())
                .map_err(|e| format!("cannot mark the receiver: {e}"))?;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let rx0 = pair.rx_packets();
    let drops0 = backlog_drops();
    let profile = match profile {
        true => Some(Profile::start(&pair.rx)?),
        false => None,
    };
    let flood = flood(pair, FRAMES, sources)?;
    let (hook_ns, core_ns) = match profile {
        Some(p) => {
            let (h, c) = p.finish(flood.sent)?;
            (Some(h), Some(c))
        }
        None => (None, None),
    };
    // Longer than the ring's block retire timeout (20 ms): everything is handed over.
    std::thread::sleep(Duration::from_millis(300));
    let mut run = Run {
        label: label.into(),
        sources,
        table: match receiver {
            Receiver::Rlbd { capacity, .. } => Some(capacity),
            _ => None,
        },
        flood,
        hook_ns,
        core_ns,
        at_rx0: pair.rx_packets().saturating_sub(rx0),
        backlog_drops: backlog_drops().saturating_sub(drops0),
        ..Run::default()
    };
    if let Some((mut c, lines)) = child {
        drop(c.stdin.take());
        let line = expect_line(&lines, "result ", Duration::from_secs(20));
        let _ = c.kill();
        let _ = c.wait();
        run.recv = Some(line?.trim_start_matches("result ").to_string());
    }
    Ok(run)
}

/// Per configuration the median run (by receiver CPU per frame sent; the baseline by sender
/// CPU per frame), with the spread over the rounds.
fn medians(all: &[Vec<Run>]) -> Vec<Run> {
    let range = |v: &[f64]| {
        let lo = v.iter().copied().fold(f64::MAX, f64::min);
        let hi = v.iter().copied().fold(0.0, f64::max);
        format!("{lo:.0}-{hi:.0}")
    };
    let mut runs = Vec::new();
    for (i, set) in all.iter().enumerate() {
        let key = |r: &Run| {
            if i == 0 {
                r.sender_ns()
            } else {
                r.daemon_ns().unwrap_or(f64::MAX)
            }
        };
        let mut sorted: Vec<&Run> = set.iter().collect();
        sorted.sort_by(|a, b| key(a).total_cmp(&key(b)));
        let mut median = sorted[sorted.len() / 2].clone();
        let sorted_of = |f: fn(&Run) -> Option<f64>| {
            let mut v: Vec<f64> = set.iter().filter_map(f).collect();
            v.sort_by(f64::total_cmp);
            v
        };
        let (kern, hook) = (sorted_of(|r| r.kern_ns), sorted_of(|r| r.hook_ns));
        median.kern_ns = kern.get(kern.len() / 2).copied();
        median.hook_ns = hook.get(hook.len() / 2).copied();
        let send: Vec<f64> = set.iter().map(Run::sender_ns).collect();
        let recv: Vec<f64> = set.iter().filter_map(Run::recv_ns).collect();
        median.spread = format!("send ns/f {}", range(&send));
        if !recv.is_empty() {
            median.spread += &format!(", recv ns/f {}", range(&recv));
        }
        if !kern.is_empty() {
            median.spread += &format!(", kern ns/f {}", range(&kern));
        }
        if !hook.is_empty() {
            median.spread += &format!(", hook ns/f {}", range(&hook));
        }
        median.worst_drops = set
            .iter()
            .filter_map(|r| r.recv_u64("drops"))
            .max()
            .unwrap_or(0);
        median.worst_lost = set
            .iter()
            .filter(|r| r.ratio() == 1)
            .filter_map(|r| Some(r.flood.sent.saturating_sub(r.recv_u64("counted")?)))
            .max()
            .unwrap_or(0);
        if median.recv.is_some() {
            median.spread += &format!(
                ", dropped at most {}, not counted at most {}",
                median.worst_drops, median.worst_lost
            );
        }
        runs.push(median);
    }
    runs
}

/// `RLBD_BENCH_BPF_STATS=1`: the kernel times every eBPF program run while the benchmark runs
/// (the receivers report the counting program's `prog_ns`); the sysctl is restored on drop.
/// The timing itself costs each run two clock reads, so the kernel shares of the eBPF rows are
/// a little higher with it.
struct BpfStats(Option<String>);

const BPF_STATS: &str = "/proc/sys/kernel/bpf_stats_enabled";

impl BpfStats {
    fn enable() -> BpfStats {
        if std::env::var("RLBD_BENCH_BPF_STATS").as_deref() != Ok("1") {
            return BpfStats(None);
        }
        let old = std::fs::read_to_string(BPF_STATS).ok();
        if let Err(e) = std::fs::write(BPF_STATS, "1") {
            println!("cannot enable {BPF_STATS}: {e}");
        }
        BpfStats(old)
    }
}

impl Drop for BpfStats {
    fn drop(&mut self) {
        if let Some(old) = &self.0 {
            let _ = std::fs::write(BPF_STATS, old.trim());
        }
    }
}

fn bench(idle: Option<super::idle::IdleFigures>) -> Res<()> {
    wait_for_other_labs()?;
    let _stats = BpfStats::enable();
    let pair = Pair::create()?;
    let started = Instant::now();
    println!(
        "\nnamespace benchmark: {FRAMES} frames per run (64 and 1500 bytes in turn) over a veth \
         between {} and {}; receiver pinned to CPU {RX_CPU}, sender to CPU {TX_CPU}; load \
         average {}",
        pair.tx,
        pair.rx,
        super::load_average()
    );
    let mut plan = plan();
    // A quick look at some rows (the baseline always runs: the kernel shares need it).
    if let Ok(only) = std::env::var("RLBD_BENCH_ROWS") {
        let keep: Vec<String> = only.split(',').map(str::to_string).collect();
        let mut first = true;
        plan.retain(|(label, _, _)| {
            std::mem::take(&mut first) || keep.iter().any(|k| label.contains(k.as_str()))
        });
    }
    let rounds: usize = std::env::var("RLBD_BENCH_NS_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n >= 1)
        .unwrap_or(3);
    let profiled = profile::available();
    println!(
        "kernel shares: {}",
        if profiled {
            "from a CPU profile of each flood (perf record), and as the difference of sender CPU"
        } else {
            "as the difference of sender CPU only (no perf, or RLBD_BENCH_PERF=0)"
        }
    );
    // Rounds of the whole plan, so that a noisy moment spreads over every configuration.
    let mut all: Vec<Vec<Run>> = vec![Vec::new(); plan.len()];
    for round in 1..=rounds {
        println!("round {round} of {rounds}:");
        wait_for_quiet()?;
        let mut base = None;
        let mut base_core = None;
        for (i, (label, receiver, sources)) in plan.iter().enumerate() {
            // The kernel's share is the difference of two sender figures, and the VM's moment
            // moves both by hundreds of ns: each receiver's run is paired with a run without a
            // receiver just before it (same sources), not with the round's first.
            let paired = match (i, receiver, paired_baselines()) {
                (1.., Receiver::Rlbd { .. } | Receiver::Pnet | Receiver::TcFloor, true) => {
                    let b = one_run(&pair, "baseline (paired)", Receiver::None, *sources, false)?;
                    println!("  (paired baseline: sender {:.0} ns/frame)", b.sender_ns());
                    Some(b.sender_ns())
                }
                _ => None,
            };
            let mut run = one_run(&pair, label, *receiver, *sources, profiled)?;
            if i == 0 {
                base = Some(run.sender_ns());
                base_core = run.core_ns;
            } else if run.recv.is_some() {
                run.kern_ns = paired.or(base).map(|b| run.sender_ns() - b);
                if let (Some(h), Some(c), Some(b)) = (run.hook_ns, run.core_ns, base_core) {
                    run.hook_ns = Some(h + (c - b).max(0.0));
                }
            }
            println!(
                "  {label}: sent {} in {:.2} s, sender {:.0} ns/frame{}{}",
                run.flood.sent,
                run.flood.secs,
                run.sender_ns(),
                run.hook_ns.map_or(String::new(), |h| format!(
                    ", in the hooks {h:.1} ns/frame (receive core {:.1})",
                    run.core_ns.unwrap_or(f64::NAN)
                )),
                run.recv
                    .as_ref()
                    .map_or(String::new(), |r| format!("; receiver: {r}"))
            );
            all[i].push(run);
        }
    }
    let runs = medians(&all);
    println!("\nmedian of {rounds} round(s) per configuration:");
    report::print_table(&runs);
    report::print_targets(&runs, idle.as_ref());
    println!(
        "\nnamespace benchmark took {:.1} s",
        started.elapsed().as_secs_f64()
    );
    report::print_summary(&runs, idle.as_ref());
    Ok(())
}

/// `RLBD_BENCH_PAIRED=0`: one baseline per round (half the runs, noisier kernel shares).
fn paired_baselines() -> bool {
    std::env::var("RLBD_BENCH_PAIRED").as_deref() != Ok("0")
}

pub fn main() {
    if !is_root() {
        println!("namespace benchmark: skipped, needs root (network namespaces, AF_PACKET)");
        return;
    }
    // SIGINT/SIGTERM set the flag; the waits turn it into an error, and dropping the
    // namespaces cleans up.
    let _ = rlbd_lab::netns::stop_flag();
    let idle = if std::env::var("RLBD_BENCH_IDLE").as_deref() == Ok("0") {
        None
    } else {
        match super::idle::measure() {
            Ok(f) => Some(f),
            Err(e) => {
                eprintln!("idle benchmark failed: {e}");
                std::process::exit(1);
            }
        }
    };
    if std::env::var("RLBD_BENCH_NS_RUNS").as_deref() == Ok("0") {
        report::print_summary(&[], idle.as_ref());
        return;
    }
    if let Err(e) = bench(idle) {
        eprintln!("namespace benchmark failed: {e}");
        std::process::exit(1);
    }
}
