//! The daemon's state in the Prometheus text exposition format (version 0.0.4), rendered from a
//! [`StatusReport`]: what `rlbd metrics` prints and what `--metrics-file` holds.
//!
//! Per-port series carry a `port` label; there are no per-client series (a table of thousands
//! of clients would be thousands of series that come and go). Values that have no reading (a
//! port's rate before its first two counter readings) are left out rather than reported as 0.

use std::fmt::Write as _;

use crate::status::StatusReport;

/// `Content-Type` of the rendered text, should it ever be served over HTTP.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// One metric family: its HELP and TYPE lines, then its samples.
struct Family<'a> {
    out: &'a mut String,
}

impl<'a> Family<'a> {
    fn new(out: &'a mut String, name: &str, kind: &str, help: &str) -> Self {
        let _ = writeln!(out, "# HELP {name} {}", escape_help(help));
        let _ = writeln!(out, "# TYPE {name} {kind}");
        Family { out }
    }

    /// A sample of `name` with `labels` (name, unescaped value).
    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) -> &mut Self {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{k}=\"{}\"", escape_label(v));
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {}", number(value));
        self
    }
}

/// Renders every family. Pure: the same report gives the same text.
pub fn render(r: &StatusReport) -> String {
    let mut out = String::with_capacity(4096);
    let o = &mut out;

    Family::new(
        o,
        "rlbd_info",
        "gauge",
        "Constant 1, labelled with the daemon's version, mode (bond or ports) and name.",
    )
    .sample(
        "rlbd_info",
        &[
            ("version", &r.version),
            ("mode", &r.mode),
            ("name", &r.name),
        ],
        1.0,
    );
    Family::new(
        o,
        "rlbd_dry_run",
        "gauge",
        "1 when the daemon decides and logs but sends nothing.",
    )
    .sample("rlbd_dry_run", &[], bool01(r.dry_run));
    Family::new(
        o,
        "rlbd_uptime_seconds",
        "gauge",
        "Seconds since the daemon started.",
    )
    .sample("rlbd_uptime_seconds", &[], r.uptime_secs as f64);
    Family::new(
        o,
        "rlbd_threshold_ratio",
        "gauge",
        "Overload threshold as a fraction of a port's capacity.",
    )
    .sample("rlbd_threshold_ratio", &[], r.threshold);

    let per_port = |o: &mut String,
                    name: &str,
                    kind: &str,
                    help: &str,
                    value: &dyn Fn(&crate::status::PortStatus) -> Option<f64>| {
        let mut f = Family::new(o, name, kind, help);
        for p in &r.ports {
            if let Some(v) = value(p) {
                f.sample(name, &[("port", &p.name)], v);
            }
        }
    };
    per_port(
        o,
        "rlbd_port_up",
        "gauge",
        "1 when the port is present and up, 0 when it is down or absent.",
        &|p| Some(bool01(p.state == "up")),
    );
    per_port(
        o,
        "rlbd_port_capacity_bits_per_second",
        "gauge",
        "Capacity of the port used for its utilization, bit/s.",
        &|p| Some(p.capacity_bps),
    );
    per_port(
        o,
        "rlbd_port_rx_bits_per_second",
        "gauge",
        "Receive rate of the port over the last second, bit/s.",
        &|p| p.rx_bps,
    );
    per_port(
        o,
        "rlbd_port_utilization_ratio",
        "gauge",
        "Receive rate over the last second as a fraction of the port's capacity.",
        &|p| p.utilization,
    );
    per_port(
        o,
        "rlbd_port_rx_bytes_total",
        "counter",
        "Bytes received by the port, as last read from the kernel's link counters.",
        &|p| p.rx_bytes.map(|b| b as f64),
    );
    per_port(
        o,
        "rlbd_port_overloaded",
        "gauge",
        "1 while the port's overload detector holds it overloaded.",
        &|p| Some(bool01(p.overloaded)),
    );
    per_port(
        o,
        "rlbd_port_ring_packets_total",
        "counter",
        "Frames the port's capture ring delivered to rlbd.",
        &|p| Some(p.ring_packets as f64),
    );
    per_port(
        o,
        "rlbd_port_ring_drops_total",
        "counter",
        "Frames the port's capture ring dropped because rlbd fell behind.",
        &|p| Some(p.ring_drops as f64),
    );
    per_port(
        o,
        "rlbd_port_sampling_ratio",
        "gauge",
        "One IPv4/IPv6 frame in this many is counted on the port (1: every frame).",
        &|p| Some(f64::from(p.sampling)),
    );
    per_port(
        o,
        "rlbd_port_clients",
        "gauge",
        "Tracked clients whose latest frame arrived on the port.",
        &|p| Some(p.clients as f64),
    );

    let t = &r.totals;
    Family::new(
        o,
        "rlbd_clients_tracked",
        "gauge",
        "Clients in the rate table.",
    )
    .sample("rlbd_clients_tracked", &[], t.clients_tracked as f64);
    Family::new(
        o,
        "rlbd_clients_moved",
        "gauge",
        "Tracked clients that rlbd has moved and still steers.",
    )
    .sample(
        "rlbd_clients_moved",
        &[],
        r.clients.iter().filter(|c| c.moved.is_some()).count() as f64,
    );
    Family::new(
        o,
        "rlbd_table_capacity",
        "gauge",
        "Clients the rate table holds at most.",
    )
    .sample("rlbd_table_capacity", &[], t.table_capacity as f64);
    Family::new(
        o,
        "rlbd_table_evictions_total",
        "counter",
        "Clients evicted from the full rate table (least recently seen first).",
    )
    .sample("rlbd_table_evictions_total", &[], t.table_evictions as f64);
    Family::new(
        o,
        "rlbd_table_expirations_total",
        "counter",
        "Clients forgotten after the idle timeout.",
    )
    .sample(
        "rlbd_table_expirations_total",
        &[],
        t.table_expirations as f64,
    );
    Family::new(
        o,
        "rlbd_moves_total",
        "counter",
        "Clients moved to another port, by reason.",
    )
    .sample(
        "rlbd_moves_total",
        &[("reason", "overload")],
        t.moves_overload as f64,
    )
    .sample(
        "rlbd_moves_total",
        &[("reason", "failover")],
        t.moves_failover as f64,
    )
    .sample(
        "rlbd_moves_total",
        &[("reason", "placement")],
        t.moves_placement as f64,
    );
    Family::new(
        o,
        "rlbd_reasserts_total",
        "counter",
        "Updates re-sent because the kernel's own ARP would have undone a move.",
    )
    .sample("rlbd_reasserts_total", &[], t.reasserts as f64);
    Family::new(
        o,
        "rlbd_updates_sent_total",
        "counter",
        "ARP updates sent (first sends, repeats and re-assertions).",
    )
    .sample("rlbd_updates_sent_total", &[], t.updates_sent as f64);
    Family::new(
        o,
        "rlbd_updates_suppressed_total",
        "counter",
        "ARP updates not sent because a rate limit held them back.",
    )
    .sample(
        "rlbd_updates_suppressed_total",
        &[],
        t.updates_suppressed as f64,
    );
    out
}

fn bool01(b: bool) -> f64 {
    if b {
        1.0
    } else {
        0.0
    }
}

/// A sample value: integers without a fraction, `NaN`, `+Inf`, `-Inf` as the format spells them.
fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        // Rust's shortest round-trip form, never with an exponent: valid for the format.
        format!("{v}")
    }
}

/// Label values: backslash, double quote and line feed are escaped.
fn escape_label(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// HELP text: backslash and line feed are escaped.
fn escape_help(s: &str) -> String {
    s.replace('\\', "\\\\").replace('\n', "\\n")
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::status::{ClientStatus, MoveStatus, PortStatus, Totals, SCHEMA_VERSION};

    pub(crate) fn sample_report() -> StatusReport {
        let port = |name: &str, rx: Option<f64>| PortStatus {
            name: name.into(),
            ifindex: 2,
            mac: "02:00:00:00:00:01".into(),
            state: "up".into(),
            capacity_bps: 1e8,
            rx_bps: rx,
            utilization: rx.map(|r| r / 1e8),
            rx_bytes: rx.map(|_| 123_456_789),
            window: "xx.".into(),
            overloaded: rx.is_some(),
            ring_packets: 10,
            ring_drops: 1,
            clients: 1,
            sampling: 1,
        };
        StatusReport {
            schema: SCHEMA_VERSION,
            version: "0.1.0".into(),
            mode: "ports".into(),
            name: "we\"ird\\na\nme".into(),
            dry_run: false,
            uptime_secs: 42,
            tick: 41,
            threshold: 0.8,
            window: 3,
            hits: 2,
            hold_down_secs: 30,
            ports: vec![port("p0", Some(95e6)), port("p1", None)],
            clients: vec![ClientStatus {
                ip: "198.18.0.13".into(),
                mac: "02:00:c6:12:00:03".into(),
                port: "p1".into(),
                rate_bps: 9e7,
                last_seen_secs_ago: 0,
                moved: Some(MoveStatus {
                    to: "p1".into(),
                    secs_ago: 3,
                    reason: "overload".into(),
                    hold_down_left_secs: 27,
                    reasserts: 2,
                }),
            }],
            totals: Totals {
                moves_overload: 1,
                updates_sent: 5,
                clients_tracked: 1,
                table_capacity: 4096,
                ..Default::default()
            },
        }
    }

    #[test]
    fn families_have_help_and_type_and_labels_are_escaped() {
        let text = render(&sample_report());
        assert!(text.contains("# TYPE rlbd_moves_total counter\n"));
        assert!(text.contains("rlbd_moves_total{reason=\"overload\"} 1\n"));
        assert!(text.contains("rlbd_port_capacity_bits_per_second{port=\"p0\"} 100000000\n"));
        assert!(text.contains("rlbd_port_utilization_ratio{port=\"p0\"} 0.95\n"));
        // No reading: no sample, rather than a misleading 0.
        assert!(!text.contains("rlbd_port_rx_bits_per_second{port=\"p1\"}"));
        assert!(text.contains(r#"name="we\"ird\\na\nme""#), "{text}");
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let name = line.split(['{', ' ']).next().unwrap();
            assert!(
                text.contains(&format!("# TYPE {name} ")),
                "{name} has no TYPE line"
            );
        }
        assert_eq!(number(f64::INFINITY), "+Inf");
        assert_eq!(number(1e21), "1000000000000000000000");
    }
}
