//! The daemon's state as plain data: what `rlbd status --json` prints and what the metrics are
//! made from. The schema is stable: fields are only ever added (documented in rlbd(8)).

use serde::{Deserialize, Serialize};

/// Bumped only on an incompatible change.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatusReport {
    pub schema: u32,
    pub version: String,
    /// "bond" or "ports".
    pub mode: String,
    /// The bond's name, or the first port's.
    pub name: String,
    pub dry_run: bool,
    pub uptime_secs: u64,
    pub tick: u64,
    pub threshold: f64,
    pub window: usize,
    pub hits: usize,
    pub hold_down_secs: u64,
    pub ports: Vec<PortStatus>,
    /// Every tracked client, largest rate first.
    pub clients: Vec<ClientStatus>,
    pub totals: Totals,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PortStatus {
    pub name: String,
    pub ifindex: u32,
    pub mac: String,
    /// "up", "down" or "absent".
    pub state: String,
    pub capacity_bps: f64,
    /// Receive rate over the last second, bit/s; null when there was no usable reading.
    pub rx_bps: Option<f64>,
    pub utilization: Option<f64>,
    /// Receive byte counter as last read from the kernel.
    pub rx_bytes: Option<u64>,
    /// Oldest first: `x` over threshold, `.` under, `?` no reading, `_` not yet sampled.
    pub window: String,
    pub overloaded: bool,
    pub ring_packets: u64,
    pub ring_drops: u64,
    /// Clients whose latest frame arrived on this port.
    pub clients: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientStatus {
    pub ip: String,
    pub mac: String,
    /// The port its latest frame arrived on.
    pub port: String,
    /// bit/s over the last second.
    pub rate_bps: f64,
    pub last_seen_secs_ago: u64,
    /// Present when rlbd moved it.
    pub moved: Option<MoveStatus>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MoveStatus {
    /// Where rlbd sent it.
    pub to: String,
    pub secs_ago: u64,
    /// "overload" or "failover".
    pub reason: String,
    pub hold_down_left_secs: u64,
    pub reasserts: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Totals {
    pub moves_overload: u64,
    pub moves_failover: u64,
    pub reasserts: u64,
    pub updates_sent: u64,
    pub updates_suppressed: u64,
    pub clients_tracked: usize,
    pub table_capacity: usize,
    pub table_evictions: u64,
    pub table_expirations: u64,
}
