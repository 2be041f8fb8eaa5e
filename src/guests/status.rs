//! The guests as `rlbd status` and the metrics show them.

use serde::{Deserialize, Serialize};

use super::Guests;
use crate::policy::model::PortIndex;
use crate::policy::Reason;

/// One guest behind the bond.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuestStatus {
    pub mac: String,
    /// 0: untagged.
    pub vlan: u16,
    /// The bridge port it sits behind (its tap or veth), by name; "macvlan on DEV" for a
    /// container's macvlan over the bond (DEV) or a VLAN over it.
    pub bridge_port: String,
    /// The slave it is pinned to ("-" while no port could take it).
    pub port: String,
    /// Received and transmitted in the last second, bit/s.
    pub rx_bps: f64,
    pub tx_bps: f64,
    /// Pinned by the configuration (`[guests] pin`).
    pub pinned: bool,
    /// Its last move, while rlbd remembers it.
    pub moved: Option<GuestMove>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuestMove {
    /// The port it left.
    pub from: String,
    pub secs_ago: u64,
    pub reason: Reason,
    pub hold_down_left_secs: u64,
}

/// Guests placed, moved by reason and released since start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuestTotals {
    pub placed: u64,
    pub overload: u64,
    pub failover: u64,
    pub room: u64,
    pub settle: u64,
    pub released: u64,
}

impl Guests {
    /// Every guest for the status, busiest first (ties by MAC); `name` names an ifindex.
    pub fn statuses(
        &self,
        now: u64,
        ports: &[String],
        name: &dyn Fn(u32) -> String,
    ) -> Vec<GuestStatus> {
        let port = |p: Option<PortIndex>| {
            p.and_then(|p| ports.get(p))
                .map_or_else(|| "-".into(), Clone::clone)
        };
        let mut v: Vec<GuestStatus> = self
            .list
            .values()
            .map(|g| GuestStatus {
                mac: crate::client::mac_text(g.key.mac),
                vlan: g.key.vlan,
                bridge_port: if g.macvlan {
                    format!("macvlan on {}", name(g.bridge))
                } else {
                    name(g.bridge_port)
                },
                port: port(g.port),
                rx_bps: g.rx_bps,
                tx_bps: g.tx_bps,
                pinned: g.pinned,
                moved: g.last_move.zip(g.moved_ms).map(|((from, reason), at)| {
                    let ago = now.saturating_sub(at) / 1000;
                    GuestMove {
                        from: port(Some(from)),
                        secs_ago: ago,
                        reason,
                        hold_down_left_secs: (self.hold_down.ms() / 1000).saturating_sub(ago),
                    }
                }),
            })
            .collect();
        v.sort_by(|a, b| {
            b.rx_bps
                .total_cmp(&a.rx_bps)
                .then_with(|| a.mac.cmp(&b.mac))
        });
        v
    }
}
