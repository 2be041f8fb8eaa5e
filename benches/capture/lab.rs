//! The namespace lab of the benchmark: the veth pair between two namespaces (torn down on drop,
//! also on errors and Ctrl-C), the CPU and drop counters read around a run, the receiver's
//! output lines, and the waits for a quiet machine.

use std::io::{BufRead, BufReader};
use std::process::ChildStdout;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rlbd_lab::netns::{run_cmd, stop_flag};

use super::{Res, RX_MAC, TX_MAC};

/// The two namespaces; deleted (after killing what runs in them) on drop, so also on
/// errors, panics and Ctrl-C (which the driver turns into an error).
pub struct Pair {
    pub tx: String,
    pub rx: String,
    made: Vec<String>,
}

impl Pair {
    pub fn create() -> Res<Pair> {
        let base = format!("rlbd-bench-{}", std::process::id());
        let mut pair = Pair {
            tx: format!("{base}-tx"),
            rx: format!("{base}-rx"),
            made: Vec::new(),
        };
        for ns in [pair.tx.clone(), pair.rx.clone()] {
            run_cmd(&["ip", "netns", "add", &ns])?;
            pair.made.push(ns.clone());
            run_cmd(&["ip", "-n", &ns, "link", "set", "lo", "up"])?;
            for key in ["all", "default"] {
                let script = format!("echo 1 > /proc/sys/net/ipv6/conf/{key}/disable_ipv6");
                run_cmd(&["ip", "netns", "exec", &ns, "sh", "-c", &script])?;
            }
        }
        let rx_mac = RX_MAC.to_string();
        run_cmd(&[
            "ip", "-n", &pair.tx, "link", "add", "tx0", "address", TX_MAC, "type", "veth", "peer",
            "name", "rx0", "address", &rx_mac, "netns", &pair.rx,
        ])?;
        run_cmd(&["ip", "-n", &pair.tx, "link", "set", "tx0", "up"])?;
        run_cmd(&["ip", "-n", &pair.rx, "link", "set", "rx0", "up"])?;
        Ok(pair)
    }

    pub fn rx_packets(&self) -> u64 {
        run_cmd(&[
            "ip",
            "netns",
            "exec",
            &self.rx,
            "cat",
            "/sys/class/net/rx0/statistics/rx_packets",
        ])
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        for ns in &self.made {
            if let Ok(out) = run_cmd(&["ip", "netns", "pids", ns]) {
                for pid in out.split_whitespace().filter_map(|p| p.parse::<i32>().ok()) {
                    // SAFETY: kill has no memory-safety preconditions; pid > 0 is one
                    // process, found inside our own namespace.
                    unsafe {
                        libc::kill(pid, libc::SIGKILL);
                    }
                }
            }
        }
        std::thread::sleep(Duration::from_millis(100));
        for ns in self.made.drain(..).rev() {
            if let Err(e) = run_cmd(&["ip", "netns", "del", &ns]) {
                eprintln!("namespace benchmark teardown: {e}");
            }
        }
    }
}

/// Frames the kernel dropped from its per-CPU input backlogs (all CPUs), from
/// /proc/net/softnet_stat.
pub fn backlog_drops() -> u64 {
    std::fs::read_to_string("/proc/net/softnet_stat")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| u64::from_str_radix(l.split_whitespace().nth(1)?, 16).ok())
        .sum()
}

pub fn check_stop() -> Res<()> {
    if stop_flag().load(Ordering::Relaxed) {
        Err("interrupted".into())
    } else {
        Ok(())
    }
}

/// Reads lines from a receiver's stdout on a thread of its own, so waits can time out.
pub fn lines_of(out: ChildStdout) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

pub fn expect_line(lines: &mpsc::Receiver<String>, prefix: &str, wait: Duration) -> Res<String> {
    let end = Instant::now() + wait;
    loop {
        check_stop()?;
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!("no {prefix:?} line from the receiver in {wait:?}"));
        }
        match lines.recv_timeout(left.min(Duration::from_millis(100))) {
            Ok(l) if l.starts_with(prefix) => return Ok(l),
            Ok(_) | Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(format!("the receiver exited without a {prefix:?} line"))
            }
        }
    }
}

fn other_labs(mine: &str) -> Vec<String> {
    run_cmd(&["ip", "netns", "list"])
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with("rlbd-") && !n.starts_with(mine))
        .map(str::to_string)
        .collect()
}

/// `RLBD_BENCH_WAIT=0`: neither wait for other labs nor for quiet CPUs (a quick, noisy look).
fn no_wait() -> bool {
    std::env::var("RLBD_BENCH_WAIT").as_deref() == Ok("0")
}

pub fn wait_for_other_labs() -> Res<()> {
    if no_wait() {
        return Ok(());
    }
    let mine = format!("rlbd-bench-{}", std::process::id());
    let start = Instant::now();
    let mut said = false;
    loop {
        let others = other_labs(&mine);
        if others.is_empty() {
            return Ok(());
        }
        if !said {
            println!(
                "waiting for other rlbd namespace labs to finish (they would share the CPUs): {}",
                others.join(" ")
            );
            said = true;
        }
        if start.elapsed() > Duration::from_secs(900) {
            return Err(format!("other labs still running after 15 min: {others:?}"));
        }
        check_stop()?;
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Share of all CPUs busy over `d`, from /proc/stat.
fn busy_share(d: Duration) -> f64 {
    let total = || {
        let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        let v: Vec<u64> = text
            .lines()
            .next()
            .unwrap_or_default()
            .split_whitespace()
            .skip(1)
            .filter_map(|x| x.parse().ok())
            .collect();
        let all: u64 = v.iter().take(8).sum();
        (all, v.get(3).unwrap_or(&0) + v.get(4).unwrap_or(&0))
    };
    let (a0, i0) = total();
    std::thread::sleep(d);
    let (a1, i1) = total();
    let all = a1.saturating_sub(a0).max(1);
    1.0 - i1.saturating_sub(i0) as f64 / all as f64
}

/// Waits (at most 2 minutes) until other processes leave the CPUs mostly idle: the figures
/// are CPU times, and a busy neighbour on the same core inflates them.
pub fn wait_for_quiet() -> Res<()> {
    if no_wait() {
        return Ok(());
    }
    let start = Instant::now();
    let mut said = false;
    loop {
        let busy = busy_share(Duration::from_secs(1));
        if busy < 0.15 {
            return Ok(());
        }
        if start.elapsed() > Duration::from_secs(120) {
            println!(
                "  the CPUs are still {:.0}% busy with other work after 2 min: going on; \
                 the figures below are noisier than they should be",
                busy * 100.0
            );
            return Ok(());
        }
        if !said {
            println!(
                "  waiting for other work to leave the CPUs ({:.0}% busy)",
                busy * 100.0
            );
            said = true;
        }
        check_stop()?;
    }
}
