//! The namespace lab end to end (root), and the daemon's refusals of bad input (no root).
//!
//! Without root the lab test prints "skipped: needs root" and passes, unless `CI=true` or
//! `RLBD_REQUIRE_ROOT_TESTS=1` is set, in which case not being root fails it. Run with
//! `--nocapture` to see every figure.

#[macro_use]
mod common;

use common::{exe, fmt_rates, lab_exe, root_or_skip, wait_for_log};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rlbd_lab::netns::{Lab, LabResult, PORTS};
use rlbd_lab::sample::Sampler;
use rlbd_lab::scenario::{start_daemon, start_sink, start_sources, watch_move};

const CAP: u32 = 100;
const BUSY: [&str; 2] = ["c1", "c3"];

/// Lab tests must not overlap (CPU and the figures they measure).
static LAB: Mutex<()> = Mutex::new(());

#[test]
fn lab_rlbd_spreads_two_clients_and_keeps_them_spread() {
    if !root_or_skip() {
        return;
    }
    let _guard = LAB.lock().unwrap_or_else(|e| e.into_inner());
    let lab = Lab::build(CAP).expect("building the lab");
    let prefix = lab.prefix().to_string();
    let log = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{prefix}-rlbd.log"));
    let _ = std::fs::remove_file(&log);
    let result = scenario(&lab, &log, &[]);
    drop(lab);
    common::conclude("lab", &prefix, &log, result);
}

/// The same lab with the kernel's counting sampled (`max_frames_per_sec` at its floor, 100,
/// so that a full 100 Mbit/s port is counted one packet in 8 or more, its TCP merged by GRO
/// before the hook): the same decisions as counting every frame, and the log says so.
#[test]
fn lab_rlbd_spreads_two_clients_when_sampled() {
    if !root_or_skip() {
        return;
    }
    let _guard = LAB.lock().unwrap_or_else(|e| e.into_inner());
    let lab = Lab::build(CAP).expect("building the lab");
    let prefix = lab.prefix().to_string();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let log = dir.join(format!("{prefix}-rlbd-sampled.log"));
    let cfg = dir.join(format!("{prefix}-sampled.toml"));
    let _ = std::fs::remove_file(&log);
    std::fs::write(&cfg, "[capture]\nmax_frames_per_sec = 100\n").expect("writing the config");
    let cfg_arg = cfg.to_string_lossy().into_owned();
    let result = scenario(&lab, &log, &["--config", &cfg_arg]).map(|mut failures| {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let most = text
            .lines()
            .filter(|l| l.contains("in the kernel"))
            .filter_map(|l| l.split("counting one frame in ").nth(1))
            .filter_map(|r| r.split_whitespace().next()?.parse::<u32>().ok())
            .max();
        say!("sampled: at most 1 in {most:?}");
        if most.unwrap_or(1) < 4 {
            failures.push(format!(
                "the ports were not sampled 1 in 4 or more in the kernel (at most 1 in {most:?} logged)"
            ));
        }
        failures
    });
    drop(lab);
    let _ = std::fs::remove_file(&cfg);
    common::conclude("lab (sampled)", &prefix, &log, result);
}

/// Runs (a)-(d), the daemon started with `extra` arguments; returns the failed checks (an `Err`
/// when the scenario cannot go on at all).
fn scenario(lab: &Lab, log: &Path, extra: &[&str]) -> LabResult<Vec<String>> {
    let mut failures = Vec::new();
    let cap = f64::from(CAP);
    let _sink = start_sink(lab, lab_exe())?;
    for c in ["c1", "c2", "c3", "c4"] {
        say!(
            "placement: {c} uses {:?} for 198.18.0.1",
            lab.client_port(c)?
        );
    }

    // (a) Without rlbd, c1 and c3 share p0: the total stays near one cap.
    let mut sources = start_sources(lab, lab_exe(), &BUSY, 7.0)?;
    lab.sleep(Duration::from_secs(1))?;
    let a = common::measure(lab, Duration::from_secs(5))?;
    say!("(a) without rlbd, c1+c3, 5 s: {}", fmt_rates(CAP, &a));
    if a.iter().sum::<f64>() >= 1.3 * cap {
        failures.push(format!(
            "(a) total {:.1} Mbit/s is not < 1.3 x cap",
            a.iter().sum::<f64>()
        ));
    }
    for s in &mut sources {
        lab.wait_child(&mut s.child, Duration::from_secs(5))?;
    }
    for c in BUSY {
        lab.place(c, PORTS[0])?;
    }

    // (b) With rlbd, a client moves to p1 within 5 s and the total reaches two caps.
    let args: Vec<&str> = ["-v"].iter().chain(extra).copied().collect();
    let mut daemon = start_daemon(lab, exe(), log, &args)?;
    lab.sleep(Duration::from_millis(1500))?;
    if let Some(st) = daemon.try_wait().map_err(|e| e.to_string())? {
        return Err(format!("rlbd run exited before the traffic started ({st})"));
    }
    let sampler = Sampler::start(lab, Duration::from_secs(1));
    let t0 = Instant::now();
    let t0_lab = lab.elapsed();
    let mut sources = start_sources(lab, lab_exe(), &BUSY, 30.0)?;
    let moved = watch_move(lab, &BUSY, PORTS[0], t0 + Duration::from_secs(5), || true)?;
    let outcome = after_move(lab, moved, t0_lab, &mut failures);
    for s in &mut sources {
        let _ = lab.stop_child(&mut s.child, Duration::from_millis(500));
    }
    let status = lab.stop_child(&mut daemon, Duration::from_secs(3))?;
    say!("rlbd stopped: {status}");
    if let Ok(series) = sampler.finish() {
        for s in &series.samples {
            say!(
                "  t={:5.1}s  p0 {:6.1}  p1 {:6.1} Mbit/s",
                s.t - t0_lab,
                s.mbit[0],
                s.mbit[1]
            );
        }
    }
    outcome?;
    Ok(failures)
}

/// (b) figures after the move, then (c) and (d).
fn after_move(
    lab: &Lab,
    moved: Option<rlbd_lab::scenario::Move>,
    t0_lab: f64,
    failures: &mut Vec<String>,
) -> LabResult<()> {
    let cap = f64::from(CAP);
    let Some(m) = moved else {
        let r = common::measure(lab, Duration::from_secs(2))?;
        say!(
            "(b) no client left p0 within 5 s; now: {}",
            fmt_rates(CAP, &r)
        );
        failures.push("(b) no client got p1's MAC within 5 s of traffic start".into());
        return Ok(());
    };
    say!(
        "(b) {} moved to {:?} {:.1} s after traffic start",
        m.client,
        m.to_port,
        m.t - t0_lab
    );
    if m.to_port != Some(PORTS[1]) {
        failures.push(format!("(b) {} moved to {:?}, not p1", m.client, m.to_port));
        return Ok(());
    }
    let b = common::measure(lab, Duration::from_secs(5))?;
    say!(
        "(b) with rlbd, the 5 s after the move: {}",
        fmt_rates(CAP, &b)
    );
    if b.iter().sum::<f64>() < 1.8 * cap {
        failures.push(format!(
            "(b) total {:.1} Mbit/s is not >= 1.8 x cap",
            b.iter().sum::<f64>()
        ));
    }
    let client = m.client.as_str();
    rearp(lab, client, failures)?;
    fail_p1(lab, client, failures)
}

/// (c) The client re-ARPs; whatever answers, rlbd puts it back on p1 within 2 s, for good.
fn rearp(lab: &Lab, client: &str, failures: &mut Vec<String>) -> LabResult<()> {
    lab.flush_neigh(client)?;
    let t = Instant::now();
    let mut first = None;
    let mut back = None;
    while t.elapsed() < Duration::from_secs(2) {
        let port = lab.client_port(client)?;
        if first.is_none() && port.is_some() {
            first = Some((t.elapsed().as_secs_f64(), port));
        }
        if port == Some(PORTS[1]) {
            back = Some(t.elapsed().as_secs_f64());
            break;
        }
        lab.sleep(Duration::from_millis(50))?;
    }
    say!(
        "(c) after flushing {client}'s entry: first answer {first:?}; back on p1 after {back:?} s"
    );
    match back {
        None => failures.push(format!(
            "(c) {client} not back on p1 within 2 s of its re-ARP"
        )),
        Some(_) => {
            let mut off = Vec::new();
            let hold = Instant::now();
            while hold.elapsed() < Duration::from_secs(2) {
                let port = lab.client_port(client)?;
                if port != Some(PORTS[1]) {
                    off.push(format!("{:.1}s:{port:?}", hold.elapsed().as_secs_f64()));
                }
                lab.sleep(Duration::from_millis(100))?;
            }
            say!(
                "(c) {client} held p1 for 2 s: {}",
                if off.is_empty() { "yes" } else { "no" }
            );
            if !off.is_empty() {
                failures.push(format!("(c) {client} left p1 again: {}", off.join(" ")));
            }
        }
    }
    Ok(())
}

/// (d) p1 fails: rlbd steers the client back to a live port and its bytes flow again.
fn fail_p1(lab: &Lab, client: &str, failures: &mut Vec<String>) -> LabResult<()> {
    let before = common::measure(lab, Duration::from_secs(1))?;
    let bytes0 = lab.bytes_from(client)?;
    lab.set_port(PORTS[1], false)?;
    let t = Instant::now();
    let mut moved_at = None;
    let mut flowing_at = None;
    while t.elapsed() < Duration::from_secs(2) && flowing_at.is_none() {
        if moved_at.is_none() && lab.client_port(client)? == Some(PORTS[0]) {
            moved_at = Some(t.elapsed().as_secs_f64());
        }
        if lab.bytes_from(client)?.saturating_sub(bytes0) > 256 * 1024 {
            flowing_at = Some(t.elapsed().as_secs_f64());
        }
        lab.sleep(Duration::from_millis(100))?;
    }
    let after = common::measure(lab, Duration::from_secs(2))?;
    let gained = lab.bytes_from(client)?.saturating_sub(bytes0);
    say!("(d) before p1 down: {}", fmt_rates(CAP, &before));
    say!(
        "(d) p1 down: {client} on p0 after {moved_at:?} s, its bytes flowing after {flowing_at:?} s \
         ({:.1} MB since); next 2 s: {}",
        gained as f64 / 1e6,
        fmt_rates(CAP, &after)
    );
    if flowing_at.is_none() {
        failures.push(format!(
            "(d) {client}'s traffic did not resume within 2 s of p1 going down"
        ));
    }
    lab.set_port(PORTS[1], true)?;
    Ok(())
}

/// Runs the binary with `args` for at most 10 s; returns (exit code, stderr).
fn run_rlbd(args: &[&str]) -> (Option<i32>, String) {
    let mut child = Command::new(exe())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting rlbd");
    let end = Instant::now() + Duration::from_secs(10);
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > end {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    say!(
        "rlbd {}: exit {:?}, stderr: {}",
        args.join(" "),
        out.status.code(),
        stderr.trim()
    );
    (out.status.code(), stderr)
}

#[test]
fn run_names_a_missing_port() {
    let (code, stderr) = run_rlbd(&["run", "--ports", "nosuchif0"]);
    assert!(
        code.is_some_and(|c| c != 0),
        "expected a non-zero exit, got {code:?}"
    );
    assert!(
        stderr.contains("nosuchif0"),
        "the message does not name the interface: {stderr}"
    );
}

#[test]
fn run_names_a_missing_bond() {
    let (code, stderr) = run_rlbd(&["run", "--bond", "nosuchbond"]);
    assert!(
        code.is_some_and(|c| c != 0),
        "expected a non-zero exit, got {code:?}"
    );
    assert!(
        stderr.contains("nosuchbond"),
        "the message does not name the bond: {stderr}"
    );
}

#[test]
fn run_rejects_a_bad_config_key_with_78() {
    let file = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("netns-bad-key-{}.toml", std::process::id()));
    std::fs::write(&file, "no_such_key = 1\n").expect("writing the config");
    let (code, _) = run_rlbd(&["run", "--config", &file.to_string_lossy(), "--ports", "lo"]);
    let _ = std::fs::remove_file(&file);
    assert_eq!(
        code,
        Some(78),
        "a config file with an unknown key must exit 78 (EX_CONFIG)"
    );
}

#[test]
fn run_with_an_unreadable_config_exits_78_naming_the_file() {
    let (code, stderr) = run_rlbd(&["run", "--config", "/nonexistent/rlbd.toml", "--ports", "lo"]);
    assert_eq!(code, Some(78));
    assert!(stderr.contains("/nonexistent/rlbd.toml"), "{stderr}");
}

#[test]
fn run_with_an_out_of_range_value_exits_78_naming_key_and_line() {
    let file = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("netns-bad-value-{}.toml", std::process::id()));
    std::fs::write(&file, "# comment\n[policy]\nthreshold = 1.5\n").expect("writing the config");
    let (code, stderr) = run_rlbd(&["run", "--config", &file.to_string_lossy(), "--ports", "lo"]);
    let _ = std::fs::remove_file(&file);
    assert_eq!(code, Some(78));
    assert!(
        stderr.contains("policy.threshold") && stderr.contains(":3:"),
        "{stderr}"
    );
}

#[test]
fn run_without_bond_or_ports_exits_78() {
    let (code, stderr) = run_rlbd(&["run", "--config", "/dev/null"]);
    assert_eq!(code, Some(78));
    assert!(
        stderr.contains("--bond") && stderr.contains("--ports"),
        "{stderr}"
    );
}

#[test]
fn run_refuses_a_link_that_is_not_a_bond() {
    let (code, stderr) = run_rlbd(&["run", "--config", "/dev/null", "--bond", "lo"]);
    assert_eq!(code, Some(78));
    assert!(stderr.contains("lo is not a bond"), "{stderr}");
}

/// Runs rlbd in a fresh network namespace after `setup` (shell) ran there.
fn run_rlbd_in_netns(setup: &str, args: &str) -> (Option<i32>, String) {
    let script = format!("{setup}\nexec {} {args}", exe().display());
    let out = Command::new("unshare")
        .args(["--net", "sh", "-ec", &script])
        .stdin(Stdio::null())
        .output()
        .expect("unshare");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    say!(
        "rlbd {args} (private netns): exit {:?}, stderr: {}",
        out.status.code(),
        stderr.trim()
    );
    (out.status.code(), stderr)
}

const TWO_VETHS: &str =
    "ip link add a0 type veth peer name a1; ip link set a0 up; ip link set a1 up";

#[test]
fn run_refuses_a_port_without_an_address() {
    if !root_or_skip() {
        return;
    }
    let (code, stderr) = run_rlbd_in_netns(
        TWO_VETHS,
        "run --config /dev/null --ports a0,a1 --capacity a0=100 --capacity a1=100",
    );
    assert_eq!(code, Some(78));
    assert!(stderr.contains("port a0 has no IPv4 address"), "{stderr}");
}

#[test]
fn run_refuses_strict_rp_filter_naming_the_sysctl() {
    if !root_or_skip() {
        return;
    }
    let setup = format!(
        "{TWO_VETHS}; ip addr add 198.18.1.1/24 dev a0; ip addr add 198.18.1.1/24 dev a1; sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.a0.rp_filter=0 net.ipv4.conf.a1.rp_filter=1"
    );
    let (code, stderr) = run_rlbd_in_netns(
        &setup,
        "run --config /dev/null --ports a0,a1 --capacity a0=100 --capacity a1=100",
    );
    assert_eq!(code, Some(78));
    assert!(stderr.contains("net.ipv4.conf.a1.rp_filter"), "{stderr}");
}

#[test]
fn run_refuses_a_port_without_a_capacity() {
    if !root_or_skip() {
        return;
    }
    let setup = format!("{TWO_VETHS}; ip addr add 198.18.1.1/24 dev a0; ip addr add 198.18.1.1/24 dev a1; sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.a0.rp_filter=0 net.ipv4.conf.a1.rp_filter=0");
    // veth reports 10000 Mb/s in its own namespace's sysfs only; in a fresh one the speed is
    // read from the host's sysfs, where a0 does not exist: no usable speed.
    let (code, stderr) = run_rlbd_in_netns(
        &setup,
        "run --config /dev/null --ports a0,a1 --capacity a0=100",
    );
    assert_eq!(code, Some(78), "{stderr}");
    assert!(
        stderr.contains("port a1") && stderr.contains("--capacity a1=MBIT"),
        "{stderr}"
    );
}

#[test]
fn signals_dump_state_reload_keeping_state_and_exit_cleanly() {
    if !root_or_skip() {
        return;
    }
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("netns-signals-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("rlbd.toml");
    let log = dir.join("rlbd.log");
    std::fs::write(&cfg, "[policy]\nthreshold = 0.8\n").unwrap();
    let mut child = spawn_daemon_in_netns(&dir, &cfg, &log);
    let pid = child.id() as i32;
    let kill = |sig: i32| send_signal(pid, sig);
    let ok_start = wait_for_log(&log, "ports: a0 a1", 10);
    kill(libc::SIGUSR1);
    let ok_dump = wait_for_log(&log, "totals: moves", 5);
    std::fs::write(&cfg, "[policy]\nthreshold = 0.7\n").unwrap();
    kill(libc::SIGHUP);
    let ok_reload = wait_for_log(&log, "SIGHUP: configuration reloaded from", 5);
    // A reload can raise the log level, and changes the idle timeout of the client table and
    // of the moves alike (both read back in the debug line it writes).
    let quiet_before = !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .contains(" DEBUG ");
    std::fs::write(
        &cfg,
        "log_level = \"debug\"\n[policy]\nthreshold = 0.7\n[capture]\nidle_timeout_secs = 7\n",
    )
    .unwrap();
    kill(libc::SIGHUP);
    let ok_debug = wait_for_log(
        &log,
        "now: log level DEBUG; client table idle timeout 7 s, moves forgotten after 7 s idle",
        5,
    );
    std::fs::write(&cfg, "[policy]\nthreshold = 7\n").unwrap();
    kill(libc::SIGHUP);
    let ok_bad = wait_for_log(&log, "configuration not reloaded", 5);
    let alive = child.try_wait().unwrap().is_none();
    kill(libc::SIGTERM);
    let status = wait_exit(&mut child);
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    say!("signals: started {ok_start}, SIGUSR1 dump {ok_dump}, SIGHUP reload {ok_reload}, no debug before {quiet_before}, debug and idle after reload {ok_debug}, bad reload refused {ok_bad}, alive after it {alive}, SIGTERM -> {status:?}");
    assert!(
        ok_start && ok_dump && ok_reload && quiet_before && ok_debug && ok_bad && alive,
        "daemon log:\n{text}"
    );
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(0),
        "daemon log:\n{text}"
    );
    assert!(
        text.contains("policy.threshold"),
        "the refused reload names the key:\n{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Starts `rlbd run` on a0 and a1 in a fresh network namespace, with the config `cfg` and the
/// control socket in `dir`, its output in `log`.
fn spawn_daemon_in_netns(dir: &Path, cfg: &Path, log: &Path) -> Child {
    let setup = format!(
        "{TWO_VETHS}; ip addr add 198.18.1.1/24 dev a0; ip addr add 198.18.1.1/24 dev a1; sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.a0.rp_filter=0 net.ipv4.conf.a1.rp_filter=0"
    );
    let script = format!(
        "{setup}\nexec {} run --config {} --ports a0,a1 --capacity a0=100 --capacity a1=100 --control-socket {}",
        exe().display(),
        cfg.display(),
        dir.join("rlbd.sock").display()
    );
    Command::new("unshare")
        .args(["--net", "sh", "-ec", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .expect("unshare")
}

/// Waits up to 5 s for `child` to exit; kills it if it has not.
fn wait_exit(child: &mut Child) -> Option<ExitStatus> {
    let end = Instant::now() + Duration::from_secs(5);
    let mut status = None;
    while Instant::now() < end && status.is_none() {
        status = child.try_wait().unwrap();
        std::thread::sleep(Duration::from_millis(50));
    }
    if status.is_none() {
        let _ = child.kill();
    }
    status
}

fn send_signal(pid: i32, sig: i32) {
    // SAFETY: kill(2) has no memory-safety preconditions; the pid is our own child's.
    unsafe {
        libc::kill(pid, sig);
    }
}
