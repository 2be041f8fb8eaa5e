//! What goes into the guests table (the bridge's FDB, the second's counts) and what comes out
//! of it (the actions the engine carries out).

use log::Level;

use crate::client::ClientKey;
use crate::policy::model::PortIndex;
use crate::policy::Reason;

/// One entry of a bridge's forwarding database, as the guests table wants it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FdbFact {
    /// The MAC on its VLAN (0: untagged).
    pub key: ClientKey,
    /// The bridge port it sits behind (a guest's tap or veth, or the bond: the switch's side).
    pub bridge_port: u32,
    /// The bridge.
    pub bridge: u32,
    /// Learned from the guest's frames (or by an external learner), not one of the host's own
    /// local or static entries.
    pub learned: bool,
    /// The entry went away (aged out, the port removed, deleted).
    pub removed: bool,
    /// A container's macvlan, not a bridge's entry: `bridge` and `bridge_port` are then both
    /// the device whose address list holds the MAC (the bond, or a VLAN over it).
    pub macvlan: bool,
}

/// One guest's counts of one second on one port, as the kernel's programs have them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuestCount {
    pub key: ClientKey,
    /// The port, as the engine's door names it.
    pub port: crate::engine::PortId,
    pub rx_bytes: u64,
    pub tx_bytes: u64,
    /// Frames from the guest's own MAC that arrived from the switch on the very port it is
    /// pinned to: the MAC is now elsewhere on the LAN (the guest migrated away).
    pub seen_from_switch: u64,
}

/// What the table asks the engine to do.
#[derive(Debug, Clone, PartialEq)]
pub enum GuestAction {
    /// Send `key`'s frames out of `port` (the egress program's map), accept its frames there
    /// only, and announce it there (a learning frame from its MAC). `reason`: why it moved
    /// (`None`: its first placement).
    Pin {
        key: ClientKey,
        port: PortIndex,
        reason: Option<Reason>,
    },
    /// Leave `key` to the kernel again.
    Unpin {
        key: ClientKey,
    },
    /// Announce `key` on `port` again (the switch may have aged it out).
    Announce {
        key: ClientKey,
        port: PortIndex,
    },
    Log(Level, String),
}
