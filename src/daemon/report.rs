//! What the daemon tells about itself: the one-line summary (log, systemd STATUS=), the full
//! state in the log (SIGUSR1), and the answers of the control socket. Each answer costs what it
//! shows: a metrics scrape builds the ports and the totals, never the client list; `status
//! top=N` sorts the clients once and renders N of them.

use log::info;

use super::control::Responder;
use super::Daemon;
use crate::capture::ClientEntry;
use crate::config::Target;
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

impl Daemon {
    pub(super) fn summary(&self) -> String {
        let ports: Vec<String> = self
            .ports
            .list
            .iter()
            .filter(|p| p.present)
            .map(|p| format!("{}{}", p.name, if p.up { "" } else { "(down)" }))
            .collect();
        let what = match &self.ports.target {
            Target::Bond(b) => format!("bond {b}"),
            Target::Ports(_) => "ports".to_string(),
        };
        format!(
            "{what}: {}; {} clients, {} moved, {} updates sent{}",
            if ports.is_empty() {
                "no ports".to_string()
            } else {
                ports.join(" ")
            },
            self.table.len(),
            self.steer.moved_count(),
            self.steer.counters().sent,
            if self.settings.dry_run {
                " (dry run)"
            } else {
                ""
            }
        )
    }

    pub(super) fn log_state(&self) {
        info!("state: {}", self.summary());
        for (i, p) in self.ports.list.iter().enumerate() {
            info!(
                "  port {} ifindex {} mac {} {} capacity {:.0} Mbit/s rx {} window {} ring drops {} \
                 counting {} sampling 1/{} uncounted {}",
                p.name,
                p.ifindex,
                p.mac,
                p.state().as_str(),
                p.capacity_bps / 1e6,
                p.rx_bps
                    .map_or("-".into(), |r| format!("{:.1} Mbit/s", r / 1e6)),
                p.detector.window_string(),
                p.ring_drops,
                self.captures.mode(i).as_str(),
                self.captures.sampling(i),
                self.captures.uncounted(i)
            );
        }
        for c in self.client_list(None) {
            let moved = c.moved.map_or(String::new(), |m| {
                format!(
                    ", moved {}s ago ({}), re-asserted {}x",
                    m.secs_ago,
                    m.reason.as_str(),
                    m.reasserts
                )
            });
            info!(
                "  client {} {} on {} {:.2} Mbit/s{moved}",
                c.ip,
                c.mac,
                c.port,
                c.rate_bps / 1e6
            );
        }
        let t = self.totals();
        info!(
            "  totals: moves overload {} failover {} placement {} room {} settle {}, re-assertions {}, updates sent {}, suppressed {}, table evictions {}",
            t.moves_overload,
            t.moves_failover,
            t.moves_placement,
            t.moves_room,
            t.moves_settle,
            t.reasserts,
            t.updates_sent,
            t.updates_suppressed,
            t.table_evictions
        );
    }

    fn port_statuses(&self) -> Vec<PortStatus> {
        let mut per_port = vec![0usize; self.ports.list.len()];
        for e in self.table.iter_unordered() {
            if let Some(n) = per_port.get_mut(e.port as usize) {
                *n += 1;
            }
        }
        self.ports
            .list
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let (ring_packets, drops) = self.captures.ring_counts(i);
                PortStatus {
                    name: p.name.clone(),
                    ifindex: p.ifindex,
                    mac: p.mac.to_string(),
                    state: p.state(),
                    capacity_bps: p.capacity_bps,
                    rx_bps: p.rx_bps,
                    utilization: p.utilization(),
                    rx_bytes: p.rx_bytes(),
                    window: p.detector.window_string(),
                    overloaded: p.usable() && p.detector.overloaded(),
                    ring_packets,
                    ring_drops: drops.max(p.ring_drops),
                    clients: per_port[i],
                    sampling: self.captures.sampling(i),
                    counting: self.captures.mode(i).as_str().to_string(),
                    counting_hook: self.captures.hook(i).map(str::to_string),
                    no_move: p.no_move.clone(),
                    uncounted_frames: self.captures.uncounted(i),
                }
            })
            .collect()
    }

    /// The busiest `top` clients (all with `None`), largest rate first, ties by address.
    fn client_list(&self, top: Option<usize>) -> Vec<ClientStatus> {
        let mut entries: Vec<&ClientEntry> = self.table.iter_unordered().collect();
        let by_rate = |a: &&ClientEntry, b: &&ClientEntry| b.rate.cmp(&a.rate);
        if let Some(n) = top.filter(|n| *n < entries.len()) {
            // Partial selection: only the N shown are sorted (and rendered).
            entries.select_nth_unstable_by(n, by_rate);
            entries.truncate(n);
        }
        let now_ms = self.now_ms();
        let hold = self.settings.policy.hold_down;
        let port_name = |i: usize| {
            self.ports
                .list
                .get(i)
                .map_or_else(|| "?".into(), |p| p.name.clone())
        };
        let mut clients: Vec<ClientStatus> = entries
            .into_iter()
            .map(|e| ClientStatus {
                ip: client_addr(e),
                mac: e.key.mac.to_string(),
                vlan: e.key.vlan,
                port: port_name(e.port as usize),
                rate_bps: e.rate as f64 * 8.0,
                last_seen_secs_ago: self.clock.tick.saturating_sub(e.last_seen),
                moved: self.steer.moved(&e.key).map(|m| {
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

    fn totals(&self) -> Totals {
        let c = self.steer.counters();
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
            clients_tracked: self.table.len(),
            clients_moved: self.steer.moved_count(),
            table_capacity: self.table.capacity(),
            table_evictions: self.table.evictions(),
            table_expirations: self.table.expirations(),
            send_errors: self.trouble.retries.errors(),
            send_retries: self.trouble.retries.retried(),
            moves_refused: c.moves_refused,
            unreliable_seconds: self.trouble.unreliable_seconds,
            netlink_resyncs: self.nl.overruns(),
            neighbours: self.host.confirmed_neighbours(),
            foreign_claims: self.trouble.foreign.episodes(),
            timer_late_max_ms: self.trouble.late_max_ms,
            timers_late: self.trouble.late,
        }
    }

    /// The report with the clients of `clients` (none for the metrics).
    fn report(&self, clients: Vec<ClientStatus>) -> StatusReport {
        let (mode, name) = match &self.ports.target {
            Target::Bond(b) => (Mode::Bond, b.clone()),
            Target::Ports(p) => (Mode::Ports, p.first().cloned().unwrap_or_default()),
        };
        StatusReport {
            schema: SCHEMA_VERSION,
            version: env!("CARGO_PKG_VERSION").into(),
            mode,
            name,
            dry_run: self.settings.dry_run,
            uptime_secs: self.clock.start.elapsed().as_secs(),
            tick: self.clock.tick,
            threshold: self.settings.policy.threshold,
            window: self.settings.policy.window,
            hits: self.settings.policy.hits,
            hold_down_secs: self.settings.policy.hold_down,
            ports: self.port_statuses(),
            clients,
            totals: self.totals(),
        }
    }
}

impl Responder for Daemon {
    fn status(&self, top: Option<usize>) -> StatusReport {
        self.report(self.client_list(top))
    }

    fn metrics(&self) -> String {
        crate::metrics::render(&self.report(Vec::new()))
    }
}
