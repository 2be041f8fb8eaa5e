//! What the engine tells about itself: the one-line summary (systemd STATUS=) and the status
//! report (the control socket, the metrics, SIGUSR1's dump). Each answer costs what it shows: a
//! metrics scrape builds the ports and the totals, never the client list; `status top=N` sorts
//! the clients once and renders N of them. The capture sockets' own figures (ring counters, the
//! ratio a socket has in force) are the shell's: it fills them in ([`CaptureFacts`]).

use super::Engine;
use crate::capture::ClientEntry;
use crate::client::mac_text;
use std::net::IpAddr;

use crate::config::{ClientMark, Target};
use crate::status::{
    ClientStatus, Mode, MoveStatus, PortStatus, StatusReport, Totals, SCHEMA_VERSION,
};

/// A client's address for people: its IPv4 one, or its IPv6 one while it has sent IPv6 only.
fn client_addr(e: &ClientEntry) -> String {
    match e.ip6 {
        Some(v6) if e.ip.is_unspecified() => v6.to_string(),
        _ => e.ip.to_string(),
    }
}

/// One port's capture figures, which only the shell's sockets know: its ring's frames and
/// drops, and the sampling ratio its socket has in force.
#[derive(Debug, Clone, Default)]
pub struct CaptureFacts {
    pub ring_packets: u64,
    pub ring_drops: u64,
    pub sampling: u32,
}

impl CaptureFacts {
    /// Writes these figures into a port's status.
    pub fn fill(&self, p: &mut PortStatus) {
        p.ring_packets = self.ring_packets;
        p.ring_drops = self.ring_drops.max(p.ring_drops);
        p.sampling = self.sampling;
    }
}

fn port_statuses(e: &Engine) -> Vec<PortStatus> {
    let mut per_port = vec![0usize; e.lan.ports.list.len()];
    for e in e.table.iter_unordered() {
        if let Some(n) = per_port.get_mut(e.port as usize) {
            *n += 1;
        }
    }
    e.lan
        .ports
        .list
        .iter()
        .enumerate()
        .map(|(i, p)| PortStatus {
            name: p.name.clone(),
            ifindex: p.ifindex,
            mac: mac_text(p.mac),
            state: p.state(),
            capacity_bps: p.capacity_bps,
            rx_bps: p.rx_bps,
            utilization: p.utilization(),
            rx_bytes: p.rx_bytes(),
            window: p.detector.window_string(),
            overloaded: p.usable() && p.detector.overloaded(),
            ring_packets: 0,
            ring_drops: p.ring_drops,
            clients: per_port[i],
            sampling: e.counting.ratio(i),
            counting: e.counting.mode(i),
            counting_hook: e.counting.hook(i).map(|h| h.as_str().to_string()),
            no_move: p.no_move.clone(),
            uncounted_frames: e.counting.uncounted(i),
            counted_bytes: p.counted_bytes_at_reading(),
            guests: 0,
        })
        .collect()
}

/// The busiest `top` clients (all with `None`), largest rate first, ties by address.
fn client_list(e: &Engine, now_ms: u64, top: Option<usize>) -> Vec<ClientStatus> {
    let mut entries: Vec<&ClientEntry> = e.table.iter_unordered().collect();
    let by_rate = |a: &&ClientEntry, b: &&ClientEntry| b.rate.cmp(&a.rate);
    if let Some(n) = top.filter(|n| *n < entries.len()) {
        // Partial selection: only the N shown are sorted (and rendered).
        entries.select_nth_unstable_by(n, by_rate);
        entries.truncate(n);
    }
    let hold = e.settings.policy.hold_down;
    let port_name = |i: usize| {
        e.lan
            .ports
            .list
            .get(i)
            .map_or_else(|| "?".into(), |p| p.name.clone())
    };
    let mark = |c: &ClientEntry| {
        let v4 = (!c.ip.is_unspecified()).then_some(IpAddr::from(c.ip));
        let addrs: Vec<IpAddr> = v4.into_iter().chain(c.ip6.map(IpAddr::from)).collect();
        match e.steer.client_mark(&c.key, &addrs) {
            Some(ClientMark::Pinned(p)) => (Some(p), false),
            Some(ClientMark::Excluded) => (None, true),
            None => (None, false),
        }
    };
    let mut clients: Vec<ClientStatus> = entries
        .into_iter()
        .map(|c| ClientStatus {
            pinned: mark(c).0,
            excluded: mark(c).1,
            ip: client_addr(c),
            mac: mac_text(c.key.mac),
            vlan: c.key.vlan,
            port: port_name(c.port as usize),
            rate_bps: c.rate as f64 * 8.0,
            last_seen_secs_ago: e.schedule.tick.saturating_sub(c.last_seen),
            moved: e.steer.moved(&c.key).map(|m| {
                let ago = now_ms.saturating_sub(m.at_ms) / 1000;
                MoveStatus {
                    to: port_name(m.port),
                    secs_ago: ago,
                    reason: m.reason,
                    hold_down_left_secs: hold.saturating_sub(ago),
                    reasserts: m.reasserts,
                    addresses: m.claims.iter().map(|c| c.server().to_string()).collect(),
                }
            }),
        })
        .collect();
    clients.sort_by(|a, b| {
        b.rate_bps
            .total_cmp(&a.rate_bps)
            .then_with(|| a.ip.cmp(&b.ip))
    });
    clients
}

fn totals(e: &Engine) -> Totals {
    let c = e.steer.counters();
    Totals {
        moves_overload: c.moves_overload,
        moves_failover: c.moves_failover,
        moves_placement: c.moves_placement,
        moves_room: c.moves_room,
        moves_settle: c.moves_settle,
        reasserts: c.reasserts,
        updates_sent: c.sent,
        updates_suppressed: c.suppressed,
        updates_deferred: c.deferred,
        clients_tracked: e.table.len(),
        clients_moved: e.steer.moved_count(),
        table_capacity: e.table.capacity(),
        table_evictions: e.table.evictions(),
        table_expirations: e.table.expirations(),
        send_errors: e.sender.errors(),
        send_retries: e.sender.retried(),
        moves_refused: c.moves_refused,
        unreliable_seconds: e.trouble.unreliable_seconds,
        netlink_resyncs: e.lan.resyncs,
        neighbours: e.lan.host.confirmed_neighbours(),
        foreign_claims: e.trouble.foreign.episodes(),
        timer_late_max_ms: e.trouble.late_max_ms,
        timers_late: e.trouble.late,
    }
}

/// The report with the clients of `clients` (none for the metrics).
fn report(e: &Engine, now_ms: u64, clients: Vec<ClientStatus>) -> StatusReport {
    let (mode, name) = match &e.lan.ports.target {
        Target::Bond(b) => (Mode::Bond, b.clone()),
        Target::Ports(p) => (Mode::Ports, p.first().cloned().unwrap_or_default()),
    };
    let in_force = e.steer.policy_in_force();
    StatusReport {
        schema: SCHEMA_VERSION,
        version: env!("CARGO_PKG_VERSION").into(),
        mode,
        name,
        dry_run: e.settings.dry_run,
        uptime_secs: now_ms.saturating_sub(e.started_ms) / 1000,
        tick: e.schedule.tick,
        threshold: e.settings.policy.threshold,
        window: e.settings.policy.window,
        hits: e.settings.policy.hits,
        hold_down_secs: e.settings.policy.hold_down,
        saturated: in_force.saturated,
        max_fill: in_force.max_fill,
        saturation_ceiling: e.steer.saturation_ceiling(),
        ports: port_statuses(e),
        clients,
        totals: totals(e),
        guests: Vec::new(),
        guest_totals: e.guests.totals,
    }
}

/// The status report with the busiest `top` clients (all with `None`; none with `Some(0)`,
/// as a metrics scrape wants it).
pub fn status(e: &Engine, now_ms: u64, top: Option<usize>) -> StatusReport {
    let clients = if top == Some(0) {
        Vec::new()
    } else {
        client_list(e, now_ms, top)
    };
    let mut r = report(e, now_ms, clients);
    if top != Some(0) {
        let links = e.lan.host.links();
        let name = |i: u32| {
            links
                .get(&i)
                .map_or_else(|| i.to_string(), |l| l.name.clone())
        };
        let ports: Vec<String> = e.lan.ports.list.iter().map(|p| p.name.clone()).collect();
        r.guests = e.guests.statuses(now_ms, &ports, &name);
    }
    let per_port = e.guests.guests_per_port(r.ports.len());
    for (p, n) in r.ports.iter_mut().zip(per_port) {
        p.guests = n;
    }
    r
}
