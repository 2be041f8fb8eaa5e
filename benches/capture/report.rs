//! The namespace benchmark's output: the table of medians, the targets with their verdicts, and
//! the one-line `capture-summary:` that ends the benchmark.

use rlbd_lab::flood::source;

use super::idle::IdleFigures;
use super::ns::{Run, ACCURACY_SOURCES, FRAMES};

fn fmt_kb(kb: Option<u64>) -> String {
    kb.map_or("-".into(), |k| format!("{:.1} MB", k as f64 / 1024.0))
}

fn find<'a>(runs: &'a [Run], prefix: &str) -> Option<&'a Run> {
    runs.iter().find(|r| r.label.starts_with(prefix))
}

pub fn print_table(runs: &[Run]) {
    println!(
        "\n{:<40} {:>7} {:>6} {:>9} {:>6} {:>9} {:>9} {:>8} {:>6} {:>9} {:>9} {:>8} {:>8} {:>8} {:>9}",
        "run",
        "sources",
        "table",
        "sent",
        "Mfps",
        "at rx0",
        "counted",
        "dropped",
        "1 in",
        "recv ns/f",
        "dmn ns/f",
        "send ns/f",
        "kern ns/f",
        "hook ns/f",
        "peak RSS"
    );
    for r in runs {
        println!(
            "{:<40} {:>7} {:>6} {:>9} {:>6.2} {:>9} {:>9} {:>8} {:>6} {:>9} {:>9} {:>8.0} {:>8} {:>8} {:>9}",
            r.label,
            r.sources,
            r.table.map_or("-".into(), |t| t.to_string()),
            r.flood.sent,
            r.flood.sent as f64 / r.flood.secs.max(1e-9) / 1e6,
            r.at_rx0,
            r.recv_u64("counted").map_or("-".into(), |c| c.to_string()),
            r.recv_u64("drops").map_or("-".into(), |d| d.to_string()),
            r.recv.as_ref().map_or("-".into(), |_| r.ratio().to_string()),
            r.recv_ns().map_or("-".into(), |n| format!("{n:.1}")),
            r.daemon_ns().map_or("-".into(), |n| format!("{n:.1}")),
            r.sender_ns(),
            r.kern_ns.map_or("-".into(), |k| format!("{k:.0}")),
            r.hook_ns.map_or("-".into(), |k| format!("{k:.1}")),
            fmt_kb(r.recv_u64("hwm_kb")),
        );
    }
    println!(
        "  sent: frames the sender's kernel accepted (failed: {}); at rx0: the receiving veth's \
         rx_packets; counted: frames the receiver accounted (sampled: the frames kept); dropped: \
         the receiver socket's PACKET_STATISTICS drops; 1 in: the sampling ratio at the end; \
         kernel input-backlog drops: {}",
        runs.iter()
            .map(|r| r.flood.failed.to_string())
            .collect::<Vec<_>>()
            .join("/"),
        runs.iter()
            .map(|r| r.backlog_drops.to_string())
            .collect::<Vec<_>>()
            .join("/")
    );
    println!(
        "  recv ns/f: receiver thread CPU (getrusage RUSAGE_THREAD) per counted frame; dmn ns/f: \
         the same per frame sent; send ns/f: sender thread CPU per sent frame; kern ns/f: send \
         ns/f minus a run without a receiver just before it (the receiver's kernel share, spent \
         on the sender's CPU on a veth), median over the rounds; hook ns/f: CPU time inside the \
         receive hooks a receiver adds (tc classifiers, packet taps) per frame sent, from a \
         profile of the flood (perf record on every CPU), median over the rounds: the kernel \
         share the targets and the summary use when it was measured; peak RSS: the receiver \
         process's VmHWM; sampled runs are measured after a warm-up of their own"
    );
    for r in runs {
        println!(
            "  {}: {}; over the rounds: {}",
            r.label,
            r.recv
                .as_deref()
                .map_or("no receiver", |s| s.split(" est=").next().unwrap_or(s)),
            r.spread
        );
    }
}

/// The accuracy run's per-client estimates against the bytes its flood sent: the 95th
/// percentile of the relative error over the clients with at least 1% of the bytes (the port is
/// full: its measured rate stands for its capacity), and how many clients that was.
pub fn accuracy(r: &Run) -> Option<(f64, usize)> {
    let est = r.recv_str("est")?;
    let est: std::collections::HashMap<&str, u64> = est
        .split(',')
        .filter_map(|kv| {
            let (k, v) = kv.split_once('/')?;
            Some((k, v.parse().ok()?))
        })
        .collect();
    let n = u64::from(ACCURACY_SOURCES);
    // `rlbd-lab flood`: frame i comes from source i % sources, sizes 64 and 1500 in turn.
    let exact: Vec<(String, u64)> = (0..ACCURACY_SOURCES)
        .map(|s| {
            let frames = FRAMES / n + u64::from(u64::from(s) < FRAMES % n);
            let size = if s % 2 == 0 { 64 } else { 1500 };
            (source(s, None).0.to_string(), frames * size)
        })
        .collect();
    let total: u64 = exact.iter().map(|e| e.1).sum();
    let mut errs: Vec<f64> = exact
        .iter()
        .filter(|(_, b)| *b * 100 >= total)
        .map(|(mac, b)| {
            let e = est.get(mac.as_str()).copied().unwrap_or(0) as f64;
            ((e - *b as f64) / *b as f64).abs()
        })
        .collect();
    if errs.is_empty() {
        return None;
    }
    errs.sort_by(f64::total_cmp);
    let i = (errs.len() * 95).div_ceil(100) - 1;
    Some((errs[i] * 100.0, errs.len()))
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "NOT met"
    }
}

/// The verdict on a target that includes the kernel's share of `x`: only from a profile of the
/// flood. Without one (`RLBD_BENCH_PERF=0`) the share is the sender's CPU beside a run without
/// a receiver, which swings by a hundred nanoseconds or more from run to run on a VM.
fn kernel_verdict(x: &Run, ok: bool) -> &'static str {
    if x.hook_ns.is_some() {
        verdict(ok)
    } else {
        "not judged (no profile of the flood: the kernel share above is the sender's CPU beside \
         a run without a receiver, too noisy to judge)"
    }
}

/// The per-frame and daemon CPU targets of an eBPF counting row (`hook`: where it counts).
fn ebpf_targets(x: &Run, hook: &str) {
    let (k, d) = (
        x.kernel_ns().unwrap_or(f64::NAN),
        x.daemon_ns().unwrap_or(f64::NAN),
    );
    let mfps = x.flood.sent as f64 / x.flood.secs.max(1e-9) / 1e6;
    println!(
        "  kernel + daemon per frame <= 50 ns, eBPF counting (every frame) {hook} at {mfps:.2} Mfps: \
         {k:.0} + {d:.1} = {:.0} ns -> {}{}",
        k + d,
        kernel_verdict(x, k + d <= 50.0),
        x.recv_str("prog_ns").map_or(String::new(), |p| format!(
            " (the program itself: {p} ns per frame)"
        ))
    );
    // The daemon's work in this mode is per (client, destination) per second, not per
    // frame: its share of a core is the same at any frame rate. Per million frames a second
    // it is that share over the run's rate in Mfps.
    let cpu = x.recv_u64("cpu_ns").unwrap_or(0) as f64;
    let secs = x
        .recv_str("secs")
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or(f64::NAN);
    let share = cpu / 1e9 / secs * 100.0;
    let per_mfps = share / mfps;
    println!(
        "  daemon CPU <= 2% of a core per million frames a second, eBPF counting {hook}: {share:.2}% \
         of a core with {} sources at {mfps:.2} Mfps (whatever the rate) = {per_mfps:.2}% per \
         Mfps -> {}",
        x.sources,
        verdict(per_mfps <= 2.0)
    );
}

pub fn print_targets(runs: &[Run], idle: Option<&IdleFigures>) {
    println!("\ntargets:");
    if let Some(s) = find(runs, "(s)") {
        let (k, d) = (
            s.kernel_ns().unwrap_or(f64::NAN),
            s.daemon_ns().unwrap_or(f64::NAN),
        );
        let mfps = s.flood.sent as f64 / s.flood.secs.max(1e-9) / 1e6;
        println!(
            "  kernel + daemon per frame <= 50 ns, sampled 1 in {} at {mfps:.2} Mfps: {k:.0} + \
             {d:.1} = {:.0} ns -> {}",
            s.ratio(),
            k + d,
            kernel_verdict(s, k + d <= 50.0)
        );
        println!(
            "  daemon CPU <= 2% of a core per million frames a second: {:.2}% -> {}",
            d / 10.0,
            verdict(d <= 20.0)
        );
    }
    for (row, hook) in [
        (
            "(x) rlbd eBPF counting at tc ingress, default",
            "at tc ingress",
        ),
        (
            "(f) rlbd eBPF counting in a socket filter, default",
            "in a socket filter",
        ),
    ] {
        if let Some(x) = find(runs, row).filter(|x| x.recv.is_some()) {
            ebpf_targets(x, hook);
        }
    }
    print_for_scale(runs);
    print_accuracy_targets(runs);
    print_table_targets(runs);
    if let Some(i) = idle {
        i.print_targets();
    }
    super::model::print(&[
        25_000,
        rlbd::capture::sampling::DEFAULT_MAX_FRAMES_PER_SEC,
        400_000,
    ]);
}

/// The floors the rows are read against: the tap that drops every data frame, the bare tc hook.
fn print_for_scale(runs: &[Run]) {
    if let Some(k) = find(runs, "(k)") {
        println!(
            "  for scale: the tap alone, every data frame dropped by the filter: kernel {:.0} \
             ns/frame, daemon {:.1} ns/frame",
            k.kernel_ns().unwrap_or(f64::NAN),
            k.daemon_ns().unwrap_or(f64::NAN)
        );
    }
    if let Some(z) = find(runs, "(0)").filter(|z| z.recv.is_some()) {
        println!(
            "  for scale: the tc hook alone, an empty program at tcx ingress: kernel {:.0} \
             ns/frame (no counting at that hook costs less)",
            z.kernel_ns().unwrap_or(f64::NAN)
        );
    }
}

/// The per-client rate error, counted in the kernel (`(y)`), sampled as the daemon samples
/// (the tc rows, `print_sampling_targets`) and sampled from captured frames (`(e)`).
fn print_accuracy_targets(runs: &[Run]) {
    if let Some(y) = find(runs, "(y)") {
        match accuracy(y) {
            Some((p95, n)) => println!(
                "  per-client rate error <= 3% (95th percentile, {n} clients with >= 1% of the \
                 bytes, eBPF counting): {p95:.2}% -> {}",
                verdict(p95 <= 3.0)
            ),
            None => println!("  per-client rate error: no estimates from the eBPF accuracy run"),
        }
    }
    print_sampling_targets(runs);
    if let Some(e) = find(runs, "(e)") {
        match accuracy(e) {
            Some((p95, n)) => println!(
                "  per-client rate error <= 3% (95th percentile, {n} clients with >= 1% of the \
                 bytes, sampled 1 in {}): {p95:.2}% -> {}",
                e.ratio(),
                verdict(p95 <= 3.0)
            ),
            None => println!("  per-client rate error: no estimates from the accuracy run"),
        }
    }
}

/// The daemon's table under churn, against the naive receiver, and its memory.
fn print_table_targets(runs: &[Run]) {
    let churn: Vec<&Run> = runs
        .iter()
        .filter(|r| ["(c)", "(x)", "(f)"].iter().any(|p| r.label.starts_with(p)))
        .collect();
    for c in &churn {
        let ns = c.recv_ns().unwrap_or(f64::NAN);
        println!(
            "  table under churn <= 100 ns per counted frame, {}: {ns:.1} ns -> {}",
            c.label,
            verdict(ns <= 100.0)
        );
    }
    if let (Some(a), Some(b)) = (find(runs, "(a)"), find(runs, "(b)")) {
        let (an, bn) = (
            a.recv_ns().unwrap_or(f64::MAX),
            b.recv_ns().unwrap_or(f64::MAX),
        );
        println!(
            "  exact rlbd <= 1/10 of the naive receiver: {an:.1} / {bn:.1} ns = {:.3} -> {}",
            an / bn,
            verdict(an / bn <= 0.1)
        );
    }
    if let Some(big) = find(runs, "(c) rlbd exact, 65,536") {
        let rss = big.recv_u64("hwm_kb").unwrap_or(u64::MAX);
        println!(
            "  RSS < 20 MB with 65,536 clients tracked: peak {} -> {}",
            fmt_kb(Some(rss)),
            verdict(rss < 20 * 1024)
        );
    }
}

/// The mode the daemon uses by default on this machine: counting in the kernel when an eBPF
/// row ran (it needs what the daemon needs), at the tc hook first, in a socket filter second;
/// else sampled captured frames.
fn default_mode(runs: &[Run]) -> Option<&Run> {
    let ran = |label| find(runs, label).filter(|x| x.recv.is_some());
    ran("(x) rlbd eBPF counting at tc ingress, default")
        .or_else(|| ran("(f) rlbd eBPF counting in a socket filter, default"))
        .or_else(|| find(runs, "(s)"))
}

/// The program's cost above the bare tc hook per frame: `row`'s kernel share less the empty
/// program's (row (0)).
fn above_hook(runs: &[Run], row: &str) -> Option<f64> {
    let hook = find(runs, "(0)").and_then(Run::kernel_ns)?;
    find(runs, row)
        .filter(|r| r.recv.is_some())
        .and_then(Run::kernel_ns)
        .map(|k| k - hook)
}

/// Sampling in the tc program: its cost above the hook against the hook's own, and the
/// per-client error, as the daemon samples (auto) and at a fixed 1 in 16.
pub fn print_sampling_targets(runs: &[Run]) {
    let Some(hook) = find(runs, "(0)").and_then(Run::kernel_ns) else {
        return;
    };
    for (cost_row, error_row) in [("(z)", "(w)"), ("(z16)", "(w16)")] {
        let Some(z) = find(runs, cost_row).filter(|z| z.recv.is_some()) else {
            continue;
        };
        let above = above_hook(runs, cost_row).unwrap_or(f64::NAN);
        let mfps = z.flood.sent as f64 / z.flood.secs.max(1e-9) / 1e6;
        println!(
            "  sampled 1 in {} at tc ingress at {mfps:.2} Mfps ({}): {above:.1} ns above the hook \
             = {:.0}% of the hook's own {hook:.1} ns (target <= 25%) -> {}",
            z.ratio(),
            &z.label[..z.label.find(',').unwrap_or(z.label.len())],
            100.0 * above / hook,
            kernel_verdict(z, above <= 0.25 * hook)
        );
        if let Some((p95, n)) = find(runs, error_row).and_then(accuracy) {
            let w = find(runs, error_row).map_or(1, Run::ratio);
            println!(
                "  per-client rate error <= 3% sampled 1 in {w} at tc ingress (95th percentile, \
                 {n} clients with >= 1% of the bytes, over the flood): {p95:.2}% -> {}",
                verdict(p95 <= 3.0)
            );
        }
    }
}

/// The last line of the benchmark, its keys pinned (`nan` for a figure not measured): the bare
/// tc hook per frame; the counting program above it, exact and sampled as the daemon samples at
/// the flood's rate, and the latter's share of the hook; the sampled per-client error; rlbd's
/// share of the receive CPU under bulk TCP with GRO at 1500 and 9000 MTU (the `gro` part);
/// the daemon per counted frame, and under churn (65,536 clients); the idle daemon's CPU with
/// 5,003 links on the host.
pub fn print_summary(runs: &[Run], idle: Option<&IdleFigures>) {
    let num = |v: Option<f64>| {
        v.filter(|x| x.is_finite())
            .map_or("nan".into(), |x| format!("{x:.1}"))
    };
    let num3 = |v: Option<f64>| {
        v.filter(|x| x.is_finite())
            .map_or("nan".into(), |x| format!("{x:.3}"))
    };
    let s = default_mode(runs);
    let hook = find(runs, "(0)").and_then(Run::kernel_ns);
    let count = s.and_then(|s| above_hook(runs, &s.label));
    let sampled = above_hook(runs, "(z)");
    let sampled_pct = sampled.zip(hook).map(|(s, h)| 100.0 * s / h);
    let rate_error = find(runs, "(w)").and_then(accuracy).map(|a| a.0);
    let churn_rows = s
        .map(|r| &r.label[..3])
        .filter(|p| ["(x)", "(f)"].contains(p))
        .unwrap_or("(c)");
    let churn = runs
        .iter()
        .filter(|r| r.label.starts_with(churn_rows))
        .filter_map(Run::recv_ns)
        .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))));
    let gro = super::gro::figures();
    println!(
        "capture-summary: hook_ns={} count_ns={} sampled_count_ns={} sampled_over_hook_pct={} \
         rate_error_p95_pct={} gro_tcp_overhead_pct={} gro_tcp_overhead_jumbo_pct={} \
         daemon_ns={} churn_daemon_ns={} idle_cpu_5003_links_pct={}",
        num(hook),
        num(count),
        num(sampled),
        num(sampled_pct),
        num(rate_error),
        num3(gro.and_then(|g| g.overhead_pct)),
        num3(gro.and_then(|g| g.overhead_jumbo_pct)),
        num(s.and_then(Run::recv_ns)),
        num(churn),
        idle.map_or("nan".into(), |i| format!("{:.3}", i.big_pct)),
    );
}
