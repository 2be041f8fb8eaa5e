//! What every root-gated integration test shares: printing figures, the binary under test, and
//! the rule that a privileged test is skipped only where it is allowed to be.
#![allow(dead_code)] // each test crate uses its own subset

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use rlbd_lab::netns::{Lab, LabResult};

pub mod daemon;
pub mod neigh;

/// Prints a line to stderr (shown live with --nocapture) and stdout (kept in the test's output).
macro_rules! say {
    ($($arg:tt)*) => {{
        let line = format!($($arg)*);
        eprintln!("{line}");
        println!("{line}");
    }};
}

pub mod prom;

pub fn exe() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_rlbd"))
}

/// The test-only tooling binary: traffic sink and source, the flooder. Another package's binary
/// (`rlbd-lab`): built beforehand, it lies beside `rlbd`.
pub fn lab_exe() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| rlbd_lab::exe_beside(exe()).unwrap_or_else(|e| panic!("{e}")))
}

/// True when the test may run; false (after saying so) when it is skipped. Under CI, or with
/// `RLBD_REQUIRE_ROOT_TESTS=1`, not being root fails the test instead: a green run must mean the
/// privileged tests really ran.
pub fn root_or_skip() -> bool {
    if rlbd_lab::netns::is_root() {
        return true;
    }
    let required = std::env::var("CI").is_ok_and(|v| v == "true")
        || std::env::var("RLBD_REQUIRE_ROOT_TESTS").is_ok_and(|v| v == "1");
    assert!(
        !required,
        "this test needs root, and CI=true or RLBD_REQUIRE_ROOT_TESTS=1 requires it"
    );
    say!("skipped: needs root");
    false
}

/// The end of every lab test: the lab (already dropped) left no namespace behind, and the
/// scenario's failed checks, or the error that stopped it, fail the test with the daemon's log.
pub fn conclude(what: &str, prefix: &str, log: &Path, result: Result<Vec<String>, String>) {
    let left = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip netns list");
    let left = String::from_utf8_lossy(&left.stdout);
    assert!(
        !left.contains(prefix),
        "namespaces left behind after teardown:\n{left}"
    );
    let log_tail = || {
        say!(
            "daemon log ({}), last 40 lines:\n{}",
            log.display(),
            rlbd_lab::scenario::tail(log, 40)
        )
    };
    match result {
        Ok(failures) if failures.is_empty() => say!("all {what} checks passed"),
        Ok(failures) => {
            log_tail();
            panic!(
                "{} {what} check(s) failed:\n  {}",
                failures.len(),
                failures.join("\n  ")
            );
        }
        Err(e) => {
            log_tail();
            panic!("{what} scenario stopped: {e}");
        }
    }
}

/// The lab's per-port receive rates over `d`, Mbit/s, in `PORTS` order.
pub fn measure(
    lab: &rlbd_lab::netns::Lab,
    d: std::time::Duration,
) -> rlbd_lab::netns::LabResult<Vec<f64>> {
    use rlbd_lab::netns::PORTS;
    let before = lab.rx_bytes_all(&PORTS)?;
    let t = std::time::Instant::now();
    lab.sleep(d)?;
    let after = lab.rx_bytes_all(&PORTS)?;
    let secs = t.elapsed().as_secs_f64().max(1e-3);
    Ok(after
        .iter()
        .zip(&before)
        .map(|(a, b)| a.saturating_sub(*b) as f64 * 8.0 / secs / 1e6)
        .collect())
}

/// `p0 .. Mbit/s, p1 .. Mbit/s, total .. Mbit/s = .. x cap`
pub fn fmt_rates(cap_mbit: u32, r: &[f64]) -> String {
    let total: f64 = r.iter().sum();
    format!(
        "p0 {:.1} Mbit/s, p1 {:.1} Mbit/s, total {total:.1} Mbit/s = {:.2} x cap",
        r[0],
        r[1],
        total / f64::from(cap_mbit)
    )
}

/// The raw-frame tool the lab tests send what no kernel would with (tests/lab/rawsend.py).
pub fn rawsend() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/lab/rawsend.py")
}

/// Runs rawsend.py in `node` with `args`; waits for it.
pub fn raw(lab: &Lab, node: &str, args: &[&str]) -> LabResult<String> {
    let script = rawsend().to_string_lossy().to_string();
    let mut full = vec!["python3", &script];
    full.extend_from_slice(args);
    lab.exec_in(node, &full)
}

pub fn client_mac(lab: &Lab, node: &str) -> LabResult<String> {
    let out = lab.ip(node, &["-br", "link", "show", "eth0"])?;
    out.split_whitespace()
        .nth(2)
        .map(str::to_string)
        .ok_or_else(|| format!("no MAC for {node}'s eth0 in {out:?}"))
}

/// Polls `log` until it contains `needle` or `secs` pass.
pub fn wait_for_log(log: &Path, needle: &str, secs: u64) -> bool {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while std::time::Instant::now() < end {
        if std::fs::read_to_string(log).is_ok_and(|s| s.contains(needle)) {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    false
}

/// The checks a scenario made so far, each said as it is made; the failed ones kept.
#[derive(Default)]
pub struct Checks(pub Vec<String>);

impl Checks {
    pub fn check(&mut self, ok: bool, what: String) {
        say!("{} {what}", if ok { "ok  " } else { "FAIL" });
        if !ok {
            self.0.push(what);
        }
    }
}

/// c1 and c3 on p0 at full rate: p0 is overloaded and one of them should move.
pub fn overload(lab: &Lab, secs: f64) -> LabResult<Vec<rlbd_lab::scenario::Source>> {
    rlbd_lab::scenario::start_sources(lab, lab_exe(), &["c1", "c3"], secs)
}
