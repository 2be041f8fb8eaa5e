//! The GRO benchmark's output (`gro.rs`): a line per run, the table per MTU (median and worst
//! over the rounds), the target, and the two figures the summary line takes.

use super::gro::{Run, MTUS};

/// rlbd's share of the receive path's CPU (program run time and daemon over the receive side's
/// CPU), worst over the rounds, in percent: at 1500 MTU and at 9000. `None` where no run
/// measured it. For `capture-summary:`'s `gro_tcp_overhead_pct` and
/// `gro_tcp_overhead_jumbo_pct`.
#[derive(Debug, Clone, Copy, Default)]
pub struct GroFigures {
    pub overhead_pct: Option<f64>,
    pub overhead_jumbo_pct: Option<f64>,
}

impl GroFigures {
    /// `gro-summary: gro_tcp_overhead_pct=.. gro_tcp_overhead_jumbo_pct=..` (`nan` if missing).
    pub fn line(&self) -> String {
        let num = |v: Option<f64>| v.map_or("nan".into(), |x| format!("{x:.3}"));
        format!(
            "gro-summary: gro_tcp_overhead_pct={} gro_tcp_overhead_jumbo_pct={}",
            num(self.overhead_pct),
            num(self.overhead_jumbo_pct)
        )
    }
}

pub fn print_run(round: usize, r: &Run) {
    let mut line = format!(
        "  round {round}, MTU {}, {}: {:.2} GB in {:.2} s ({:.1} Gbit/s), {} packets at the \
         veth; receive CPU {:.0} ms (NAPI thread {:.0}, receiver {:.0}, rlbd {:.1}; CPU {} \
         busy {:.0})",
        r.mtu,
        if r.rlbd { "with rlbd" } else { "without rlbd" },
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
    if r.rlbd {
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

/// One MTU's figures over the rounds.
struct Row {
    mtu: u32,
    gbps: Stat,
    recv_ms_gb: Stat,
    recv_ms_gb_with: Stat,
    diff_pct: Stat,
    rlbd_us_gb: Stat,
    prog_ns_pkt: Stat,
    rlbd_ns_pkt: Stat,
    rlbd_ns_wire: Stat,
    wire_per_pkt: Stat,
    share_pct: Stat,
    perf_pct: Stat,
}

fn row(runs: &[Run], mtu: u32) -> Option<Row> {
    let of = |rlbd: bool| -> Vec<&Run> {
        runs.iter()
            .filter(|r| r.mtu == mtu && r.rlbd == rlbd)
            .collect()
    };
    let (without, with) = (of(false), of(true));
    if with.is_empty() {
        return None;
    }
    let per_gb = |r: &Run| ms(r.recv_ns()) / r.gb().max(1e-9);
    let each = |set: &[&Run], f: &dyn Fn(&Run) -> f64| stat(set.iter().map(|r| f(r)).collect());
    // Runs come in pairs, one MTU's without and with rlbd next to each other.
    let diffs: Vec<f64> = runs
        .chunks(2)
        .filter(|p| p.len() == 2 && p[0].mtu == mtu)
        .filter_map(|p| {
            let (w, o) = if p[0].rlbd {
                (&p[0], &p[1])
            } else {
                (&p[1], &p[0])
            };
            (w.rlbd && !o.rlbd).then(|| 100.0 * (per_gb(w) / per_gb(o) - 1.0))
        })
        .collect();
    Some(Row {
        mtu,
        gbps: each(&with, &|r| r.gb() * 8.0 / r.secs.max(1e-9)),
        recv_ms_gb: each(&without, &per_gb),
        recv_ms_gb_with: each(&with, &per_gb),
        diff_pct: stat(diffs),
        rlbd_us_gb: each(&with, &|r| r.rlbd_ns() as f64 / 1e3 / r.gb().max(1e-9)),
        prog_ns_pkt: each(&with, &|r| r.ingress.0 as f64 / r.ingress.1.max(1) as f64),
        rlbd_ns_pkt: each(&with, &|r| r.rlbd_ns() as f64 / r.ingress.1.max(1) as f64),
        rlbd_ns_wire: each(&with, &|r| r.rlbd_ns() as f64 / r.wire.max(1) as f64),
        wire_per_pkt: each(&with, &|r| r.wire as f64 / r.ingress.1.max(1) as f64),
        share_pct: each(&with, &Run::share_pct),
        perf_pct: stat(with.iter().filter_map(|r| r.perf_share_pct()).collect()),
    })
}

fn print_table(rows: &[Row]) {
    println!(
        "\n{:>5} {:>6} {:>7} {:>9} {:>9} {:>7} {:>8} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8}",
        "MTU",
        "",
        "Gbit/s",
        "rx ms/GB",
        "+rlbd",
        "diff %",
        "rlbd",
        "prog ns",
        "rlbd ns",
        "rlbd ns",
        "wire",
        "rlbd %",
        "perf %"
    );
    println!(
        "{:>5} {:>6} {:>7} {:>9} {:>9} {:>7} {:>8} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8}",
        "",
        "",
        "",
        "without",
        "with",
        "",
        "us/GB",
        "/tc pkt",
        "/tc pkt",
        "/wire pkt",
        "/tc pkt",
        "of rx",
        "of rx"
    );
    for r in rows {
        for (name, pick) in [("median", 0), ("worst", 1)] {
            let p = |x: Stat| if pick == 0 { x.med } else { x.max };
            // The worst of the throughput and of the packets merged is the least.
            let least = |x: Stat| if pick == 0 { x.med } else { x.min };
            println!(
                "{:>5} {:>6} {:>7.2} {:>9.1} {:>9.1} {:>7.2} {:>8.1} {:>9.1} {:>9.1} {:>9.2} {:>8.1} {:>8.3} {:>8}",
                r.mtu,
                name,
                least(r.gbps),
                p(r.recv_ms_gb),
                p(r.recv_ms_gb_with),
                p(r.diff_pct),
                p(r.rlbd_us_gb),
                p(r.prog_ns_pkt),
                p(r.rlbd_ns_pkt),
                p(r.rlbd_ns_wire),
                least(r.wire_per_pkt),
                p(r.share_pct),
                opt(p(r.perf_pct)),
            );
        }
    }
    println!(
        "  rx ms/GB: receive CPU (the server's NAPI thread, where GRO, the tc hook, IP and TCP \
         run, + the receiving process + rlbd's process) per GB received, without and with \
         rlbd; diff %: with over without in the same round, minus 1 (a cross-check: the \
         difference of two whole-path figures, noisier than the share); rlbd us/GB: rlbd's \
         tc programs' run time (kernel.bpf_stats_enabled) + its process's CPU per GB; prog \
         ns/tc pkt: the ingress program alone per packet at the tc hook (a GRO packet); rlbd \
         ns/tc pkt and /wire pkt: rlbd's cost per packet at the tc hook and per packet on the \
         wire (the veth's rx_packets, before GRO); wire/tc pkt: wire packets per GRO packet; \
         rlbd % of rx: rlbd's cost over the receive CPU of the same run (an upper bound: the \
         kernel's timing of each program run is in it); perf %: the same with the programs' \
         time from a profile of the receive side's tasks (a lower bound: the hook's dispatch \
         is not in it); worst: the largest \
         over the rounds (the least for Gbit/s and wire/tc pkt)"
    );
}

/// Prints the table and the target; returns the summary's figures.
pub fn print(runs: &[Run], rounds: usize, secs: f64) -> GroFigures {
    let rows: Vec<Row> = MTUS.iter().filter_map(|&m| row(runs, m)).collect();
    println!("\nGRO benchmark, {rounds} round(s) of {secs} s per run:");
    print_table(&rows);
    println!("\ntarget:");
    for r in &rows {
        println!(
            "  rlbd adds at most 1% to the receive path's CPU, bulk TCP with GRO at {} MTU: worst \
             {:.3}% (median {:.3}%{}; with over without: median {:+.2}%, {:+.2}% to {:+.2}%) -> \
             {}; {:.1} us per GB received, {:.0} ns per packet at the tc hook, {:.2} \
             ns per wire packet (median)",
            r.mtu,
            r.share_pct.max,
            r.share_pct.med,
            match r.perf_pct.max.is_nan() {
                true => String::new(),
                false => format!("; from the profile: worst {:.3}%", r.perf_pct.max),
            },
            r.diff_pct.med,
            r.diff_pct.min,
            r.diff_pct.max,
            if r.share_pct.max <= 1.0 {
                "met"
            } else {
                "NOT met"
            },
            r.rlbd_us_gb.med,
            r.rlbd_ns_pkt.med,
            r.rlbd_ns_wire.med,
        );
    }
    let worst = |mtu: u32| rows.iter().find(|r| r.mtu == mtu).map(|r| r.share_pct.max);
    GroFigures {
        overhead_pct: worst(1500),
        overhead_jumbo_pct: worst(9000),
    }
}
