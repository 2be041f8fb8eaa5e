//! `rlbd demo`: builds the namespace lab, shows two busy clients stuck on one port, then runs
//! rlbd and shows it spreading them.

use std::path::Path;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::chart::{svg, Mark};
use super::netns::{check_tools, is_root, Lab, LabResult, PORTS, SERVER_IP, SINK_PORT};
use super::sample::{Sampler, Series};
use super::scenario::{start_daemon, tail, wait_listening, watch_move, Move};
use super::traffic::{run_sink, run_source, spawn_in_netns};
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

/// The demo's traffic sink: a thread in the server namespace, stopped when dropped.
struct Sink {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<std::io::Result<()>>>,
}

impl Sink {
    fn start(lab: &Lab) -> LabResult<Sink> {
        let stop = Arc::new(AtomicBool::new(false));
        let listen = format!("{SERVER_IP}:{SINK_PORT}");
        let flag = stop.clone();
        let at = listen.clone();
        let thread = spawn_in_netns(&lab.ns("srv"), move || run_sink(&at, Some(flag)))
            .map_err(|e| format!("cannot start the sink: {e}"))?;
        let mut sink = Sink {
            stop,
            thread: Some(thread),
        };
        wait_listening(lab, &listen, || Ok(sink.failure()))?;
        Ok(sink)
    }

    /// Why the sink thread ended, if it has.
    fn failure(&mut self) -> Option<String> {
        if !self.thread.as_ref()?.is_finished() {
            return None;
        }
        Some(match self.thread.take()?.join() {
            Ok(Err(e)) => e.to_string(),
            _ => "the sink thread ended".into(),
        })
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Each client's traffic source as a thread in its namespace; returns (client, bytes sent).
fn send_from(lab: &Lab, clients: &[&str], seconds: u32) -> LabResult<Vec<(String, u64)>> {
    let to = format!("{SERVER_IP}:{SINK_PORT}");
    let threads = clients
        .iter()
        .map(|c| {
            let to = to.clone();
            spawn_in_netns(&lab.ns(c), move || run_source(&to, f64::from(seconds)))
                .map(|t| (c.to_string(), t))
                .map_err(|e| format!("cannot start the source in {c}: {e}"))
        })
        .collect::<LabResult<Vec<_>>>()?;
    threads
        .into_iter()
        .map(|(c, t)| match t.join() {
            Ok(Ok(n)) => Ok((c, n)),
            Ok(Err(e)) => Err(format!("the source in {c}: {e}")),
            Err(_) => Err(format!("the source in {c} panicked")),
        })
        .collect()
}

/// Runs `clients` for `seconds` while sampling the ports every 250 ms; with `watch`, polls the
/// clients' neighbour entries every 100 ms for the first move off p0.
pub fn run_phase(lab: &Lab, clients: &[&str], seconds: u32, watch: bool) -> LabResult<Phase> {
    let sampler = Sampler::start(lab, Duration::from_millis(250));
    let before = lab.rx_bytes_all(&PORTS)?;
    let t0 = lab.elapsed();
    let started = Instant::now();
    let deadline = started + Duration::from_secs(u64::from(seconds));
    let (moved, sent) = std::thread::scope(|s| {
        let sources = s.spawn(|| send_from(lab, clients, seconds));
        let moved = if watch {
            watch_move(lab, clients, PORTS[0], deadline, || true)
        } else {
            Ok(None)
        };
        let sent = sources
            .join()
            .unwrap_or_else(|_| Err("the sources panicked".into()));
        (moved, sent)
    });
    let (moved, sent) = (moved?, sent?);
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
    let cap = f64::from(args.cap_mbit);
    eprintln!(
        "lab {}: server ports p0, p1 capped at {} Mbit/s each; c1, c3 on p0, c2, c4 on p1",
        lab.prefix(),
        args.cap_mbit
    );
    let _sink = Sink::start(&lab)?;

    eprintln!(
        "phase A: c1 and c3 send for {} s without rlbd",
        args.seconds
    );
    let a = run_phase(&lab, &BUSY, args.seconds, false)?;
    print_table(cap, &[("A: without rlbd", a.port_mbit.clone())]);

    let log = std::env::temp_dir().join(format!("rlbd-demo-{}.log", std::process::id()));
    let _ = std::fs::remove_file(&log);
    let (b, status) = phase_b(&lab, &exe, &log, args.seconds)?;
    print_results(cap, args.seconds, &a, &b);
    println!("rlbd stopped: {status}; log: {}", log.display());

    if let Some(path) = &args.chart {
        write_chart(path, args.cap_mbit, &a, &b)?;
    }
    if b.moved.is_none() {
        return Err(format!(
            "rlbd moved no client in {} s; log tail:\n{}",
            args.seconds,
            tail(&log, 20)
        ));
    }
    Ok(())
}

/// Phase B: the busy clients start on p0 again, this time with rlbd running. Returns the phase
/// and how rlbd ended when stopped after it.
fn phase_b(lab: &Lab, exe: &Path, log: &Path, seconds: u32) -> LabResult<(Phase, ExitStatus)> {
    for c in BUSY {
        lab.place(c, PORTS[0])?;
    }
    eprintln!("phase B: starting rlbd (log: {})", log.display());
    let mut daemon = start_daemon(lab, exe, log, &["-v"])?;
    lab.sleep(Duration::from_millis(1500))?;
    if let Some(st) = daemon.try_wait().map_err(|e| format!("wait: {e}"))? {
        return Err(format!(
            "rlbd exited before the traffic started ({st}); log {}:\n{}",
            log.display(),
            tail(log, 20)
        ));
    }
    eprintln!("phase B: c1 and c3 send for {seconds} s with rlbd running");
    let b = run_phase(lab, &BUSY, seconds, true);
    // Stopped whether or not the phase went well: its failure is reported after.
    let status = lab.stop_child(&mut daemon, Duration::from_secs(3))?;
    Ok((b?, status))
}

/// The rates of both phases (phase B also before and after the move), the time to move and
/// what each phase sent.
fn print_results(cap: f64, seconds: u32, a: &Phase, b: &Phase) {
    let mut rows = vec![
        ("A: without rlbd", a.port_mbit.clone()),
        ("B: with rlbd", b.port_mbit.clone()),
    ];
    if let Some(m) = &b.moved {
        if let Some(before) = b.series.mean(b.t0, m.t) {
            rows.push(("B: before the move", before));
        }
        // Skip a second after the move: TCP takes a moment to fill the new port.
        if let Some(after) = b.series.mean(m.t + 1.0, b.t1) {
            rows.push(("B: after the move (+1 s on)", after));
        }
    }
    println!();
    print_table(cap, &rows);
    match &b.moved {
        Some(m) => println!(
            "time to move: {:.1} s after traffic start; moved: {} -> {}",
            m.t - b.t0,
            m.client,
            m.to_port.unwrap_or("?")
        ),
        None => println!("time to move: none within {seconds} s; no client moved"),
    }
    for (phase, p) in [("A", a), ("B", b)] {
        let sent: Vec<String> = p
            .sent
            .iter()
            .map(|(c, n)| format!("{c} {:.1} MB", *n as f64 / 1e6))
            .collect();
        println!("sent in {phase}: {}", sent.join(", "));
    }
}

/// Both phases on one chart, with the starts of the phases and the move marked.
fn write_chart(path: &Path, cap_mbit: u32, a: &Phase, b: &Phase) -> Result<(), String> {
    let mut marks = vec![
        Mark {
            t: a.t0,
            label: "A: c1+c3 start".into(),
        },
        Mark {
            t: b.t0,
            label: "B: c1+c3 start, rlbd running".into(),
        },
    ];
    if let Some(m) = &b.moved {
        let to = m.to_port.unwrap_or("?");
        marks.push(Mark {
            t: m.t,
            label: format!("rlbd moved {} to {to}", m.client),
        });
    }
    let mut series = a.series.clone();
    series.extend(b.series.clone());
    let title = format!("rlbd demo: per-port receive rate, cap {cap_mbit} Mbit/s per port");
    std::fs::write(path, svg(&title, &series, f64::from(cap_mbit), &marks, 1.0))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    println!("chart: {}", path.display());
    Ok(())
}

fn print_table(cap: f64, rows: &[(&str, Vec<f64>)]) {
    println!(
        "{:<28} {:>9} {:>9} {:>9} {:>7}",
        "phase", "p0 Mbit/s", "p1 Mbit/s", "total", "x cap"
    );
    for (name, mbit) in rows {
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
