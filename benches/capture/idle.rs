//! Idle CPU of the real daemon, against the number of links on the host: `rlbd run --ports
//! p0,p1` in a namespace holding only its two ports (and `lo`: 3 links), then in one that also
//! holds 5,000 other links (veth pairs: this host kernel has no dummy driver), no traffic. The
//! daemon's CPU time is read from /proc/PID/schedstat (nanoseconds) over a quiet stretch that
//! starts after its start-up snapshot.
//!
//! `RLBD_BENCH_DAEMON=PATH` measures another build of rlbd (e.g. an older one, for a before
//! figure); `RLBD_BENCH_IDLE_SECS` sets the stretch (default 20 s).

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use rlbd_lab::netns::run_cmd;

use super::lab::check_stop;
use super::Res;

/// Links besides the ports and `lo` in the big run.
const OTHER_LINKS: usize = 5000;

pub struct IdleFigures {
    pub secs: f64,
    /// Percent of a core with 3 links, and with 5,003.
    pub small_pct: f64,
    pub big_pct: f64,
    pub daemon: String,
}

impl IdleFigures {
    pub fn print_targets(&self) {
        println!(
            "  idle daemon CPU ({}, {:.0} s each): 3 links {:.3}%, {} links {:.3}% of a core",
            self.daemon,
            self.secs,
            self.small_pct,
            OTHER_LINKS + 3,
            self.big_pct
        );
        println!(
            "  idle CPU with {} links <= 0.3% of a core and within 0.2 points of 3 links: {:.3}% \
             ({:+.3} points) -> {}",
            OTHER_LINKS + 3,
            self.big_pct,
            self.big_pct - self.small_pct,
            if self.big_pct <= 0.3 && self.big_pct - self.small_pct <= 0.2 {
                "met"
            } else {
                "NOT met"
            }
        );
    }
}

/// A namespace deleted (with what runs in it) on drop.
struct Ns(String);

impl Ns {
    fn new(name: String) -> Res<Ns> {
        run_cmd(&["ip", "netns", "add", &name])?;
        let ns = Ns(name);
        run_cmd(&["ip", "-n", &ns.0, "link", "set", "lo", "up"])?;
        Ok(ns)
    }
}

impl Drop for Ns {
    fn drop(&mut self) {
        if let Ok(out) = run_cmd(&["ip", "netns", "pids", &self.0]) {
            for pid in out.split_whitespace().filter_map(|p| p.parse::<i32>().ok()) {
                // SAFETY: kill has no memory-safety preconditions; pid > 0 is one process,
                // found inside our own namespace.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(100));
        if let Err(e) = run_cmd(&["ip", "netns", "del", &self.0]) {
            eprintln!("idle benchmark teardown: {e}");
        }
    }
}

/// Nanoseconds the process has run on a CPU.
fn cpu_ns(pid: u32) -> Res<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/schedstat"))
        .map_err(|e| format!("/proc/{pid}/schedstat: {e}"))?;
    text.split_whitespace()
        .next()
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("/proc/{pid}/schedstat: {text:?}"))
}

fn sleep_checked(d: Duration) -> Res<()> {
    let end = std::time::Instant::now() + d;
    while std::time::Instant::now() < end {
        check_stop()?;
        std::thread::sleep(Duration::from_millis(200));
    }
    Ok(())
}

/// Runs the daemon in `ns` for a settling time plus `secs`; returns its CPU share over `secs`.
fn daemon_cpu(daemon: &str, ns: &Ns, secs: f64) -> Res<f64> {
    // No control socket: the daemon's own work only.
    let config = std::env::temp_dir().join(format!("rlbd-bench-idle-{}.toml", std::process::id()));
    std::fs::write(&config, "[observability]\ncontrol_socket = \"\"\n")
        .map_err(|e| format!("{}: {e}", config.display()))?;
    let mut child: Child = Command::new("ip")
        .args(["netns", "exec", &ns.0, daemon, "run", "--ports", "p0,p1"])
        .args(["--capacity", "p0=1000", "--capacity", "p1=1000"])
        .arg("--config")
        .arg(&config)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start {daemon}: {e}"))?;
    let pid = child.id();
    let result = (|| {
        sleep_checked(Duration::from_secs(3))?;
        if let Ok(Some(st)) = child.try_wait() {
            return Err(format!("{daemon} exited: {st}"));
        }
        let c0 = cpu_ns(pid)?;
        sleep_checked(Duration::from_secs_f64(secs))?;
        let c1 = cpu_ns(pid)?;
        Ok((c1 - c0) as f64 / (secs * 1e9) * 100.0)
    })();
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_file(&config);
    result
}

fn add_other_links(ns: &Ns) -> Res<()> {
    let script: String = (0..OTHER_LINKS / 2)
        .map(|i| format!("link add o{i} type veth peer name q{i}\n"))
        .collect();
    let path = std::env::temp_dir().join(format!("rlbd-bench-links-{}", std::process::id()));
    std::fs::write(&path, script).map_err(|e| format!("{}: {e}", path.display()))?;
    let r = run_cmd(&["ip", "-n", &ns.0, "-batch", &path.to_string_lossy()]);
    let _ = std::fs::remove_file(&path);
    r.map(drop)
}

pub fn measure() -> Res<IdleFigures> {
    let daemon = std::env::var("RLBD_BENCH_DAEMON")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_rlbd").to_string());
    let secs: f64 = std::env::var("RLBD_BENCH_IDLE_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|s| *s >= 1.0)
        .unwrap_or(20.0);
    let base = format!("rlbd-bench-{}-idle", std::process::id());
    println!(
        "\nidle benchmark: {daemon} in a namespace with 3 links, then {} links",
        OTHER_LINKS + 3
    );
    let peer = Ns::new(format!("{base}-peer"))?;
    let ns = Ns::new(base)?;
    for p in ["p0", "p1"] {
        let q = format!("{p}q");
        run_cmd(&[
            "ip", "-n", &ns.0, "link", "add", p, "type", "veth", "peer", "name", &q,
        ])?;
        run_cmd(&["ip", "-n", &ns.0, "link", "set", &q, "netns", &peer.0])?;
        // Ports mode: every port carries the server's address.
        run_cmd(&[
            "ip",
            "-n",
            &ns.0,
            "addr",
            "add",
            "198.18.200.1/24",
            "dev",
            p,
        ])?;
        run_cmd(&["ip", "-n", &ns.0, "link", "set", p, "up"])?;
        run_cmd(&["ip", "-n", &peer.0, "link", "set", &q, "up"])?;
    }
    let small_pct = daemon_cpu(&daemon, &ns, secs)?;
    println!("  3 links: {small_pct:.3}% of a core");
    add_other_links(&ns)?;
    let links = run_cmd(&["ip", "-n", &ns.0, "-o", "link", "show"])?
        .lines()
        .count();
    let big_pct = daemon_cpu(&daemon, &ns, secs)?;
    println!("  {links} links: {big_pct:.3}% of a core");
    drop(ns);
    drop(peer);
    Ok(IdleFigures {
        secs,
        small_pct,
        big_pct,
        daemon: std::path::Path::new(&daemon)
            .file_name()
            .map_or(daemon.clone(), |f| f.to_string_lossy().into_owned()),
    })
}
