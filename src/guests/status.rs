//! The guests as `rlbd status` and the metrics show them.

use serde::{Deserialize, Serialize};

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
