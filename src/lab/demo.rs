//! `rlbd demo`: builds the namespace lab, shows two busy clients stuck on one port, then runs
//! rlbd and shows it spreading them.

use std::path::Path;
use std::time::{Duration, Instant};

use super::netns::{check_tools, is_root, Lab, LabResult, PORTS};
use super::sample::{Sampler, Series};
use super::scenario::{finish_sources, start_sink, start_sources, watch_move, Move};
use crate::cli::DemoArgs;

/// The two clients the lab puts on p0 and sends from.
pub const BUSY: [&str; 2] = ["c1", "c3"];

/// What one phase measured.
#[derive(Debug, Clone)]
pub struct Phase {
    /// Traffic start and end, seconds after the lab was built.
    pub t0: f64,
    pub t1: f64,
    /// Mean receive rate of each port over the whole phase, Mbit/s.
    pub port_mbit: Vec<f64>,
    /// Bytes each client's source reported sending.
    pub sent: Vec<(String, u64)>,
    pub series: Series,
    /// The first client seen leaving p0, if watched.
    pub moved: Option<Move>,
}

impl Phase {
    pub fn total(&self) -> f64 {
        self.port_mbit.iter().sum()
    }
}

/// Runs `clients` for `seconds` while sampling the ports every 250 ms; with `watch`, polls the
/// clients' neighbour entries every 100 ms for the first move off p0.
pub fn run_phase(
    lab: &Lab,
    exe: &Path,
    clients: &[&str],
    seconds: u32,
    watch: bool,
) -> LabResult<Phase> {
    let sampler = Sampler::start(lab, Duration::from_millis(250));
    let before = lab.rx_bytes_all(&PORTS)?;
    let t0 = lab.elapsed();
    let started = Instant::now();
    let sources = start_sources(lab, exe, clients, f64::from(seconds))?;
    let deadline = started + Duration::from_secs(u64::from(seconds));
    let moved = if watch {
        watch_move(lab, clients, PORTS[0], deadline, || true)?
    } else {
        None
    };
    let sent = finish_sources(lab, sources, Duration::from_secs(u64::from(seconds) + 10))?;
    let after = lab.rx_bytes_all(&PORTS)?;
    let t1 = lab.elapsed();
    let series = sampler.finish()?;
    let dt = (t1 - t0).max(1e-3);
    let port_mbit = after
        .iter()
        .zip(&before)
        .map(|(a, b)| a.saturating_sub(*b) as f64 * 8.0 / dt / 1e6)
        .collect();
    Ok(Phase {
        t0,
        t1,
        port_mbit,
        sent,
        series,
        moved,
    })
}

/// Entry point of `rlbd demo`.
pub fn run(args: &DemoArgs) -> Result<(), String> {
    if !is_root() {
        return Err(
            "demo needs root: it builds network namespaces (run it as root, e.g. with sudo)".into(),
        );
    }
    check_tools()?;
    if args.seconds == 0 {
        return Err("--seconds must be at least 1".into());
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot find my own executable: {e}"))?;
    let lab = Lab::build(args.cap_mbit)?;
    eprintln!(
        "lab {}: server ports p0, p1 capped at {} Mbit/s each; c1, c3 on p0, c2, c4 on p1",
        lab.prefix(),
        args.cap_mbit
    );
    let _sink = start_sink(&lab, &exe)?;
    eprintln!(
        "phase A: c1 and c3 send for {} s without rlbd",
        args.seconds
    );
    let a = run_phase(&lab, &exe, &BUSY, args.seconds, false)?;
    print_table(
        f64::from(args.cap_mbit),
        &[("A: without rlbd", &a, a.port_mbit.clone())],
    );
    Ok(())
}

fn print_table(cap: f64, rows: &[(&str, &Phase, Vec<f64>)]) {
    println!(
        "{:<28} {:>9} {:>9} {:>9} {:>7}",
        "phase", "p0 Mbit/s", "p1 Mbit/s", "total", "x cap"
    );
    for (name, _, mbit) in rows {
        let total: f64 = mbit.iter().sum();
        println!(
            "{:<28} {:>9.1} {:>9.1} {:>9.1} {:>7.2}",
            name,
            mbit.first().copied().unwrap_or(0.0),
            mbit.get(1).copied().unwrap_or(0.0),
            total,
            total / cap
        );
    }
}
