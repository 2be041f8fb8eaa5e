//! What the ring says of a captured frame besides its bytes, and the sampling weight it was
//! kept under.

use std::time::{Duration, Instant};

use super::PACKET_OUTGOING;

/// What the ring says about one captured frame besides its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameMeta {
    /// The real length of the frame on the wire (`tp_len`); the bytes handed over are at most the
    /// snap length.
    pub orig_len: u32,
    /// `sll_pkttype`: [`PACKET_HOST`](super::PACKET_HOST),
    /// [`PACKET_BROADCAST`](super::PACKET_BROADCAST),
    /// [`PACKET_MULTICAST`](super::PACKET_MULTICAST),
    /// [`PACKET_OTHERHOST`](super::PACKET_OTHERHOST) or
    /// [`PACKET_OUTGOING`](super::PACKET_OUTGOING) (sent by this host).
    pub pkt_type: u8,
    /// How many frames an IPv4/IPv6 data frame stands for: the sampling ratio in force when the
    /// kernel kept it (1 when counting exactly). ARP and Neighbor Discovery frames are never
    /// sampled, whatever this says.
    pub weight: u32,
    /// The VLAN of a tag the driver took out of the frame (`None`: not offloaded, look in the
    /// frame); `u16::MAX` for a tag that is not 802.1Q.
    pub vlan: Option<u16>,
}

impl FrameMeta {
    /// True for frames this host sent.
    pub fn is_outgoing(&self) -> bool {
        self.pkt_type == PACKET_OUTGOING
    }

    /// The bytes an IPv4/IPv6 data frame stands for: its length on the wire times its weight (an
    /// unbiased estimate of the bytes of the frames it was sampled from).
    pub fn bytes(&self) -> u64 {
        u64::from(self.orig_len) * u64::from(self.weight)
    }
}

/// How long after a change of the sampling ratio frames are still told apart by timestamp: a
/// frame can wait in the ring for a while (a block is handed over when full or after the retire
/// timeout, and a daemon that fell behind reads late).
pub(super) const SWITCH_GRACE: Duration = Duration::from_secs(5);
/// A timestamp further than this before the swap is not on the swap's clock (some paths stamp
/// frames with another clock): such a frame is given the new ratio.
const TS_PLAUSIBLE: u64 = 10_000_000_000;

/// The sampling ratio now, and around its last change.
#[derive(Debug, Clone, Copy)]
pub(super) struct Weights {
    pub(super) now: u32,
    pub(super) before: u32,
    /// CLOCK_REALTIME of the swap, ns (the clock the ring stamps frames with).
    pub(super) switched_at_ns: u64,
    /// Until when frames are told apart by timestamp; `None` once that is over.
    pub(super) until: Option<Instant>,
}

impl Weights {
    pub(super) const EXACT: Weights = Weights {
        now: 1,
        before: 1,
        switched_at_ns: 0,
        until: None,
    };

    /// The weight of a frame stamped `ts_ns`, while `grace` (the swap is recent).
    #[inline]
    pub(super) fn of(&self, grace: bool, ts_ns: u64) -> u32 {
        if grace && ts_ns < self.switched_at_ns && self.switched_at_ns - ts_ns < TS_PLAUSIBLE {
            self.before
        } else {
            self.now
        }
    }
}
