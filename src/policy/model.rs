//! The planner's plain data. Rates are bits per second; ports and clients are indices into the
//! slices the caller passes, so the core needs no knowledge of MACs, names or addresses.

use serde::{Deserialize, Serialize};

/// A port as the planner, the steering core and the guests' table number it: its index in the
/// `ports` slice they are given, which is the engine's port table (`engine::PortId::index`). A
/// plain index because these modules index slices with it; the door's typed `PortId` wraps it.
pub type PortIndex = usize;

#[derive(Debug, Clone, PartialEq)]
pub struct PortView {
    /// Capacity in bit/s; a port with no positive capacity is never a target.
    pub capacity_bps: f64,
    pub up: bool,
    /// Measured receive rate this second, bit/s.
    pub rx_bps: f64,
    /// The detector's verdict for this port.
    pub overloaded: bool,
    /// On a sampled port, the least rate a client's reading can be told from noise (see
    /// [`sampling_resolution_bps`]); 0 where every frame is counted.
    pub resolution_bps: f64,
}

impl PortView {
    pub fn utilization(&self) -> f64 {
        utilization(self.rx_bps, self.capacity_bps)
    }

    /// A client's measured rate as the planner takes it: under the port's resolution it reads
    /// as 0, below every floor (a client sending fewer packets a second than the sampling
    /// ratio reads 0 most seconds and the ratio's worth of packets in others).
    pub fn resolved(&self, rate_bps: f64) -> f64 {
        if rate_bps < self.resolution_bps {
            0.0
        } else {
            rate_bps
        }
    }
}

/// Kept packets a second a reading must rest on to count: with fewer its relative error is over
/// a third, and a client that sends far fewer than the ratio (kept 0.6 times a second on
/// average) still reaches 4 in some seconds of a run, but not 8.
pub const MIN_KEPT: f64 = 8.0;

/// The resolution of a port counted one packet in `one_in`, its packets `bits_per_packet`
/// long on average: the rate of [`MIN_KEPT`] kept packets a second (0 when exact).
pub fn sampling_resolution_bps(one_in: u32, bits_per_packet: f64) -> f64 {
    if one_in > 1 && bits_per_packet.is_finite() {
        MIN_KEPT * f64::from(one_in) * bits_per_packet.max(0.0)
    } else {
        0.0
    }
}

pub(crate) fn utilization(rate: f64, capacity: f64) -> f64 {
    if capacity > 0.0 && rate.is_finite() {
        rate.max(0.0) / capacity
    } else {
        f64::INFINITY
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ClientView {
    /// The port its frames arrive on now (not where it was told to go).
    pub port: PortIndex,
    /// Measured rate, bit/s.
    pub rate_bps: f64,
    /// Moved less than the hold-down ago: it stays where it is, except for failover.
    pub held: bool,
    /// A flow this planner may not move at all (a host client in the guests' planner, a guest
    /// in the clients'): it stays on its port, so it is the one the overload walk leaves.
    pub fixed: bool,
    /// Seconds since rlbd last moved it, if it did (and still remembers the move). A client
    /// moved one second ago still shows partly on its old port in this second's figures.
    pub since_move: Option<u64>,
    /// While it is held by the hold-down after a move: the port that move took it off, and why
    /// it moved. It never goes back there within the hold-down, and a move of reason
    /// `Overload` or `Room` may still be corrected once (`Reason::Settle`).
    pub last_move: Option<(PortIndex, Reason)>,
}

impl ClientView {
    /// A flow on `port` drawing `rate_bps`, moved off port 1 for overload `since_move` seconds
    /// ago (held while it was moved), for the tests of the planners that weigh it.
    #[cfg(test)]
    pub fn moved_flow(port: PortIndex, rate_bps: f64, since_move: Option<u64>) -> ClientView {
        ClientView {
            port,
            rate_bps,
            held: since_move.is_some(),
            fixed: false,
            since_move,
            last_move: since_move.map(|_| (1, Reason::Overload)),
        }
    }

    /// This flow as another planner's: its load, and how lately it moved, count on its port (a
    /// moved flow still shows partly where it was; it grows into its new port), but this
    /// planner may not move it: held, with no move of its own to correct. The guests' planner
    /// weighs the host's clients so, and the clients' planner the guests.
    pub fn fixed(&self) -> ClientView {
        ClientView {
            held: true,
            fixed: true,
            last_move: None,
            ..self.clone()
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// The source port was overloaded (K of W samples over threshold).
    Overload,
    /// The source port is down.
    Failover,
    /// A new client's first placement (balance-tlb, where no driver places clients).
    Placement,
    /// Between two ports with room, so that a saturated port's client fits where it left: room
    /// in pieces each too small for any of them is room the saturated port cannot use.
    Room,
    /// A correction of a move made a few seconds before (`PolicyConfig::settle`): the reading
    /// since showed the first choice wrong, and this placement strictly lowers the bond's unmet
    /// demand. At most one per move, and never back to the port the client left.
    Settle,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Overload => "overload",
            Reason::Failover => "failover",
            Reason::Placement => "placement",
            Reason::Room => "room",
            Reason::Settle => "settle",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Move {
    /// Index into the `clients` slice.
    pub client: usize,
    pub from: PortIndex,
    pub to: PortIndex,
    pub rate_bps: f64,
    pub reason: Reason,
    /// Utilization of the source and target before and after, for the log line.
    pub from_util: (f64, f64),
    pub to_util: (f64, f64),
    /// This move and the next one in the list are the two halves of an exchange: both are made
    /// together, or neither.
    pub exchange: bool,
    /// A move between two ports with room that keeps one of them room in one piece for a client
    /// of a saturated port (`Reason::Room`, or `Reason::Settle` as a held client's final move).
    pub gathers: bool,
}
