//! The GRO benchmark's output (`gro.rs`): a line per run, the table per MTU (medians and worst
//! over the rounds, the whole-path difference with its 90% interval), the target, and the
//! `gro-summary:` line.

use super::gro::{Run, MTUS};
use super::gro_cost::AckCost;

/// The part's figures. `overhead_pct` and `overhead_jumbo_pct` (the worst timed share at 1500
/// and 9000 MTU) are `capture-summary:`'s `gro_tcp_overhead_pct` and `_jumbo_pct`.
#[derive(Debug, Clone, Copy, Default)]
pub struct GroFigures {
    pub overhead_pct: Option<f64>,
    pub overhead_jumbo_pct: Option<f64>,
    /// Medians: rlbd's share in the timed runs, and the whole-path difference (untimed).
    pub share_pct: [Option<f64>; 2],
    pub whole_path_pct: [Option<f64>; 2],
    /// The egress program's own cost per ACK above the floor (`gro_cost.rs`).
    pub egress_ns_per_ack: Option<f64>,
    /// The guests' egress program's own cost per ACK above the floor, 64 guests pinned.
    pub guest_egress_ns_per_ack: Option<f64>,
    /// The counting program's own cost per GRO packet above the floor (`gro_cost.rs`).
    pub ingress_own_ns_per_pkt: Option<f64>,
    /// Medians: rlbd's share net of the kernel's timing (`Run::net_share_pct`).
    pub net_share_pct: [Option<f64>; 2],
    /// Run time per run under the kernel's statistics: the ingress program (per packet at the
    /// hook), and the egress one on the bench's ACKs (3 instructions: the timing's own floor).
    pub ingress_ns_per_pkt: Option<f64>,
    pub hook_ns: Option<f64>,
}

impl GroFigures {
    /// `gro-summary: share_1500_pct=.. share_9000_pct=.. whole_path_1500_pct=..
    /// whole_path_9000_pct=.. egress_ns_per_ack=.. ingress_ns_per_pkt=.. hook_ns=..
    /// guest_egress_ns_per_ack=.. ingress_own_ns_per_pkt=.. net_share_1500_pct=..
    /// net_share_9000_pct=..` (`nan` if missing).
    pub fn line(&self) -> String {
        let num = |v: Option<f64>, d: usize| v.map_or("nan".into(), |x| format!("{x:.d$}"));
        format!(
            "gro-summary: share_1500_pct={} share_9000_pct={} whole_path_1500_pct={} \
             whole_path_9000_pct={} egress_ns_per_ack={} ingress_ns_per_pkt={} hook_ns={} \
             guest_egress_ns_per_ack={} ingress_own_ns_per_pkt={} net_share_1500_pct={} \
             net_share_9000_pct={}",
            num(self.share_pct[0], 3),
            num(self.share_pct[1], 3),
            num(self.whole_path_pct[0], 2),
            num(self.whole_path_pct[1], 2),
            num(self.egress_ns_per_ack, 1),
            num(self.ingress_ns_per_pkt, 1),
            num(self.hook_ns, 1),
            num(self.guest_egress_ns_per_ack, 1),
            num(self.ingress_own_ns_per_pkt, 1),
            num(self.net_share_pct[0], 3),
            num(self.net_share_pct[1], 3),
        )
    }
}

pub fn print_run(round: usize, r: &Run) {
    let mut line = format!(
        "  round {round}, MTU {}, {}: {:.2} GB in {:.2} s ({:.1} Gbit/s), {} packets at the \
         veth; receive CPU {:.0} ms (NAPI thread {:.0}, receiver {:.0}, rlbd {:.1}; CPU {} \
         busy {:.0})",
        r.mtu,
        match (r.rlbd, r.timed) {
            (false, _) => "without rlbd",
            (true, false) => "with rlbd",
            (true, true) => "with rlbd, timed",
        },
        r.gb(),
        r.secs,
        r.gb() * 8.0 / r.secs.max(1e-9),
        r.wire,
        ms(r.recv_ns()),
        ms(r.napi_ns),
        ms(r.sink_ns),
        ms(r.daemon_ns),
        super::RX_CPU,
        ms(r.cpu_busy_ns),
    );
    if r.timed {
        line += &format!(
            "; programs: ingress {} runs {:.1} ms, egress {} runs {:.1} ms; rlbd {:.3}%",
            r.ingress.1,
            ms(r.ingress.0),
            r.egress.1,
            ms(r.egress.0),
            r.share_pct()
        );
        if let Some(p) = r.perf_share_pct() {
            line += &format!(" (from the profile {p:.3}%)");
        }
        if let Some((frames, bytes)) = r.count_off_pct() {
            line += &format!(
                "; counted {frames:+.2}% of the veth's packets, {bytes:+.2}% of its bytes"
            );
        }
    } else if let Some((frames, bytes)) = r.count_off_pct() {
        line +=
            &format!("; counted {frames:+.2}% of the veth's packets, {bytes:+.2}% of its bytes");
    }
    println!("{line}");
}

/// A figure with 3 decimals, `-` where there is none.
fn opt(x: f64) -> String {
    if x.is_nan() {
        "-".into()
    } else {
        format!("{x:.3}")
    }
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// Median, least and largest over the rounds.
#[derive(Clone, Copy)]
struct Stat {
    med: f64,
    min: f64,
    max: f64,
}

fn stat(mut v: Vec<f64>) -> Stat {
    if v.is_empty() {
        return Stat {
            med: f64::NAN,
            min: f64::NAN,
            max: f64::NAN,
        };
    }
    v.sort_by(f64::total_cmp);
    Stat {
        med: v[v.len() / 2],
        min: v[0],
        max: v[v.len() - 1],
    }
}

/// A median and the interval that holds the true median with at least 90% confidence, from
/// the order statistics (no assumption on the shape of the noise): [x(k), x(n+1-k)] with the
/// largest k whose binomial tail P(B(n, 1/2) < k) is at most 5%. Under 5 figures no interval
/// reaches 90%: the widest one, [least, largest], and its own confidence.
#[derive(Clone, Copy)]
pub struct Interval {
    pub n: usize,
    pub med: f64,
    pub lo: f64,
    pub hi: f64,
    pub confidence: f64,
}

fn interval(mut v: Vec<f64>) -> Option<Interval> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    // P(B(n, 1/2) <= j) for j = 0.., until it passes 5%.
    let (mut k, mut tail, mut term) = (1, 0.5f64.powi(n as i32), 0.5f64.powi(n as i32));
    while k < n / 2 {
        term *= (n - k + 1) as f64 / k as f64;
        if tail + term > 0.05 {
            break;
        }
        tail += term;
        k += 1;
    }
    let med = match n % 2 {
        1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    };
    Some(Interval {
        n,
        med,
        lo: v[k - 1],
        hi: v[n - k],
        confidence: 1.0 - 2.0 * tail,
    })
}

/// The whole-path difference at `mtu`, per round: receive CPU per GB with rlbd (untimed) over
/// without, minus 1, in %.
fn whole_path(runs: &[Run], mtu: u32) -> Vec<f64> {
    let per_gb = |r: &Run| ms(r.recv_ns()) / r.gb().max(1e-9);
    let last = runs.iter().map(|r| r.round).max().unwrap_or(0);
    (0..=last)
        .filter_map(|round| {
            let of = |rlbd: bool| {
                runs.iter()
                    .find(|r| r.round == round && r.mtu == mtu && r.rlbd == rlbd && !r.timed)
            };
            let (w, o) = (of(true)?, of(false)?);
            Some(100.0 * (per_gb(w) / per_gb(o) - 1.0))
        })
        .collect()
}

/// Whether the whole-path difference's 90% interval is at most `width` points wide at every
/// MTU (and a 90% interval at all: 5 rounds or more).
pub fn settled(runs: &[Run], width: f64) -> bool {
    MTUS.iter().all(|&m| {
        interval(whole_path(runs, m)).is_some_and(|i| i.confidence >= 0.9 && i.hi - i.lo <= width)
    })
}

/// One MTU's figures over the rounds.
struct Row {
    mtu: u32,
    gbps: Stat,
    recv_ms_gb: Stat,
    recv_ms_gb_with: Stat,
    whole: Option<Interval>,
    rlbd_us_gb: Stat,
    prog_ns_pkt: Stat,
    egress_ns_run: Stat,
    rlbd_ns_wire: Stat,
    wire_per_pkt: Stat,
    share_pct: Stat,
    net_share_pct: Stat,
    perf_pct: Stat,
}

fn row(runs: &[Run], mtu: u32) -> Option<Row> {
    let of = |rlbd: bool, timed: bool| -> Vec<&Run> {
        runs.iter()
            .filter(|r| r.mtu == mtu && r.rlbd == rlbd && r.timed == timed)
            .collect()
    };
    let (without, with, timed) = (of(false, false), of(true, false), of(true, true));
    if with.is_empty() || timed.is_empty() {
        return None;
    }
    let per_gb = |r: &Run| ms(r.recv_ns()) / r.gb().max(1e-9);
    let each = |set: &[&Run], f: &dyn Fn(&Run) -> f64| stat(set.iter().map(|r| f(r)).collect());
    let per_run = |(ns, n): (u64, u64)| ns as f64 / n.max(1) as f64;
    Some(Row {
        mtu,
        gbps: each(&with, &|r| r.gb() * 8.0 / r.secs.max(1e-9)),
        recv_ms_gb: each(&without, &per_gb),
        recv_ms_gb_with: each(&with, &per_gb),
        whole: interval(whole_path(runs, mtu)),
        rlbd_us_gb: each(&timed, &|r| r.rlbd_ns() as f64 / 1e3 / r.gb().max(1e-9)),
        prog_ns_pkt: each(&timed, &|r| per_run(r.ingress)),
        egress_ns_run: each(&timed, &|r| per_run(r.egress)),
        rlbd_ns_wire: each(&timed, &|r| r.rlbd_ns() as f64 / r.wire.max(1) as f64),
        wire_per_pkt: each(&timed, &|r| r.wire as f64 / r.ingress.1.max(1) as f64),
        share_pct: each(&timed, &Run::share_pct),
        net_share_pct: each(&timed, &Run::net_share_pct),
        perf_pct: stat(timed.iter().filter_map(|r| r.perf_share_pct()).collect()),
    })
}

fn print_table(rows: &[Row]) {
    let head = |c: [&str; 13]| {
        println!(
            "{:>5} {:>6} {:>7} {:>9} {:>9} {:>7} {:>8} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8} {:>8}",
            c[0], "", c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8], c[9], c[10], c[11], c[12]
        )
    };
    println!();
    head([
        "MTU", "Gbit/s", "rx ms/GB", "+rlbd", "whole", "rlbd", "ingress", "egress", "rlbd ns",
        "wire", "rlbd %", "net %", "perf %",
    ]);
    head([
        "",
        "",
        "without",
        "with",
        "path %",
        "us/GB",
        "ns/run",
        "ns/run",
        "/wire pkt",
        "/tc pkt",
        "of rx",
        "of rx",
        "of rx",
    ]);
    for r in rows {
        let whole = r.whole.map_or(f64::NAN, |i| i.med);
        for (name, pick) in [("median", 0), ("worst", 1)] {
            let p = |x: Stat| if pick == 0 { x.med } else { x.max };
            // The worst of the throughput and of the packets merged is the least.
            let least = |x: Stat| if pick == 0 { x.med } else { x.min };
            let whole = match pick {
                0 => whole,
                _ => r.whole.map_or(f64::NAN, |i| i.hi),
            };
            println!(
                "{:>5} {:>6} {:>7.2} {:>9.1} {:>9.1} {:>7.2} {:>8.1} {:>9.1} {:>9.1} {:>9.2} {:>8.1} {:>8.3} {:>8.3} {:>8}",
                r.mtu,
                name,
                least(r.gbps),
                p(r.recv_ms_gb),
                p(r.recv_ms_gb_with),
                whole,
                p(r.rlbd_us_gb),
                p(r.prog_ns_pkt),
                p(r.egress_ns_run),
                p(r.rlbd_ns_wire),
                least(r.wire_per_pkt),
                p(r.share_pct),
                p(r.net_share_pct),
                opt(p(r.perf_pct)),
            );
        }
    }
    println!(
        "  rx ms/GB: receive CPU (the server's NAPI thread, where GRO, the tc hook, IP and TCP \
         run, + the receiving process + rlbd's process) per GB received, without and with \
         rlbd (kernel.bpf_stats_enabled off); whole path %: with over without in the same \
         round, minus 1 (the median; worst: the top of its 90% interval); the rest from the \
         timed runs (kernel.bpf_stats_enabled on): rlbd us/GB: rlbd's tc programs' run time + \
         its process's CPU per GB; ingress ns/run: the ingress program per packet at the tc \
         hook (a GRO packet); egress ns/run: the egress program per packet the server sends \
         (an ACK, which it leaves in 3 instructions: what the kernel's timing adds to any \
         run); rlbd ns/wire pkt: rlbd's cost per packet on the wire (the veth's rx_packets, \
         before GRO); wire/tc pkt: wire packets per GRO packet; rlbd % of rx: rlbd's cost \
         over the receive CPU of the same run (an upper bound: the timing is in it); net %: \
         the same with the timing's floor (the egress ns/run) taken off each program run; \
         perf %: \
         the same with the programs' time from a profile (a lower bound); worst: the largest \
         over the rounds (the least for Gbit/s and wire/tc pkt)"
    );
}

/// The verdict on 1% from the whole-path interval: shown only when the interval is on one side.
fn verdict(i: &Interval) -> &'static str {
    match (i.hi <= 1.0, i.lo > 1.0) {
        (true, _) => "met",
        (_, true) => "NOT met",
        _ => "not shown at this noise (the interval holds 1%)",
    }
}

fn print_targets(rows: &[Row], cost: AckCost) {
    println!("\ntarget:");
    for r in rows {
        let Some(w) = r.whole else { continue };
        println!(
            "  rlbd adds at most 1% to the receive path's CPU, bulk TCP with GRO at {} MTU, the \
             whole path with over without (statistics off): median {:+.2}%, {:.0}% interval \
             {:+.2}% to {:+.2}% over {} rounds -> {}; the breakdown (timed runs): rlbd's share \
             {:.3}% (worst {:.3}%; net of the kernel's timing {:.3}%, worst {:.3}%), {:.1} us \
             per GB, ingress {:.0} ns per packet at the hook, egress {:.0} ns per ACK",
            r.mtu,
            w.med,
            100.0 * w.confidence,
            w.lo,
            w.hi,
            w.n,
            verdict(&w),
            r.share_pct.med,
            r.share_pct.max,
            r.net_share_pct.med,
            r.net_share_pct.max,
            r.rlbd_us_gb.med,
            r.prog_ns_pkt.med,
            r.egress_ns_run.med,
        );
    }
    println!(
        "  an ACK costs the egress program nothing: {} ns (IPv4) and {} ns (IPv6) a run, the \
         floor (a program that returns at once) {} ns (BPF_PROG_TEST_RUN, statistics off)",
        cost.v4_ns, cost.v6_ns, cost.floor_ns
    );
    println!(
        "  the guests' egress program (the bond's, 64 guests pinned) on the same ACKs: {} ns \
         (IPv4) and {} ns (IPv6) a run, {:.0} ns above the floor; the counting program on a \
         GRO packet of 43 frames: {} ns a run, {:.0} ns above the floor",
        cost.guest_v4_ns,
        cost.guest_v6_ns,
        cost.guest_above_floor(),
        cost.ingress_gro_ns,
        cost.ingress_above_floor()
    );
}

/// Prints the table and the target; returns the summary's figures.
pub fn print(runs: &[Run], rounds: usize, secs: f64, settle: f64, cost: AckCost) -> GroFigures {
    let rows: Vec<Row> = MTUS.iter().filter_map(|&m| row(runs, m)).collect();
    println!(
        "\nGRO benchmark, {rounds} round(s) of {secs} s per run (the whole path's 90% interval \
         {} {settle} points wide at both MTUs):",
        if settled(runs, settle) {
            "settled within"
        } else {
            "NOT settled within"
        }
    );
    print_table(&rows);
    print_targets(&rows, cost);
    let at = |mtu: u32| rows.iter().find(|r| r.mtu == mtu);
    let timed = |f: &dyn Fn(&Run) -> (u64, u64)| {
        let v: Vec<f64> = runs
            .iter()
            .filter(|r| r.timed)
            .map(|r| f(r).0 as f64 / f(r).1.max(1) as f64)
            .collect();
        (!v.is_empty()).then(|| stat(v).med)
    };
    GroFigures {
        overhead_pct: at(1500).map(|r| r.share_pct.max),
        overhead_jumbo_pct: at(9000).map(|r| r.share_pct.max),
        share_pct: [at(1500), at(9000)].map(|r| r.map(|r| r.share_pct.med)),
        whole_path_pct: [at(1500), at(9000)].map(|r| r.and_then(|r| r.whole).map(|w| w.med)),
        egress_ns_per_ack: Some(cost.above_floor()),
        guest_egress_ns_per_ack: Some(cost.guest_above_floor()),
        ingress_own_ns_per_pkt: Some(cost.ingress_above_floor()),
        net_share_pct: [at(1500), at(9000)].map(|r| r.map(|r| r.net_share_pct.med)),
        ingress_ns_per_pkt: timed(&|r| r.ingress),
        hook_ns: timed(&|r| r.egress),
    }
}
