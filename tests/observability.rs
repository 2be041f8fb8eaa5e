//! Observability end to end: the control socket, `rlbd status` (JSON and text), `rlbd metrics`
//! and the metrics file against a daemon running in the namespace lab (root); the metrics text
//! read by a real Prometheus exposition-format parser and the demo chart read by an XML parser
//! (no root).
//!
//! Root-gated like tests/netns.rs: without root the lab test prints "skipped: needs root" and
//! passes, unless `CI=true` or `RLBD_REQUIRE_ROOT_TESTS=1` is set, which makes it fail. The
//! parser checks need `python3`; the Python `prometheus_client` package is installed with pip
//! when missing.

#[macro_use]
mod common;

use common::prom::{family_type, parse_metrics, prometheus_client, python, value, Families};
use common::{exe, lab_exe, root_or_skip, Checks};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rlbd::status::{
    ClientStatus, Mode, MoveStatus, PortState, PortStatus, Reason, StatusReport, Totals,
    SCHEMA_VERSION,
};
use rlbd_lab::chart::{svg, Mark};
use rlbd_lab::netns::{client_ip, Lab, LabResult, PORTS};
use rlbd_lab::sample::{Sample, Series};
use rlbd_lab::scenario::{start_daemon, start_sink, start_sources, watch_move};

const CAP: u32 = 100;
const BUSY: [&str; 2] = ["c1", "c3"];

/// Lab tests must not overlap (CPU and the figures they measure).
static LAB: Mutex<()> = Mutex::new(());

// --- Python parsers --------------------------------------------------------------------------

/// Parses SVG from stdin with xml.etree and prints the root tag and every text element's text.
const SVG_PARSE: &str = r#"
import json, sys
import xml.etree.ElementTree as ET
root = ET.fromstring(sys.stdin.read())
ns = "{http://www.w3.org/2000/svg}"
texts = ["".join(t.itertext()) for t in root.iter(ns + "text")]
lines = len(list(root.iter(ns + "polyline")))
print(json.dumps({"root": root.tag, "texts": texts, "polylines": lines}))
"#;

// --- No root ---------------------------------------------------------------------------------

fn synthetic_report() -> StatusReport {
    let port = |name: &str, rx: Option<f64>, state: PortState| PortStatus {
        name: name.into(),
        ifindex: 3,
        mac: "02:00:c6:12:01:00".into(),
        state,
        capacity_bps: 1e9,
        rx_bps: rx,
        utilization: rx.map(|r| r / 1e9),
        rx_bytes: rx.map(|_| 987_654_321_012),
        window: "xx.".into(),
        overloaded: rx.is_some_and(|r| r > 8e8),
        ring_packets: 1_000_000,
        ring_drops: 7,
        clients: 1,
        sampling: 64,
        counting: rlbd::status::Counting::Sampled,
        counting_hook: None,
        no_move: None,
        uncounted_frames: 3,
        counted_bytes: 0,
        guests: 0,
    };
    StatusReport {
        schema: SCHEMA_VERSION,
        version: "9.9.9".into(),
        mode: Mode::Bond,
        // Every character the label syntax must escape.
        name: "bond\"0\\x\ny".into(),
        dry_run: true,
        uptime_secs: 3600,
        tick: 3599,
        threshold: 0.8,
        window: 3,
        hits: 2,
        hold_down_secs: 30,
        saturated: 0.965,
        max_fill: 0.955,
        saturation_ceiling: Some(0.975),
        ports: vec![
            port("eth0", Some(9.5e8), PortState::Up),
            port("eth1", Some(1.25e8), PortState::Up),
            port("eth2", None, PortState::Down),
        ],
        clients: vec![ClientStatus {
            ip: "192.0.2.7".into(),
            mac: "02:00:00:00:00:07".into(),
            vlan: 100,
            port: "eth1".into(),
            rate_bps: 1.2e8,
            last_seen_secs_ago: 0,
            moved: Some(MoveStatus {
                to: "eth1".into(),
                secs_ago: 5,
                reason: Reason::Failover,
                hold_down_left_secs: 25,
                reasserts: 1,
                addresses: vec!["192.0.2.1".into(), "2001:db8::1".into()],
            }),
            pinned: None,
            excluded: false,
        }],
        totals: Totals {
            moves_overload: 4,
            moves_failover: 2,
            moves_placement: 1,
            moves_room: 5,
            moves_settle: 7,
            reasserts: 9,
            updates_sent: 31,
            updates_suppressed: 3,
            clients_tracked: 1,
            clients_moved: 1,
            table_capacity: 4096,
            table_evictions: 11,
            table_expirations: 12,
            ..Totals::default()
        },
        guests: Vec::new(),
        guest_totals: Default::default(),
    }
}

#[test]
fn metrics_parse_with_the_prometheus_client_parser() {
    let text = rlbd::metrics::render(&synthetic_report());
    let f = parse_metrics(&text);
    check_family_types(&f);
    check_labels(&f);
    check_port_values(&f);
    check_totals(&f);
}

/// Each family has its type (as the parser names it) and a HELP line.
fn check_family_types(f: &Families) {
    for (family, kind) in [
        ("rlbd_info", "gauge"),
        ("rlbd_port_up", "gauge"),
        ("rlbd_port_capacity_bytes", "gauge"),
        ("rlbd_port_utilization_ratio", "gauge"),
        ("rlbd_port_overloaded", "gauge"),
        ("rlbd_clients_tracked", "gauge"),
        // The parser names a counter's family without `_total`.
        ("rlbd_port_rx_bytes", "counter"),
        ("rlbd_port_ring_drops", "counter"),
        ("rlbd_port_sampling_ratio", "gauge"),
        ("rlbd_port_kernel_counting", "gauge"),
        ("rlbd_port_uncounted_frames", "counter"),
        ("rlbd_table_evictions", "counter"),
        ("rlbd_moves", "counter"),
        ("rlbd_reasserts", "counter"),
        ("rlbd_updates_sent", "counter"),
        ("rlbd_updates_suppressed", "counter"),
        ("rlbd_saturated_ratio", "gauge"),
        ("rlbd_max_fill_ratio", "gauge"),
        ("rlbd_saturation_ceiling_ratio", "gauge"),
    ] {
        assert_eq!(
            family_type(f, family).as_deref(),
            Some(kind),
            "family {family}: {:?}",
            f.get(family)
        );
        assert!(
            !f[family]["help"].as_str().unwrap_or("").is_empty(),
            "{family} has no HELP"
        );
    }
}

/// Labels round-trip through escaping, and every sample names its daemon.
fn check_labels(f: &Families) {
    let info = value(
        f,
        "rlbd_info",
        &[
            ("version", "9.9.9"),
            ("mode", "bond"),
            ("bond", "bond\"0\\x\ny"),
        ],
    );
    assert_eq!(info, Some(1.0), "labels must round-trip through escaping");
    // Every sample names its daemon.
    for fam in f.values() {
        for s in fam["samples"].as_array().unwrap() {
            assert_eq!(s[1]["bond"], "bond\"0\\x\ny", "{s}");
        }
    }
}

/// The ports' capacities, utilisations, states and counters.
fn check_port_values(f: &Families) {
    assert_eq!(
        value(f, "rlbd_port_capacity_bytes", &[("port", "eth0")]),
        Some(1.25e8),
        "1 Gbit/s in bytes per second"
    );
    assert_eq!(
        value(f, "rlbd_port_utilization_ratio", &[("port", "eth1")]),
        Some(0.125)
    );
    assert_eq!(
        value(f, "rlbd_port_rx_bytes_total", &[("port", "eth2")]),
        None,
        "no reading, no sample"
    );
    assert_eq!(value(f, "rlbd_port_up", &[("port", "eth2")]), Some(0.0));
    assert_eq!(
        value(f, "rlbd_port_overloaded", &[("port", "eth0")]),
        Some(1.0)
    );
    assert_eq!(
        value(f, "rlbd_port_rx_bytes_total", &[("port", "eth0")]),
        Some(987_654_321_012.0)
    );
}

/// The moves by reason and the daemon-wide totals.
fn check_totals(f: &Families) {
    assert_eq!(
        value(f, "rlbd_moves_total", &[("reason", "overload")]),
        Some(4.0)
    );
    assert_eq!(
        value(f, "rlbd_moves_total", &[("reason", "failover")]),
        Some(2.0)
    );
    assert_eq!(
        value(f, "rlbd_moves_total", &[("reason", "placement")]),
        Some(1.0)
    );
    assert_eq!(
        value(f, "rlbd_moves_total", &[("reason", "room")]),
        Some(5.0)
    );
    assert_eq!(
        value(f, "rlbd_moves_total", &[("reason", "settle")]),
        Some(7.0)
    );
    assert_eq!(value(f, "rlbd_saturated_ratio", &[]), Some(0.965));
    assert_eq!(value(f, "rlbd_max_fill_ratio", &[]), Some(0.955));
    assert_eq!(value(f, "rlbd_saturation_ceiling_ratio", &[]), Some(0.975));
    assert_eq!(value(f, "rlbd_updates_sent_total", &[]), Some(31.0));
    assert_eq!(value(f, "rlbd_updates_suppressed_total", &[]), Some(3.0));
    assert_eq!(value(f, "rlbd_table_evictions_total", &[]), Some(11.0));
    assert_eq!(value(f, "rlbd_reasserts_total", &[]), Some(9.0));
    assert_eq!(value(f, "rlbd_clients_moved", &[]), Some(1.0));
    assert_eq!(value(f, "rlbd_dry_run", &[]), Some(1.0));
}

#[test]
fn demo_chart_is_well_formed_svg_naming_both_ports() {
    let series = Series {
        ports: PORTS.iter().map(|p| p.to_string()).collect(),
        samples: (0..40)
            .map(|i| {
                let t = f64::from(i) * 0.25;
                Sample {
                    t,
                    mbit: if t < 5.0 {
                        vec![96.0, 0.0]
                    } else {
                        vec![95.0, 94.0]
                    },
                }
            })
            .collect(),
    };
    let marks = [
        Mark {
            t: 0.0,
            label: "B: c1+c3 start, rlbd running".into(),
        },
        Mark {
            t: 5.0,
            label: "rlbd moved c3 -> p1 & <kept>".into(),
        },
    ];
    let doc = svg("rlbd demo: cap 100 Mbit/s", &series, 100.0, &marks, 1.0);
    let parsed = python(SVG_PARSE, &doc)
        .unwrap_or_else(|e| panic!("the chart is not well-formed XML: {e}\n{doc}"));
    let v: serde_json::Value = serde_json::from_str(&parsed).expect("parser output");
    assert_eq!(v["root"], "{http://www.w3.org/2000/svg}svg");
    let texts: Vec<&str> = v["texts"]
        .as_array()
        .expect("texts")
        .iter()
        .filter_map(|t| t.as_str())
        .collect();
    for port in PORTS {
        assert!(texts.contains(&port), "no legend for {port}: {texts:?}");
    }
    assert!(
        texts.contains(&"rlbd moved c3 -> p1 & <kept>"),
        "marks are escaped and read back: {texts:?}"
    );
    assert_eq!(v["polylines"], 2, "one line per port");
}

#[test]
fn status_without_a_daemon_says_so_with_69() {
    let sock = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("obs-none-{}.sock", std::process::id()));
    for cmd in ["status", "metrics"] {
        let out = Command::new(exe())
            .args([cmd, "--socket", &sock.to_string_lossy()])
            .stdin(Stdio::null())
            .output()
            .expect("running rlbd");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(69), "{cmd}: {stderr}");
        assert!(
            stderr.contains(&*sock.to_string_lossy()) && stderr.contains("is rlbd running"),
            "{cmd}: {stderr}"
        );
    }
}

// --- The namespace lab -----------------------------------------------------------------------

#[test]
fn lab_status_and_metrics_describe_what_the_lab_did() {
    if !root_or_skip() {
        return;
    }
    let _guard = LAB.lock().unwrap_or_else(|e| e.into_inner());
    prometheus_client();
    let lab = Lab::build(CAP).expect("building the lab");
    let prefix = lab.prefix().to_string();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("obs-{prefix}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let log = dir.join("rlbd.log");
    let result = scenario(&lab, &dir, &log);
    drop(lab);
    if result.as_ref().is_ok_and(|f| f.is_empty()) {
        let _ = std::fs::remove_dir_all(&dir);
    }
    common::conclude("observability", &prefix, &log, result);
}

/// `rlbd ARGS` in the server namespace, where the daemon runs.
fn rlbd_in_srv(lab: &Lab, args: &[&str]) -> LabResult<String> {
    let exe = exe().to_string_lossy();
    let mut all = vec![&*exe];
    all.extend_from_slice(args);
    lab.exec_in("srv", &all)
}

fn status_json(lab: &Lab, sock: &str) -> LabResult<StatusReport> {
    let text = rlbd_in_srv(lab, &["status", "--json", "--socket", sock])?;
    serde_json::from_str(&text).map_err(|e| format!("rlbd status --json: {e}: {text}"))
}

fn scenario(lab: &Lab, dir: &Path, log: &Path) -> LabResult<Vec<String>> {
    let mut c = Checks::default();
    let sock = dir.join("ctl.sock");
    let sock_s = sock.to_string_lossy().into_owned();
    let prom = dir.join("rlbd.prom");
    let prom_s = prom.to_string_lossy().into_owned();
    let _sink = start_sink(lab, lab_exe())?;
    let mut daemon = start_daemon(
        lab,
        exe(),
        log,
        &[
            "-v",
            "--control-socket",
            &sock_s,
            "--metrics-file",
            &prom_s,
            "--metrics-interval",
            "1",
        ],
    )?;
    lab.sleep(Duration::from_millis(1500))?;
    if let Some(st) = daemon.try_wait().map_err(|e| e.to_string())? {
        return Err(format!("rlbd run exited at once ({st})"));
    }
    let outcome = (|| -> LabResult<()> {
        check_idle(lab, &sock_s, &mut c)?;
        // c1 and c3 send; rlbd moves one of them to p1.
        let t0 = Instant::now();
        let mut sources = start_sources(lab, lab_exe(), &BUSY, 14.0)?;
        let moved = watch_move(lab, &BUSY, PORTS[0], t0 + Duration::from_secs(6), || true)?;
        let result = match moved {
            Some(m) => {
                say!("{} moved to {:?}", m.client, m.to_port);
                // Let both ports fill and the rates settle for two samples.
                lab.sleep(Duration::from_millis(2500))?;
                let moved_ip = client_ip(&m.client)?;
                check_busy(lab, &sock_s, &m.client, &moved_ip, &mut c)
                    .and_then(|()| check_text(lab, &sock_s, &moved_ip, &mut c))
                    .and_then(|()| check_metrics(lab, &sock_s, &prom, &mut c))
            }
            None => {
                let what = "no client left p0 within 6 s of traffic start";
                c.check(false, what.into());
                Ok(())
            }
        };
        for s in &mut sources {
            let _ = lab.stop_child(&mut s.child, Duration::from_millis(500));
        }
        result
    })();
    let status = lab.stop_child(&mut daemon, Duration::from_secs(3))?;
    say!("rlbd stopped: {status}");
    outcome?;
    c.check(
        status.success(),
        format!("the daemon exits cleanly on SIGTERM ({status})"),
    );
    c.check(
        !sock.exists(),
        "the control socket is removed on exit".into(),
    );
    // A stop on purpose leaves no metrics for the RlbdDown alert to find stale.
    c.check(
        !prom.exists(),
        "the metrics file is removed on a clean exit".into(),
    );
    Ok(c.0)
}

/// Before any traffic: the ports as configured.
fn check_idle(lab: &Lab, sock: &str, c: &mut Checks) -> LabResult<()> {
    let cap_bps = f64::from(CAP) * 1e6;
    let r = status_json(lab, sock)?;
    c.check(
        r.mode == Mode::Ports && r.name == "p0" && r.schema == SCHEMA_VERSION,
        format!(
            "idle: mode {:?}, name {:?}, schema {}",
            r.mode, r.name, r.schema
        ),
    );
    let names: Vec<&str> = r.ports.iter().map(|p| p.name.as_str()).collect();
    c.check(names == PORTS, format!("idle: ports {names:?}"));
    for p in &r.ports {
        c.check(
            p.state == PortState::Up && p.capacity_bps == cap_bps && !p.overloaded,
            format!(
                "idle: {} state {}, capacity {} bit/s, overloaded {}",
                p.name,
                p.state.as_str(),
                p.capacity_bps,
                p.overloaded
            ),
        );
    }
    Ok(())
}

/// Both busy clients tracked, only `client` moved, to p1 for overload, both ports filled.
fn check_busy(
    lab: &Lab,
    sock: &str,
    client: &str,
    moved_ip: &str,
    c: &mut Checks,
) -> LabResult<()> {
    let cap_bps = f64::from(CAP) * 1e6;
    let r = status_json(lab, sock)?;
    for b in BUSY {
        let ip = client_ip(b)?;
        c.check(
            r.clients.iter().any(|x| x.ip == ip),
            format!("busy: client {b} ({ip}) is tracked"),
        );
    }
    let mc = r.clients.iter().find(|x| x.ip == moved_ip);
    let mv = mc.and_then(|c| c.moved.as_ref());
    c.check(
        mv.is_some_and(|mv| mv.to == "p1" && mv.reason == Reason::Overload),
        format!("busy: {client} ({moved_ip}) moved to p1 for overload: {mc:?}"),
    );
    c.check(
        mc.is_some_and(|c| c.port == "p1" && c.rate_bps > 0.3 * cap_bps),
        format!("busy: {client} now arrives on p1 at a real rate: {mc:?}"),
    );
    let others_moved = r
        .clients
        .iter()
        .filter(|x| x.ip != moved_ip && x.moved.is_some())
        .count();
    c.check(
        others_moved == 0,
        format!("busy: only {client} was moved ({others_moved} others)"),
    );
    c.check(
        r.totals.moves_overload >= 1 && r.totals.moves_failover == 0 && r.totals.updates_sent >= 1,
        format!("busy: totals {:?}", r.totals),
    );
    for p in &r.ports {
        let rx = p.rx_bps.unwrap_or(0.0);
        let util_ok = p
            .utilization
            .is_some_and(|u| (u - rx / p.capacity_bps).abs() < 1e-9);
        c.check(
            p.state == PortState::Up && rx > 0.5 * cap_bps && util_ok,
            format!(
                "busy: {} receives {:.1} Mbit/s, utilization {:?}",
                p.name,
                rx / 1e6,
                p.utilization
            ),
        );
    }
    Ok(())
}

/// The text form: both ports with a utilization bar, the move with its reason.
fn check_text(lab: &Lab, sock: &str, moved_ip: &str, c: &mut Checks) -> LabResult<()> {
    let text = rlbd_in_srv(lab, &["status", "--socket", sock])?;
    say!("rlbd status:\n{text}");
    let has_bar = text.lines().any(|l| {
        l.find('[').is_some_and(|i| {
            let rest = &l[i + 1..];
            rest.len() > 10
                && rest[..10].chars().all(|c| c == '#' || c == '.')
                && rest[10..].starts_with(']')
        })
    });
    c.check(
        text.contains("p0") && text.contains("p1") && has_bar,
        "text: names both ports and draws a utilization bar".into(),
    );
    c.check(
        text.contains(moved_ip) && text.contains("to p1") && text.contains("(overload)"),
        format!("text: shows {moved_ip} moved to p1 (overload)"),
    );
    Ok(())
}

/// The metrics, over the socket and in the file.
fn check_metrics(lab: &Lab, sock: &str, prom: &Path, c: &mut Checks) -> LabResult<()> {
    let cap_bps = f64::from(CAP) * 1e6;
    let metrics = rlbd_in_srv(lab, &["metrics", "--socket", sock])?;
    let f = parse_metrics(&metrics);
    c.check(
        value(&f, "rlbd_info", &[("mode", "ports"), ("bond", "p0")]) == Some(1.0),
        "metrics: rlbd_info{bond=p0,mode=ports} 1".into(),
    );
    for p in PORTS {
        c.check(
            value(&f, "rlbd_port_up", &[("port", p)]) == Some(1.0)
                && value(&f, "rlbd_port_capacity_bytes", &[("port", p)]) == Some(cap_bps / 8.0)
                && value(&f, "rlbd_port_rx_bytes_total", &[("port", p)]).is_some_and(|b| b > 0.0),
            format!("metrics: {p} up, capacity {cap_bps}, bytes counted"),
        );
    }
    c.check(
        value(&f, "rlbd_moves_total", &[("reason", "overload")]).is_some_and(|v| v >= 1.0),
        "metrics: rlbd_moves_total{reason=overload} >= 1".into(),
    );
    c.check(
        value(&f, "rlbd_updates_sent_total", &[]).is_some_and(|v| v >= 1.0),
        "metrics: rlbd_updates_sent_total >= 1".into(),
    );
    c.check(
        value(&f, "rlbd_clients_tracked", &[]).is_some_and(|v| v >= 2.0),
        "metrics: rlbd_clients_tracked >= 2".into(),
    );
    let file = std::fs::read_to_string(prom).unwrap_or_default();
    let ff = parse_metrics(&file);
    c.check(
        value(&ff, "rlbd_moves_total", &[("reason", "overload")]).is_some_and(|v| v >= 1.0),
        format!(
            "metrics file {}: written, parses, counts the move",
            prom.display()
        ),
    );
    Ok(())
}
