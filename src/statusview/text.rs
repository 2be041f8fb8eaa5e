//! `rlbd status` as text: the header, the ports and clients tables, the totals.

use std::fmt::Write as _;

use crate::status::{Mode, PortStatus, StatusReport};

/// `[#####.....]`: `util` of `width` cells, clamped to full; `[----------]` with no reading.
pub fn bar(util: Option<f64>, width: usize) -> String {
    match util.filter(|u| u.is_finite()) {
        Some(u) => {
            let filled = ((u * width as f64).round().max(0.0) as usize).min(width);
            format!("[{}{}]", "#".repeat(filled), ".".repeat(width - filled))
        }
        None => format!("[{}]", "-".repeat(width)),
    }
}

/// A rate in bit/s with a unit.
pub fn rate(bps: f64) -> String {
    let (v, unit) = if bps >= 1e9 {
        (bps / 1e9, "Gbit/s")
    } else if bps >= 1e6 {
        (bps / 1e6, "Mbit/s")
    } else if bps >= 1e3 {
        (bps / 1e3, "kbit/s")
    } else {
        (bps, "bit/s")
    };
    format!("{v:.1} {unit}")
}

/// A duration in seconds, short: `42 s`, `3m 05s`, `2h 03m`, `4d 01h`.
pub fn duration(secs: u64) -> String {
    match secs {
        0..=59 => format!("{secs} s"),
        60..=3599 => format!("{}m {:02}s", secs / 60, secs % 60),
        3600..=86_399 => format!("{}h {:02}m", secs / 3600, secs % 3600 / 60),
        _ => format!("{}d {:02}h", secs / 86_400, secs % 86_400 / 3600),
    }
}

/// Left-aligned columns separated by two spaces; columns in `right` are right-aligned.
pub(super) fn table(rows: &[Vec<String>], right: &[usize]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            if c > 0 {
                line.push_str("  ");
            }
            let pad = widths[c].saturating_sub(cell.chars().count());
            if right.contains(&c) {
                line.push_str(&" ".repeat(pad));
                line.push_str(cell);
            } else {
                line.push_str(cell);
                if c + 1 < row.len() {
                    line.push_str(&" ".repeat(pad));
                }
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// How a port counts, for people: "ebpf" (every frame, in the kernel; "ebpf/tc" at the tc
/// hooks, "ebpf/tc 1/N" while the program samples), "all" captured frames, or "1/N" of them.
pub(super) fn counted(p: &PortStatus) -> String {
    let ebpf = match p.counting_hook.as_deref() {
        Some("tc") => "ebpf/tc",
        _ => "ebpf",
    };
    let ratio = format!("1/{}", p.sampling);
    match (p.counting == crate::status::Counting::Ebpf, p.sampling > 1) {
        // The map was full at some point: say so where the operator looks.
        (true, _) if p.uncounted_frames > 0 => format!("{ebpf} full"),
        (true, true) => format!("{ebpf} {ratio}"),
        (true, false) => ebpf.into(),
        (false, true) => ratio,
        (false, false) => "all".into(),
    }
}

pub(super) fn port_row(p: &PortStatus) -> Vec<String> {
    let pct = p
        .utilization
        .filter(|u| u.is_finite())
        .map_or_else(|| "-".into(), |u| format!("{:.0}%", u * 100.0));
    vec![
        p.name.clone(),
        p.mac.clone(),
        p.state.as_str().to_string(),
        rate(p.capacity_bps),
        p.rx_bps.map_or_else(|| "-".into(), rate),
        format!("{} {pct:>4}", bar(p.utilization, 10)),
        if p.overloaded {
            format!("{} overloaded", p.window)
        } else {
            p.window.clone()
        },
        p.ring_drops.to_string(),
        counted(p),
        p.clients.to_string(),
    ]
}

/// The text form of `rlbd status`: ports, the `top` clients by rate (all with `None`), totals.
pub fn render_text(r: &StatusReport, top: Option<usize>) -> String {
    let mut out = header(r);
    out.push_str(&ports_table(r));
    out.push_str(&clients_table(r, top));
    out.push_str(&guests_table(r));
    out.push_str(&totals_line(r));
    out
}

/// The guests behind the bond, when rlbd balances any (`[guests]`): nothing otherwise, so a
/// host without guests reads as before.
pub(super) fn guests_table(r: &StatusReport) -> String {
    if r.guests.is_empty() {
        return String::new();
    }
    let mut out = format!("\nGUESTS: {}\n", r.guests.len());
    let mut rows = vec![["MAC", "VLAN", "BRIDGE PORT", "PORT", "RX", "TX", "MOVED"]
        .map(String::from)
        .to_vec()];
    for g in &r.guests {
        let moved = match (&g.moved, g.pinned) {
            (Some(m), _) => {
                let mut s = format!(
                    "from {} {} ago ({})",
                    m.from,
                    duration(m.secs_ago),
                    m.reason.as_str()
                );
                if m.hold_down_left_secs > 0 {
                    let _ = write!(s, ", held {} more", duration(m.hold_down_left_secs));
                }
                s
            }
            (None, true) => "pinned".into(),
            (None, false) => "-".into(),
        };
        let vlan = if g.vlan == 0 {
            "-".into()
        } else {
            g.vlan.to_string()
        };
        rows.push(vec![
            g.mac.clone(),
            vlan,
            g.bridge_port.clone(),
            g.port.clone(),
            rate(g.rx_bps),
            rate(g.tx_bps),
            moved,
        ]);
    }
    out.push_str(&table(&rows, &[4, 5]));
    out
}

pub(super) fn header(r: &StatusReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "rlbd {} on {} {} (up {}{})",
        r.version,
        if r.mode == Mode::Bond {
            "bond"
        } else {
            "ports of"
        },
        r.name,
        duration(r.uptime_secs),
        if r.dry_run {
            "; dry run: nothing is sent"
        } else {
            ""
        }
    );
    let _ = writeln!(
        out,
        "overloaded: over {:.0}% in {} of the last {} seconds; moved clients stay put {}",
        r.threshold * 100.0,
        r.hits,
        r.window,
        duration(r.hold_down_secs)
    );
    let full = match r.saturation_ceiling {
        Some(c) => format!("full ports read {:.1}%", c * 100.0),
        None => "no port full yet".into(),
    };
    let _ = writeln!(
        out,
        "saturated: from {:.1}% ({full}); a move off one fills its target up to {:.1}%",
        r.saturated * 100.0,
        r.max_fill * 100.0
    );
    out.push('\n');
    out
}

pub(super) fn ports_table(r: &StatusReport) -> String {
    let mut rows = vec![[
        "PORT",
        "MAC",
        "STATE",
        "CAPACITY",
        "RX NOW",
        "UTILIZATION",
        "WINDOW",
        "RING DROPS",
        "COUNTED",
        "CLIENTS",
    ]
    .map(String::from)
    .to_vec()];
    rows.extend(r.ports.iter().map(port_row));
    let mut out = table(&rows, &[3, 4, 7, 8, 9]);
    for p in &r.ports {
        if let Some(why) = &p.no_move {
            let _ = writeln!(out, "{}: overloaded, nothing moved: {why}", p.name);
        }
    }
    out
}

pub(super) fn clients_table(r: &StatusReport, top: Option<usize>) -> String {
    let mut out = String::new();
    out.push('\n');
    // The daemon may have sent only the busiest (status top=N); the totals count them all.
    let tracked = r.totals.clients_tracked.max(r.clients.len());
    let shown = top.unwrap_or(usize::MAX).min(r.clients.len());
    let _ = writeln!(
        out,
        "CLIENTS: {} tracked{}",
        tracked,
        if shown < tracked {
            format!(", the {shown} busiest shown (--all for every one)")
        } else {
            String::new()
        }
    );
    if shown > 0 {
        let mut rows = vec![["IP", "MAC", "VLAN", "PORT", "RATE", "MOVED"]
            .map(String::from)
            .to_vec()];
        for c in r.clients.iter().take(shown) {
            let moved = match &c.moved {
                None => "-".to_string(),
                Some(m) => {
                    let mut s = format!(
                        "to {} {} ago ({})",
                        m.to,
                        duration(m.secs_ago),
                        m.reason.as_str()
                    );
                    if m.hold_down_left_secs > 0 {
                        let _ = write!(s, ", held {} more", duration(m.hold_down_left_secs));
                    }
                    if m.addresses.len() > 1 {
                        let _ = write!(s, ", for {}", m.addresses.join(" "));
                    }
                    if m.reasserts > 0 {
                        let _ = write!(
                            s,
                            ", re-asserted {} time{}",
                            m.reasserts,
                            if m.reasserts == 1 { "" } else { "s" }
                        );
                    }
                    s
                }
            };
            // `[clients]`'s word on it comes first: why it did not move, or where it is kept.
            let moved = match (&c.pinned, c.excluded) {
                (_, true) => "excluded: never moved".to_string(),
                (Some(p), _) if moved == "-" => format!("pinned to {p}"),
                (Some(p), _) => format!("pinned to {p}: {moved}"),
                (None, false) => moved,
            };
            rows.push(vec![
                c.ip.clone(),
                c.mac.clone(),
                if c.vlan == 0 {
                    "-".into()
                } else {
                    c.vlan.to_string()
                },
                c.port.clone(),
                rate(c.rate_bps),
                moved,
            ]);
        }
        out.push_str(&table(&rows, &[4]));
    }

    out
}

pub(super) fn totals_line(r: &StatusReport) -> String {
    let mut out = String::new();
    out.push('\n');
    let t = &r.totals;
    let _ = writeln!(
        out,
        "TOTALS: moves {} ({}); re-assertions {}; updates sent {}, \
         suppressed {}, deferred {}; table {}/{}, evictions {}, expirations {}",
        t.moves(),
        t.moves_by_reason(),
        t.reasserts,
        t.updates_sent,
        t.updates_suppressed,
        t.updates_deferred,
        t.clients_tracked,
        t.table_capacity,
        t.table_evictions,
        t.table_expirations
    );
    // Only when something went wrong: a quiet report stays short.
    if t.send_errors + t.unreliable_seconds + t.netlink_resyncs + t.foreign_claims > 0 {
        let _ = writeln!(
            out,
            "TROUBLE: send errors {} (retried {}); seconds with ring drops (no moves) {}; \
             netlink resyncs {}; foreign claims of our addresses {}",
            t.send_errors,
            t.send_retries,
            t.unreliable_seconds,
            t.netlink_resyncs,
            t.foreign_claims
        );
    }
    out
}
