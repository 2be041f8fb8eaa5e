//! The packing bench (issue 15): a nearly full bond, elastic clients that each want a fixed
//! rate, all starting on one port. How close does rlbd get to the best placement, how fast, and
//! with how many moves?
//!
//! One lab serves every run: `ports` server ports capped at `cap_mbit` each, `clients` clients
//! whose egress is capped by `tc tbf` at their demand (drawn from a seed so that the demands sum
//! to `load` x the bond's capacity). For each load, seed and repetition:
//!
//! 1. **Control**: each client's neighbour entry for the server is pinned (`nud permanent`) to
//!    the port of the best placement ([`rlbd::simulate::ideal::best`]); no rlbd. Its mean
//!    goodput is the run's 100%.
//! 2. **rlbd**: every client starts on `p0` (a dynamic entry, as the bonding driver would leave
//!    it), rlbd runs with its defaults, the clients send for `run_secs`. The mean goodput after
//!    `judge_from` seconds, as a share of the control's, is the run's figure; the time to 95% is
//!    when the goodput (one-second means) reached 95% of the control's and stayed there.
//!
//! Goodput is what the server's ports receive (their rx counters), sampled every 0.5 s from
//! `/proc/PID/net/dev` of the sink (a process in the server's namespace): no process is spawned
//! per sample, so a busy machine does not smear the samples' timing.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::Duration;

use std::time::Instant;

use super::devsample::DevSampler;
use super::netns::{Lab, LabOptions, LabResult};
use super::scenario::{finish_sources, output_to, start_daemon, start_sink, start_sources, tail};
use rlbd::simulate::generate::{demands, DemandSpec};
use rlbd::simulate::ideal;

/// Everything a bench run is made of.
#[derive(Debug, Clone)]
pub struct BenchConfig {
    /// The `rlbd` binary (the daemon) and the `rlbd-lab` binary (the traffic sink and sources).
    pub exe: PathBuf,
    pub lab_exe: PathBuf,
    /// The daemon, when it is to be another build than `exe` (to measure an older planner).
    pub daemon_exe: Option<PathBuf>,
    /// Where the daemon logs go, one per run.
    pub log_dir: PathBuf,
    pub ports: usize,
    pub cap_mbit: u32,
    pub clients: usize,
    /// Total demand as a fraction of the bond's capacity, one entry per load level.
    pub loads: Vec<f64>,
    pub seeds: Vec<u64>,
    pub reps: usize,
    /// How long the clients send under rlbd, and from when (after traffic start) the goodput
    /// is judged.
    pub run_secs: f64,
    pub judge_from: f64,
    /// How long the clients send in the control run; its first `control_settle` seconds are
    /// not counted (TCP ramping up).
    pub control_secs: f64,
    pub control_settle: f64,
    /// The least share of the control's goodput every run must reach (the goal), or,
    /// with `floor` set, the median of each (load, seed)'s runs.
    pub goal: f64,
    /// The CI form's judgement: every run at least this share of the control, each demand
    /// set's median at least `goal`. One run on TCP's dynamics can be slow (a port that reads
    /// under the threshold for a second while its flows recover, and re-saturates seconds
    /// later) without anything having changed; a demand set whose typical run misses the goal,
    /// or any run that collapses, is a regression.
    pub floor: Option<f64>,
    /// Extra arguments for `rlbd run`.
    pub daemon_args: Vec<String>,
}

impl BenchConfig {
    /// The full bench: 4 ports of 20 Mbit/s, 11 clients, 70% to 95% load, 3 seeds, 3 runs each.
    pub fn full(exe: PathBuf, lab_exe: PathBuf, log_dir: PathBuf) -> Self {
        Self {
            exe,
            lab_exe,
            daemon_exe: None,
            log_dir,
            ports: 4,
            cap_mbit: 20,
            clients: 11,
            loads: vec![0.70, 0.85, 0.92, 0.95],
            seeds: vec![1, 2, 3],
            reps: 3,
            run_secs: 20.0,
            judge_from: 10.0,
            control_secs: 8.0,
            control_settle: 2.0,
            goal: 0.97,
            floor: None,
            daemon_args: Vec::new(),
        }
    }

    /// The form CI runs: 85% load, two seeds, three runs each, shorter phases, judged by each
    /// seed's median and a floor under every run. Most runs at 85% reach the goal, but not
    /// all: in one of nine full-bench runs a flow stayed starved (0.1 Mbit/s) on a port with
    /// room, and a CI run of this form once had a run at 91.8% (95% reached at 13 s) where the
    /// run before on the same planner had 100.1%.
    pub fn short(exe: PathBuf, lab_exe: PathBuf, log_dir: PathBuf) -> Self {
        Self {
            loads: vec![0.85],
            seeds: vec![1, 2],
            reps: 3,
            floor: Some(0.85),
            run_secs: 15.0,
            control_secs: 6.0,
            ..Self::full(exe, lab_exe, log_dir)
        }
    }

    /// The demands of one load level and seed, Mbit/s.
    pub fn demands(&self, load: f64, seed: u64) -> Result<Vec<f64>, String> {
        let cap = f64::from(self.cap_mbit);
        demands(&DemandSpec {
            seed,
            clients: self.clients,
            total: ((load * cap * self.ports as f64) * 10.0).round() / 10.0,
            // No client alone fills more than 60% of a port: every one stays movable.
            max_each: 0.6 * cap,
            spread: 0.25,
        })
    }
}

/// What one repetition measured.
#[derive(Debug, Clone)]
pub struct RunResult {
    pub load: f64,
    pub seed: u64,
    pub rep: usize,
    /// The best placement's goodput by arithmetic, and the control's measured goodput, Mbit/s.
    pub ideal_calc: f64,
    pub ideal: f64,
    /// rlbd's goodput after `judge_from`, Mbit/s, and as a share of `ideal`.
    pub got: f64,
    pub share: f64,
    /// Seconds after traffic start until the goodput reached 95% of the control's for good.
    pub time_to_95: Option<f64>,
    pub moves: usize,
    /// The most moves any one client had.
    pub max_moves_per_client: usize,
}

/// Runs the whole bench, printing a line per run to `out`; returns every run's result.
pub fn run(cfg: &BenchConfig, out: &mut dyn Write) -> LabResult<Vec<RunResult>> {
    std::fs::create_dir_all(&cfg.log_dir)
        .map_err(|e| format!("cannot create {}: {e}", cfg.log_dir.display()))?;
    let lab = Lab::build_sized(cfg.cap_mbit, cfg.ports, cfg.clients, LabOptions::default())?;
    let sink = start_sink(&lab, &cfg.lab_exe)?;
    let dev = PathBuf::from(format!("/proc/{}/net/dev", sink.id()));
    let mut results = Vec::new();
    for &load in &cfg.loads {
        for &seed in &cfg.seeds {
            let d = cfg.demands(load, seed)?;
            for (c, mbit) in lab.clients().iter().zip(&d) {
                lab.cap_client(c, Some(*mbit))?;
            }
            let caps = vec![f64::from(cfg.cap_mbit); cfg.ports];
            let best = ideal::best(&caps, &d);
            let _ = writeln!(
                out,
                "load {:.0}% seed {seed}: demands {:?} Mbit/s; best placement {:?} delivers {:.1}",
                load * 100.0,
                d,
                best.port_of,
                best.delivered
            );
            for rep in 1..=cfg.reps {
                let ideal = control(&lab, cfg, &dev, &best.port_of)?;
                let log = cfg.log_dir.join(format!(
                    "packing-{:.0}-seed{seed}-rep{rep}.log",
                    load * 100.0
                ));
                let _ = std::fs::remove_file(&log);
                let r = with_rlbd(&lab, cfg, &dev, &log).map_err(|e| {
                    format!("{e}\ndaemon log {}:\n{}", log.display(), tail(&log, 30))
                })?;
                let csv: String = r
                    .samples
                    .iter()
                    .map(|(t, v)| format!("{t:.3},{v:.3}\n"))
                    .collect();
                let _ = std::fs::write(log.with_extension("csv"), format!("t,mbit\n{csv}"));
                let (moves, per_client) = count_moves(&log);
                let got = r.mean(cfg.judge_from, cfg.run_secs - 0.25);
                let result = RunResult {
                    load,
                    seed,
                    rep,
                    ideal_calc: best.delivered,
                    ideal,
                    got,
                    share: if ideal > 0.0 { got / ideal } else { 0.0 },
                    time_to_95: r.time_to(0.95 * ideal, cfg.run_secs - 0.25),
                    moves,
                    max_moves_per_client: per_client,
                };
                let _ = writeln!(out, "{}", run_line(&result));
                if result.share < cfg.goal {
                    let path = log.with_extension("status");
                    let status = std::fs::read_to_string(&path).unwrap_or_default();
                    let _ = write!(
                        out,
                        "    under the goal; rlbd status about {:.0} s into the run (each second's in {}):\n{}",
                        cfg.run_secs - 1.0,
                        path.display(),
                        snapshot_lines(&status)
                    );
                }
                results.push(result);
                lab.check_stop()?;
            }
        }
    }
    Ok(results)
}

/// One line per run, for the log of a bench.
pub fn run_line(r: &RunResult) -> String {
    format!(
        "  load {:.0}% seed {} rep {}: control {:.1} Mbit/s (best by arithmetic {:.1}), rlbd {:.1} \
         = {:.1}% of the control; 95% at {}; {} moves (most per client {})",
        r.load * 100.0,
        r.seed,
        r.rep,
        r.ideal,
        r.ideal_calc,
        r.got,
        r.share * 100.0,
        r.time_to_95
            .map_or("never".to_string(), |t| format!("{t:.1} s")),
        r.moves,
        r.max_moves_per_client
    )
}

/// The control: clients pinned to the best placement, no rlbd. Returns the mean goodput.
fn control(lab: &Lab, cfg: &BenchConfig, dev: &Path, port_of: &[usize]) -> LabResult<f64> {
    for (c, &p) in lab.clients().iter().zip(port_of) {
        lab.pin(c, lab.ports()[p])?;
    }
    let t = traffic(lab, cfg, dev, cfg.control_secs)?;
    Ok(t.mean(cfg.control_settle, cfg.control_secs - 0.25))
}

/// A phase's total goodput over time, seconds after its traffic started.
struct Totals {
    /// (t, Mbit/s over the sample's period)
    samples: Vec<(f64, f64)>,
}

impl Totals {
    /// Mean over samples ending in `(from, to]`.
    fn mean(&self, from: f64, to: f64) -> f64 {
        let inside: Vec<f64> = self
            .samples
            .iter()
            .filter(|(t, _)| *t > from && *t <= to)
            .map(|(_, v)| *v)
            .collect();
        if inside.is_empty() {
            0.0
        } else {
            inside.iter().sum::<f64>() / inside.len() as f64
        }
    }

    /// The start of the first one-second window after which every one-second mean up to `end`
    /// is at least `level` (one-second means: a half-second sample of a few TCP flows is noisy).
    fn time_to(&self, level: f64, end: f64) -> Option<f64> {
        let windows: Vec<(f64, f64)> = self
            .samples
            .iter()
            .filter(|(t, _)| *t >= 1.0 && *t <= end)
            .map(|(t, _)| (*t - 1.0, self.mean(*t - 1.0 + 1e-9, *t)))
            .collect();
        let last_low = windows.iter().rposition(|(_, v)| *v < level);
        match last_low {
            None => windows.first().map(|w| w.0),
            Some(i) => windows.get(i + 1).map(|w| w.0),
        }
    }
}

/// Every client sends for `secs`; returns the goodput over time.
fn traffic(lab: &Lab, cfg: &BenchConfig, dev: &Path, secs: f64) -> LabResult<Totals> {
    let sampler = DevSampler::start(dev, lab.ports(), Duration::from_millis(500))?;
    let t0 = Instant::now();
    let sources = start_sources(lab, &cfg.lab_exe, lab.clients(), secs)?;
    let sent = finish_sources(lab, sources, Duration::from_secs_f64(secs + 10.0));
    let samples = sampler.finish(t0)?;
    sent?;
    // Let the queues drain before the next phase measures anything.
    lab.sleep(Duration::from_millis(500))?;
    Ok(Totals { samples })
}

/// Every client on `p0`, rlbd started, the clients send for `run_secs`.
fn with_rlbd(lab: &Lab, cfg: &BenchConfig, dev: &Path, log: &Path) -> LabResult<Totals> {
    for c in lab.clients() {
        lab.place(c, lab.ports()[0])?;
    }
    let mut args: Vec<&str> = vec!["-v"];
    args.extend(cfg.daemon_args.iter().map(String::as_str));
    let exe = cfg.daemon_exe.as_ref().unwrap_or(&cfg.exe);
    let mut daemon = start_daemon(lab, exe, log, &args)?;
    lab.sleep(Duration::from_millis(1500))?;
    if let Some(st) = daemon.try_wait().map_err(|e| format!("wait: {e}"))? {
        return Err(format!("rlbd run exited before the traffic started ({st})"));
    }
    let mut snapshot = status_snapshot(lab, exe, log, cfg.run_secs - 1.0)?;
    let t = traffic(lab, cfg, dev, cfg.run_secs);
    let _ = lab.stop_child(&mut snapshot, Duration::from_secs(1));
    let status = lab.stop_child(&mut daemon, Duration::from_secs(3))?;
    let t = t?;
    if !status.success() {
        return Err(format!("rlbd run ended with {status}"));
    }
    Ok(t)
}

/// `rlbd status --all` of the running daemon every second of the traffic up to `last` seconds
/// into it, into `<log>.status`: where each client was and what it read, second by second,
/// which tells a run short of its goal by a starved flow (a client reading next to nothing on a
/// port with room) from one rlbd left over-full, and shows what the planner saw while it waited.
fn status_snapshot(lab: &Lab, exe: &Path, log: &Path, last: f64) -> LabResult<Child> {
    let (out, err) = output_to(&log.with_extension("status"), false)?;
    let exe = exe.to_string_lossy();
    // The daemon on `--ports` is named after its first port.
    let script = format!(
        "for i in $(seq {}); do sleep 1; \"$0\" status {} --all; done",
        last.floor().max(1.0),
        lab.ports()[0]
    );
    lab.spawn_with("srv", &["sh", "-c", &script, &exe], out, err)
}

/// The lines of the last status in a `.status` file worth printing under a run short of its
/// goal: the ports' and the clients' tables, indented.
pub fn snapshot_lines(status: &str) -> String {
    let last = status.rfind("\nrlbd ").map_or(status, |i| &status[i + 1..]);
    last.lines()
        .skip_while(|l| !l.starts_with("PORT"))
        .filter(|l| !l.trim().is_empty() && !l.starts_with("TOTALS"))
        .map(|l| format!("      {l}\n"))
        .collect()
}

/// Moves in a daemon log: (all of them, the most any one client had).
pub fn count_moves(log: &Path) -> (usize, usize) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut per: std::collections::HashMap<String, usize> = Default::default();
    let mut total = 0;
    for line in text.lines() {
        // `... move 198.18.0.12 (02:..) p0 -> p2: ...`; a dry run's "would move" is no move.
        let Some(rest) = line.split(" move ").nth(1) else {
            continue;
        };
        if line.contains("would move") || !rest.contains(" -> ") {
            continue;
        }
        total += 1;
        let ip = rest.split_whitespace().next().unwrap_or_default();
        *per.entry(ip.to_string()).or_default() += 1;
    }
    (total, per.values().copied().max().unwrap_or(0))
}

/// Median and worst share, median time to 95%, and median moves, per load level: the closing
/// table of the issue.
pub fn table(results: &[RunResult]) -> String {
    let mut loads: Vec<f64> = results.iter().map(|r| r.load).collect();
    loads.sort_by(f64::total_cmp);
    loads.dedup();
    let mut s = String::from(
        "load   runs  median % of ideal  worst % of ideal  median time to 95%  worst time to 95%  moves per run (median, max)\n",
    );
    for load in loads {
        let rs: Vec<&RunResult> = results.iter().filter(|r| r.load == load).collect();
        let shares: Vec<f64> = rs.iter().map(|r| r.share * 100.0).collect();
        let times: Vec<f64> = rs
            .iter()
            .map(|r| r.time_to_95.unwrap_or(f64::INFINITY))
            .collect();
        let moves: Vec<f64> = rs.iter().map(|r| r.moves as f64).collect();
        let fmt_t = |t: f64| {
            if t.is_finite() {
                format!("{t:.1} s")
            } else {
                "never".to_string()
            }
        };
        s.push_str(&format!(
            "{:>3.0}%  {:>5}  {:>17.1}  {:>16.1}  {:>18}  {:>17}  {:>.0}, {:.0}\n",
            load * 100.0,
            rs.len(),
            median(&shares),
            shares.iter().copied().fold(f64::INFINITY, f64::min),
            fmt_t(median(&times)),
            fmt_t(times.iter().copied().fold(0.0, f64::max)),
            median(&moves),
            moves.iter().copied().fold(0.0, f64::max),
        ));
    }
    s
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The runs that fail `cfg`'s judgement, as lines: every run under `goal`, or (with a floor)
/// every run under the floor and every (load, seed) whose median run is under `goal`.
pub fn failures(cfg: &BenchConfig, results: &[RunResult]) -> Vec<String> {
    let Some(floor) = cfg.floor else {
        return results
            .iter()
            .filter(|r| r.share < cfg.goal)
            .map(run_line)
            .collect();
    };
    let mut out: Vec<String> = results
        .iter()
        .filter(|r| r.share < floor)
        .map(|r| {
            format!(
                "under the floor of {:.0}%: {}",
                floor * 100.0,
                run_line(r).trim_start()
            )
        })
        .collect();
    let mut sets: Vec<(u64, u64)> = results.iter().map(|r| (r.load.to_bits(), r.seed)).collect();
    sets.sort_unstable();
    sets.dedup();
    for (load, seed) in sets {
        let mut shares: Vec<f64> = results
            .iter()
            .filter(|r| r.load.to_bits() == load && r.seed == seed)
            .map(|r| r.share)
            .collect();
        shares.sort_by(f64::total_cmp);
        let median = shares[shares.len() / 2];
        if median < cfg.goal {
            out.push(format!(
                "load {:.0}% seed {seed}: median run {:.1}% of the control, under {:.0}%",
                f64::from_bits(load) * 100.0,
                median * 100.0,
                cfg.goal * 100.0
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests;
