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

mod families;

use std::fmt::Write as _;

use crate::status::StatusReport;
use families::{Scalar, HEAD, PORT_FAMILIES, TAIL, TOTALS};

/// `Content-Type` of the rendered text, should it ever be served over HTTP.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

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
pub(crate) mod tests;
