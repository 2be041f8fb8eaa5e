//! What the daemon tells about itself: the one-line summary (log, systemd STATUS=), the full
//! state in the log (SIGUSR1), and the status report behind `rlbd status` and the metrics.

use log::info;

use super::Daemon;
use crate::config::Target;
use crate::policy::Reason;

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
            ports.join(" "),
            self.table.len(),
            self.steering.moved_count(),
            self.steering.limiter.sent,
            if self.settings.dry_run {
                " (dry run)"
            } else {
                ""
            }
        )
    }

    pub(super) fn log_state(&self) {
        info!("state: {}", self.summary());
        for p in &self.ports.list {
            info!(
                "  port {} ifindex {} mac {} {} capacity {:.0} Mbit/s rx {} window {} ring drops {}",
                p.name,
                p.ifindex,
                p.mac,
                if !p.present { "absent" } else if p.up { "up" } else { "down" },
                p.capacity_bps / 1e6,
                p.rx_bps.map_or("-".into(), |r| format!("{:.1} Mbit/s", r / 1e6)),
                p.detector.window_string(),
                p.ring_drops
            );
        }
        for e in self.table.iter() {
            let name = self
                .ports
                .list
                .get(e.port as usize)
                .map_or("?", |p| p.name.as_str());
            info!(
                "  client {} {} on {} {:.2} Mbit/s{}",
                client_addr(e),
                e.mac,
                name,
                e.rate as f64 * 8.0 / 1e6,
                self.steering.describe(&e.mac, self.tick)
            );
        }
        info!(
            "  totals: moves {:?}, re-assertions {}, updates sent {}, suppressed {}, table evictions {}",
            self.moves_total,
            self.steering.reasserts,
            self.steering.limiter.sent,
            self.steering.limiter.suppressed,
            self.table.evictions()
        );
    }

    /// The state as plain data, for the control socket and the metrics.
    pub fn status(&self) -> crate::status::StatusReport {
        use crate::status::*;
        let ports: Vec<PortStatus> = self
            .ports
            .list
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let stats = p
                    .capture
                    .as_ref()
                    .and_then(|c| c.stats().ok())
                    .unwrap_or_default();
                PortStatus {
                    name: p.name.clone(),
                    ifindex: p.ifindex,
                    mac: p.mac.to_string(),
                    state: if !p.present {
                        "absent"
                    } else if p.up {
                        "up"
                    } else {
                        "down"
                    }
                    .into(),
                    capacity_bps: p.capacity_bps,
                    rx_bps: p.rx_bps,
                    utilization: p
                        .rx_bps
                        .filter(|_| p.capacity_bps > 0.0)
                        .map(|r| r / p.capacity_bps),
                    rx_bytes: p.rx_bytes(),
                    window: p.detector.window_string(),
                    overloaded: p.usable() && p.detector.overloaded(),
                    ring_packets: stats.packets,
                    ring_drops: stats.drops.max(p.ring_drops),
                    clients: self.table.iter().filter(|e| e.port as usize == i).count(),
                }
            })
            .collect();
        let hold = self.settings.policy.hold_down;
        let mut clients: Vec<ClientStatus> = self
            .table
            .iter()
            .map(|e| ClientStatus {
                ip: client_addr(e),
                mac: e.mac.to_string(),
                port: self
                    .ports
                    .list
                    .get(e.port as usize)
                    .map_or_else(|| "?".into(), |p| p.name.clone()),
                rate_bps: e.rate as f64 * 8.0,
                last_seen_secs_ago: self.tick.saturating_sub(e.last_seen),
                moved: self.steering.moved(&e.mac).map(|m| MoveStatus {
                    to: self
                        .ports
                        .list
                        .get(m.port)
                        .map_or_else(|| "?".into(), |p| p.name.clone()),
                    secs_ago: self.tick.saturating_sub(m.at_tick),
                    reason: m.reason.as_str().into(),
                    hold_down_left_secs: (m.at_tick + hold).saturating_sub(self.tick),
                    reasserts: m.reasserts,
                }),
            })
            .collect();
        clients.sort_by(|a, b| {
            b.rate_bps
                .total_cmp(&a.rate_bps)
                .then_with(|| a.ip.cmp(&b.ip))
        });
        let (mode, name) = match &self.ports.target {
            Target::Bond(b) => ("bond", b.clone()),
            Target::Ports(p) => ("ports", p.first().cloned().unwrap_or_default()),
        };
        StatusReport {
            schema: SCHEMA_VERSION,
            version: env!("CARGO_PKG_VERSION").into(),
            mode: mode.into(),
            name,
            dry_run: self.settings.dry_run,
            uptime_secs: self.start.elapsed().as_secs(),
            tick: self.tick,
            threshold: self.settings.policy.threshold,
            window: self.settings.policy.window,
            hits: self.settings.policy.hits,
            hold_down_secs: hold,
            ports,
            clients,
            totals: Totals {
                moves_overload: self
                    .moves_total
                    .get(&Reason::Overload)
                    .copied()
                    .unwrap_or(0),
                moves_failover: self
                    .moves_total
                    .get(&Reason::Failover)
                    .copied()
                    .unwrap_or(0),
                moves_placement: self
                    .moves_total
                    .get(&Reason::Placement)
                    .copied()
                    .unwrap_or(0),
                reasserts: self.steering.reasserts,
                updates_sent: self.steering.limiter.sent,
                updates_suppressed: self.steering.limiter.suppressed,
                clients_tracked: self.table.len(),
                table_capacity: self.table.capacity(),
                table_evictions: self.table.evictions(),
                table_expirations: self.table.expirations(),
            },
        }
    }
}

/// A client's address for people: its IPv4 one, or its IPv6 one while it has sent IPv6 only.
fn client_addr(e: &crate::capture::ClientEntry) -> String {
    match e.ip6 {
        Some(v6) if e.ip.is_unspecified() => v6.to_string(),
        _ => e.ip.to_string(),
    }
}
