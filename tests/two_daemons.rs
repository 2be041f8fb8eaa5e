//! Two daemons on one host, scraped as an operator scrapes them (root): two `rlbd run --ports`
//! on two sets of ports of one namespace lab, given one metrics file `DIR/{name}.prom`, each
//! writing its own into that directory, served by a real `prometheus-node-exporter` (Debian's package: the machine's own,
//! else downloaded and unpacked by tests/monitoring/node-exporter.sh) with its textfile
//! collector. One scrape over HTTP, inside the lab's server namespace, must hold both daemons'
//! series, told apart by their `bond` label, and parse with prometheus_client's parser.
//!
//! Root-gated like tests/observability.rs: without root it prints "skipped: needs root" and
//! passes, unless `CI=true` or `RLBD_REQUIRE_ROOT_TESTS=1` is set, which makes it fail.

#[macro_use]
mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::prom::{parse_metrics, value, Families};
use common::{conclude, exe, root_or_skip, Checks};
use rlbd_lab::netns::{Lab, LabOptions, LabResult};

const CAP: u32 = 100;
/// The two daemons: each one's name (its first port, the `bond` label) and its ports.
const DAEMONS: [(&str, &str); 2] = [("p0", "p0,p1"), ("p2", "p2,p3")];
const LISTEN: &str = "127.0.0.1:9100";

/// One GET of node_exporter's /metrics, from inside the server namespace.
const SCRAPE: &str = r#"
import sys, urllib.request
sys.stdout.write(urllib.request.urlopen("http://127.0.0.1:9100/metrics", timeout=5).read().decode())
"#;

/// The node_exporter binary, fetched when missing (tests/monitoring/node-exporter.sh).
fn node_exporter() -> LabResult<String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/monitoring/node-exporter.sh");
    let out = Command::new("bash")
        .arg(&script)
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || path.is_empty() {
        return Err(format!("{} found no node_exporter", script.display()));
    }
    Ok(path)
}

fn spawn_logged(lab: &Lab, args: &[&str], log: &Path) -> LabResult<std::process::Child> {
    let file = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
    let file2 = file
        .try_clone()
        .map_err(|e| format!("{}: {e}", log.display()))?;
    lab.spawn_with("srv", args, Stdio::from(file), Stdio::from(file2))
}

/// Polls `f` every 200 ms until it gives `Some`, at most `secs` seconds.
fn wait_for<T>(secs: u64, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let end = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() >= end {
            return None;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The `rlbd_*` samples of a scrape as (name, bond, port) with their value.
fn rlbd_samples(f: &Families) -> Vec<(String, String, String, f64)> {
    f.values()
        .flat_map(|fam| fam["samples"].as_array().cloned().unwrap_or_default())
        .filter(|s| s[0].as_str().is_some_and(|n| n.starts_with("rlbd_")))
        .map(|s| {
            let label = |k: &str| s[1][k].as_str().unwrap_or("").to_string();
            let name = s[0].as_str().unwrap_or("").to_string();
            (
                name,
                label("bond"),
                label("port"),
                s[2].as_f64().unwrap_or(f64::NAN),
            )
        })
        .collect()
}

fn scenario(lab: &Lab, dir: &Path) -> LabResult<Vec<String>> {
    let mut c = Checks::default();
    start_both(lab, dir)?;
    let files = wait_for(20, || {
        DAEMONS
            .iter()
            .all(|(n, _)| dir.join(format!("{n}.prom")).exists())
            .then_some(())
    });
    c.check(
        files.is_some(),
        "both daemons write their own metrics file (p0.prom, p2.prom)".into(),
    );
    let scrape = scrape(lab, dir)?;
    let f = parse_metrics(&scrape);
    c.check(
        value(&f, "node_textfile_scrape_error", &[]) == Some(0.0),
        "node_exporter read both files without error (node_textfile_scrape_error 0)".into(),
    );
    let samples = rlbd_samples(&f);
    for (name, ports) in DAEMONS {
        check_daemon(&f, &samples, name, ports, &mut c);
    }
    let unlabelled: Vec<_> = samples
        .iter()
        .filter(|s| !DAEMONS.iter().any(|(n, _)| *n == s.1))
        .collect();
    c.check(
        unlabelled.is_empty(),
        format!("every rlbd series names its daemon: {unlabelled:?}"),
    );
    let per_daemon = |n: &str| samples.iter().filter(|s| s.1 == n).count();
    c.check(
        per_daemon("p0") > 20 && per_daemon("p0") == per_daemon("p2"),
        format!(
            "both daemons give the same series (p0: {}, p2: {})",
            per_daemon("p0"),
            per_daemon("p2")
        ),
    );
    Ok(c.0)
}

/// One daemon's series in the scrape: its `rlbd_info`, its own ports and their capacities.
fn check_daemon(
    f: &Families,
    samples: &[(String, String, String, f64)],
    name: &str,
    ports: &str,
    c: &mut Checks,
) {
    c.check(
        value(f, "rlbd_info", &[("bond", name), ("mode", "ports")]) == Some(1.0),
        format!("one scrape has rlbd_info{{bond={name},mode=ports}} 1"),
    );
    let own: Vec<&str> = ports.split(',').collect();
    let seen: std::collections::BTreeSet<&str> = samples
        .iter()
        .filter(|s| s.0 == "rlbd_port_up" && s.1 == name)
        .map(|s| s.2.as_str())
        .collect();
    c.check(
        seen.iter().copied().eq(own.iter().copied()),
        format!("bond {name}'s port series are its own ports {own:?}: {seen:?}"),
    );
    for p in &own {
        let cap = value(
            f,
            "rlbd_port_capacity_bytes",
            &[("bond", name), ("port", p)],
        );
        c.check(
            cap == Some(f64::from(CAP) * 1e6 / 8.0),
            format!("rlbd_port_capacity_bytes{{bond={name},port={p}}}: {cap:?}"),
        );
    }
}

/// The two daemons, each on its ports with its own socket and log, and the same metrics file
/// setting (`{name}` in it), as in a configuration file both instances share.
fn start_both(lab: &Lab, dir: &Path) -> LabResult<()> {
    let exe = exe().to_string_lossy().into_owned();
    for (name, ports) in DAEMONS {
        let file = |ext: &str| {
            dir.join(format!("{name}.{ext}"))
                .to_string_lossy()
                .into_owned()
        };
        let caps: Vec<String> = ports.split(',').map(|p| format!("{p}={CAP}")).collect();
        let sock = file("sock");
        let prom = dir.join("{name}.prom").to_string_lossy().into_owned();
        let mut args = vec![exe.as_str(), "run", "--ports", ports];
        for c in &caps {
            args.extend(["--capacity", c.as_str()]);
        }
        args.extend(["--control-socket", &sock, "--metrics-file", &prom]);
        args.extend(["--metrics-interval", "1"]);
        spawn_logged(lab, &args, &dir.join(format!("{name}.log")))?;
    }
    Ok(())
}

/// One scrape of node_exporter serving the directory's textfiles (kept as `scrape.txt`).
fn scrape(lab: &Lab, dir: &Path) -> LabResult<String> {
    let ne = node_exporter()?;
    let textfiles = format!("--collector.textfile.directory={}", dir.display());
    let listen = format!("--web.listen-address={LISTEN}");
    let ne_args = [
        ne.as_str(),
        "--collector.disable-defaults",
        "--collector.textfile",
        &textfiles,
        &listen,
    ];
    spawn_logged(lab, &ne_args, &dir.join("node-exporter.log"))?;
    let scrape = wait_for(15, || {
        lab.exec_in("srv", &["python3", "-c", SCRAPE])
            .ok()
            .filter(|t| t.contains("rlbd_info"))
    })
    .ok_or("node_exporter served no rlbd_info within 15 s")?;
    std::fs::write(dir.join("scrape.txt"), &scrape).map_err(|e| e.to_string())?;
    Ok(scrape)
}

#[test]
fn two_daemons_scraped_through_node_exporter() {
    if !root_or_skip() {
        return;
    }
    let dir: PathBuf = std::env::temp_dir().join(format!("rlbd-two-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let (result, prefix) = match Lab::build_sized(CAP, 4, 4, LabOptions::default()) {
        Ok(lab) => {
            let prefix = lab.prefix().to_string();
            // The lab kills what it spawned (both daemons, node_exporter) when dropped.
            (scenario(&lab, &dir), prefix)
        }
        Err(e) => (Err(e), "rlbd-".into()),
    };
    for (name, _) in DAEMONS {
        say!(
            "daemon {name}'s log, last 10 lines:\n{}",
            rlbd_lab::scenario::tail(&dir.join(format!("{name}.log")), 10)
        );
    }
    let log = dir.join("node-exporter.log");
    conclude("two-daemon scrape", &prefix, &log, result);
    let _ = std::fs::remove_dir_all(&dir);
}
