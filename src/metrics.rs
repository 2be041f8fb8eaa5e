//! The daemon's state in the Prometheus text exposition format (version 0.0.4), rendered from a
//! [`StatusReport`]: what `rlbd metrics` prints and what `--metrics-file` holds.
//!
//! Every series carries a `bond` label, the daemon's instance name (the bond, or in ports mode
//! the first port: the name of its control socket and of `rlbd status NAME`), so that two
//! daemons on one host write distinct series into one textfile directory. Per-port series carry
//! a `port` label too; there are no per-client series (a table of thousands of clients would be
//! thousands of series that come and go). Units are Prometheus' base units (bytes, seconds) and
//! rates are left to `rate()` over the counters. Values that have no reading (a port's counter
//! before its first reading) are left out rather than reported as 0.

use std::fmt::Write as _;

use crate::status::StatusReport;

/// `Content-Type` of the rendered text, should it ever be served over HTTP.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

use crate::status::{PortState, PortStatus};

/// A family with one sample per port, labelled `port`; a port without a value has no sample.
struct PortFamily {
    name: &'static str,
    kind: &'static str,
    help: &'static str,
    value: fn(&PortStatus) -> Option<f64>,
}

/// A family with one unlabelled sample.
struct Scalar {
    name: &'static str,
    kind: &'static str,
    help: &'static str,
    /// `None`: no value yet, no sample (the family's HELP and TYPE stay).
    value: fn(&StatusReport) -> Option<f64>,
}

const PORT_FAMILIES: &[PortFamily] = &[
    PortFamily {
        name: "rlbd_port_up",
        kind: "gauge",
        help: "1 when the port is present and up, 0 when it is down or absent.",
        value: |p| Some(bool01(p.state == PortState::Up)),
    },
    PortFamily {
        // Named as node_exporter names a link's speed (node_network_speed_bytes).
        name: "rlbd_port_capacity_bytes",
        kind: "gauge",
        help: "Capacity of the port used for its utilization, in bytes per second (compare \
               with rate(rlbd_port_rx_bytes_total[1m])).",
        value: |p| Some(p.capacity_bps / 8.0),
    },
    PortFamily {
        name: "rlbd_port_utilization_ratio",
        kind: "gauge",
        help: "Receive rate over the last second as a fraction of the port's capacity.",
        value: |p| p.utilization,
    },
    PortFamily {
        name: "rlbd_port_rx_bytes_total",
        kind: "counter",
        help: "Bytes received by the port, as last read from the kernel's link counters.",
        value: |p| p.rx_bytes.map(|b| b as f64),
    },
    PortFamily {
        name: "rlbd_port_overloaded",
        kind: "gauge",
        help: "1 while the port's overload detector holds it overloaded.",
        value: |p| Some(bool01(p.overloaded)),
    },
    PortFamily {
        name: "rlbd_port_ring_packets_total",
        kind: "counter",
        help: "Frames the port's capture ring delivered to rlbd.",
        value: |p| Some(p.ring_packets as f64),
    },
    PortFamily {
        name: "rlbd_port_ring_drops_total",
        kind: "counter",
        help: "Frames the port's capture ring dropped because rlbd fell behind.",
        value: |p| Some(p.ring_drops as f64),
    },
    PortFamily {
        name: "rlbd_port_sampling_ratio",
        kind: "gauge",
        help: "Fraction of the port's IPv4/IPv6 frames counted: 1 counts every frame, 0.25 one \
               in 4 (rlbd status's 1/N).",
        value: |p| Some(1.0 / f64::from(p.sampling.max(1))),
    },
    PortFamily {
        name: "rlbd_port_kernel_counting",
        kind: "gauge",
        help: "1 while the port counts every IPv4/IPv6 frame in the kernel (eBPF), 0 while it \
               counts captured frames (see rlbd_port_sampling_ratio).",
        value: |p| {
            Some(f64::from(u8::from(
                p.counting == crate::status::Counting::Ebpf,
            )))
        },
    },
    PortFamily {
        name: "rlbd_port_uncounted_frames_total",
        kind: "counter",
        help: "Frames the port's counting map in the kernel could give to no client (the map \
               was full; rlbd makes no move on such seconds).",
        value: |p| Some(p.uncounted_frames as f64),
    },
    PortFamily {
        name: "rlbd_port_counted_bytes_total",
        kind: "counter",
        help: "Bytes of IPv4/IPv6 frames counted for clients on the port (scaled by the sampling \
               ratio); beside rlbd_port_rx_bytes_total, what counting covers.",
        value: |p| Some(p.counted_bytes as f64),
    },
    PortFamily {
        name: "rlbd_port_clients",
        kind: "gauge",
        help: "Tracked clients whose latest frame arrived on the port.",
        value: |p| Some(p.clients as f64),
    },
    PortFamily {
        name: "rlbd_port_guests",
        kind: "gauge",
        help: "Guests behind the bond ([guests]) pinned to the port.",
        value: |p| Some(p.guests as f64),
    },
];

const HEAD: &[Scalar] = &[
    Scalar {
        name: "rlbd_dry_run",
        kind: "gauge",
        help: "1 when the daemon decides and logs but sends nothing.",
        value: |r| Some(bool01(r.dry_run)),
    },
    Scalar {
        name: "rlbd_uptime_seconds",
        kind: "gauge",
        help: "Seconds since the daemon started.",
        value: |r| Some(r.uptime_secs as f64),
    },
    Scalar {
        name: "rlbd_threshold_ratio",
        kind: "gauge",
        help: "Overload threshold as a fraction of a port's capacity.",
        value: |r| Some(r.threshold),
    },
    Scalar {
        name: "rlbd_saturated_ratio",
        kind: "gauge",
        help: "Utilization from which a port counts as saturated, in force (configured, or 2% under where full ports read).",
        value: |r| Some(r.saturated),
    },
    Scalar {
        name: "rlbd_max_fill_ratio",
        kind: "gauge",
        help: "How full a move off a saturated port may make its target, in force.",
        value: |r| Some(r.max_fill),
    },
    Scalar {
        name: "rlbd_saturation_ceiling_ratio",
        kind: "gauge",
        help: "Where a full port reads, as a fraction of its capacity, learned; absent until a port has read saturated or more.",
        value: |r| r.saturation_ceiling,
    },
];

const TOTALS: &[Scalar] = &[
    Scalar {
        name: "rlbd_clients_tracked",
        kind: "gauge",
        help: "Clients in the rate table.",
        value: |r| Some(r.totals.clients_tracked as f64),
    },
    Scalar {
        name: "rlbd_clients_moved",
        kind: "gauge",
        help: "Tracked clients that rlbd has moved and still steers.",
        value: |r| Some(r.totals.clients_moved as f64),
    },
    Scalar {
        name: "rlbd_table_capacity",
        kind: "gauge",
        help: "Clients the rate table holds at most.",
        value: |r| Some(r.totals.table_capacity as f64),
    },
    Scalar {
        name: "rlbd_table_evictions_total",
        kind: "counter",
        help: "Clients evicted from the full rate table (least recently seen first).",
        value: |r| Some(r.totals.table_evictions as f64),
    },
    Scalar {
        name: "rlbd_table_expirations_total",
        kind: "counter",
        help: "Clients forgotten after the idle timeout.",
        value: |r| Some(r.totals.table_expirations as f64),
    },
    Scalar {
        name: "rlbd_send_errors_total",
        kind: "counter",
        help: "Update frames the kernel refused to send.",
        value: |r| Some(r.totals.send_errors as f64),
    },
    Scalar {
        name: "rlbd_send_retries_total",
        kind: "counter",
        help: "Refused update frames sent again after a transient error.",
        value: |r| Some(r.totals.send_retries as f64),
    },
    Scalar {
        name: "rlbd_unreliable_seconds_total",
        kind: "counter",
        help: "Seconds whose client rates were not used for moves (capture ring drops).",
        value: |r| Some(r.totals.unreliable_seconds as f64),
    },
    Scalar {
        name: "rlbd_netlink_resyncs_total",
        kind: "counter",
        help: "Times netlink notifications were lost and the kernel's tables re-read.",
        value: |r| Some(r.totals.netlink_resyncs as f64),
    },
    Scalar {
        name: "rlbd_neighbours",
        kind: "gauge",
        help: "Confirmed neighbours of the server that rlbd knows.",
        value: |r| Some(r.totals.neighbours as f64),
    },
    Scalar {
        name: "rlbd_foreign_claims_total",
        kind: "counter",
        help: "Episodes of another host claiming one of the server's addresses.",
        value: |r| Some(r.totals.foreign_claims as f64),
    },
];

const TAIL: &[Scalar] = &[
    Scalar {
        name: "rlbd_reasserts_total",
        kind: "counter",
        help: "Updates re-sent because the kernel's own ARP would have undone a move.",
        value: |r| Some(r.totals.reasserts as f64),
    },
    Scalar {
        name: "rlbd_updates_sent_total",
        kind: "counter",
        help: "ARP updates sent (first sends, repeats and re-assertions).",
        value: |r| Some(r.totals.updates_sent as f64),
    },
    Scalar {
        name: "rlbd_updates_suppressed_total",
        kind: "counter",
        help: "ARP updates not sent because a rate limit held them back.",
        value: |r| Some(r.totals.updates_suppressed as f64),
    },
    Scalar {
        name: "rlbd_updates_deferred_total",
        kind: "counter",
        help: "First updates of moves that waited for their turn under the total rate limit \
               (sent late, not lost).",
        value: |r| Some(r.totals.updates_deferred as f64),
    },
];

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {}", escape_help(help));
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// One sample of `name` with the daemon's `bond` label, then `labels` (name, unescaped value).
fn sample(out: &mut String, bond: &str, name: &str, labels: &[(&str, &str)], value: f64) {
    out.push_str(name);
    let _ = write!(out, "{{bond=\"{}\"", escape_label(bond));
    for (k, v) in labels {
        let _ = write!(out, ",{k}=\"{}\"", escape_label(v));
    }
    let _ = writeln!(out, "}} {}", number(value));
}

fn scalars(out: &mut String, r: &StatusReport, list: &[Scalar]) {
    for s in list {
        family(out, s.name, s.kind, s.help);
        if let Some(v) = (s.value)(r) {
            sample(out, &r.name, s.name, &[], v);
        }
    }
}

/// Renders every family from the report's ports and totals (its client list is not read, so
/// the daemon builds none for a scrape). Pure: the same report gives the same text.
pub fn render(r: &StatusReport) -> String {
    let mut out = String::with_capacity(4096);
    let o = &mut out;
    family(
        o,
        "rlbd_info",
        "gauge",
        "Constant 1, labelled with the daemon's version and mode (bond or ports).",
    );
    let labels = [("version", r.version.as_str()), ("mode", r.mode.as_str())];
    sample(o, &r.name, "rlbd_info", &labels, 1.0);
    scalars(o, r, HEAD);
    for f in PORT_FAMILIES {
        family(o, f.name, f.kind, f.help);
        for p in &r.ports {
            if let Some(v) = (f.value)(p) {
                sample(o, &r.name, f.name, &[("port", &p.name)], v);
            }
        }
    }
    scalars(o, r, TOTALS);
    family(
        o,
        "rlbd_moves_total",
        "counter",
        "Clients moved to another port, by reason.",
    );
    let t = &r.totals;
    for (reason, n) in [
        ("overload", t.moves_overload),
        ("failover", t.moves_failover),
        ("placement", t.moves_placement),
        ("room", t.moves_room),
        ("settle", t.moves_settle),
    ] {
        sample(
            o,
            &r.name,
            "rlbd_moves_total",
            &[("reason", reason)],
            n as f64,
        );
    }
    guest_moves(o, r);
    scalars(o, r, TAIL);
    out
}

/// Guests placed, moved by reason and released ([guests]).
fn guest_moves(o: &mut String, r: &StatusReport) {
    let name = "rlbd_guest_moves_total";
    let help = "Guests behind the bond pinned to a port, by reason (placement: a first \
                placement or a pinned guest brought back; released: left to the kernel).";
    family(o, name, "counter", help);
    let t = &r.guest_totals;
    for (reason, n) in [
        ("placement", t.placed),
        ("overload", t.overload),
        ("failover", t.failover),
        ("room", t.room),
        ("settle", t.settle),
        ("released", t.released),
    ] {
        sample(o, &r.name, name, &[("reason", reason)], n as f64);
    }
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
    use crate::status::{ClientStatus, MoveStatus, Totals, SCHEMA_VERSION};

    pub(crate) fn sample_report() -> StatusReport {
        let port = |name: &str, rx: Option<f64>| PortStatus {
            name: name.into(),
            ifindex: 2,
            mac: "02:00:00:00:00:01".into(),
            state: PortState::Up,
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
            counting: crate::status::Counting::Exact,
            counting_hook: None,
            no_move: None,
            uncounted_frames: 0,
            counted_bytes: 0,
            guests: 0,
        };
        StatusReport {
            schema: SCHEMA_VERSION,
            version: "0.1.0".into(),
            mode: crate::status::Mode::Ports,
            name: "we\"ird\\na\nme".into(),
            dry_run: false,
            uptime_secs: 42,
            tick: 41,
            threshold: 0.8,
            window: 3,
            hits: 2,
            hold_down_secs: 30,
            saturated: 0.96,
            max_fill: 0.95,
            saturation_ceiling: Some(0.97),
            ports: vec![port("p0", Some(95e6)), port("p1", None)],
            clients: vec![ClientStatus {
                ip: "198.18.0.13".into(),
                mac: "02:00:c6:12:00:03".into(),
                vlan: 0,
                port: "p1".into(),
                rate_bps: 9e7,
                last_seen_secs_ago: 0,
                moved: Some(MoveStatus {
                    to: "p1".into(),
                    secs_ago: 3,
                    reason: crate::status::Reason::Overload,
                    hold_down_left_secs: 27,
                    reasserts: 2,
                    addresses: vec!["198.18.0.1".into()],
                }),
                pinned: None,
                excluded: false,
            }],
            totals: Totals {
                moves_overload: 1,
                updates_sent: 5,
                clients_tracked: 1,
                clients_moved: 1,
                table_capacity: 4096,
                ..Default::default()
            },
            guests: Vec::new(),
            guest_totals: crate::guests::GuestTotals {
                overload: 2,
                ..Default::default()
            },
        }
    }

    #[test]
    fn families_have_help_and_type_and_labels_are_escaped() {
        let text = render(&sample_report());
        let bond = r#"bond="we\"ird\\na\nme""#;
        assert!(text.contains("# TYPE rlbd_moves_total counter\n"));
        assert!(text.contains(&format!(
            "rlbd_guest_moves_total{{{bond},reason=\"overload\"}} 2\n"
        )));
        assert!(text.contains(&format!("rlbd_port_guests{{{bond},port=\"p0\"}} 0\n")));
        assert!(text.contains(&format!(
            "rlbd_moves_total{{{bond},reason=\"overload\"}} 1\n"
        )));
        // 100 Mbit/s in bytes per second.
        assert!(text.contains(&format!(
            "rlbd_port_capacity_bytes{{{bond},port=\"p0\"}} 12500000\n"
        )));
        assert!(text.contains(&format!(
            "rlbd_port_utilization_ratio{{{bond},port=\"p0\"}} 0.95\n"
        )));
        assert!(text.contains(&format!("rlbd_uptime_seconds{{{bond}}} 42\n")));
        // No reading: no sample, rather than a misleading 0.
        assert!(text.contains("rlbd_port_rx_bytes_total{"));
        assert!(!text.contains("port=\"p1\"} 123456789"));
        assert!(!text.contains("rlbd_port_rx_bytes_total{{{bond},port=\"p1\"}}"));
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            assert!(line.contains(&format!("{{{bond}")), "no bond label: {line}");
            let name = line.split(['{', ' ']).next().unwrap();
            assert!(
                text.contains(&format!("# TYPE {name} ")),
                "{name} has no TYPE line"
            );
        }
        assert_eq!(number(f64::INFINITY), "+Inf");
        assert_eq!(number(1e21), "1000000000000000000000");
    }

    #[test]
    fn a_ceiling_not_learned_has_no_sample_and_sampling_is_a_ratio() {
        let mut r = sample_report();
        let text = render(&r);
        assert!(text.contains("rlbd_saturation_ceiling_ratio{bond="));
        r.saturation_ceiling = None;
        r.ports[0].sampling = 4;
        let text = render(&r);
        assert!(!text.contains("NaN"), "{text}");
        assert!(text.contains("# TYPE rlbd_saturation_ceiling_ratio gauge\n"));
        assert!(!text.contains("rlbd_saturation_ceiling_ratio{"));
        let bond = r#"bond="we\"ird\\na\nme""#;
        assert!(text.contains(&format!(
            "rlbd_port_sampling_ratio{{{bond},port=\"p0\"}} 0.25\n"
        )));
        assert!(text.contains(&format!(
            "rlbd_port_sampling_ratio{{{bond},port=\"p1\"}} 1\n"
        )));
    }
}
