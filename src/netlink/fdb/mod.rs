//! Decoding of AF_BRIDGE RTM_NEWNEIGH / RTM_DELNEIGH into [`FdbEntry`]: which MAC sits behind
//! which bridge port (the bridge's forwarding database), and the addresses devices accept as
//! their own (their `self` entries).
//!
//! The kernel's bridge fills these messages in `fdb_fill_info`: `ndm_ifindex` is the port (the
//! bridge itself for its own addresses), NDA_MASTER the bridge, `ndm_state` PERMANENT for
//! local entries, NOARP for static ones, REACHABLE or STALE for learned ones, and NTF_MASTER is
//! never set. A device's own entries (`ndo_dflt_fdb_dump`: its unicast and multicast address
//! filter; a VXLAN's remote table) carry NTF_SELF and no NDA_MASTER.

use log::debug;
use netlink_packet_core::{DecodeError, NlasIterator, ParseableParametrized};
use netlink_packet_route::neighbour::{NeighbourAttribute, NeighbourFlags, NeighbourHeader};
use netlink_packet_route::AddressFamily;

use super::link::{mac_from_slice, Mac};

/// One entry of a bridge's forwarding database, or of a device's own address list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FdbEntry {
    /// `ndm_ifindex`: the bridge port the MAC is behind; the bridge itself for the bridge's own
    /// addresses; for a device's own (`self`) entry, that device.
    pub ifindex: u32,
    /// NDA_MASTER: the bridge whose table holds the entry. `None` for `self` entries.
    pub master: Option<u32>,
    pub mac: Mac,
    /// NDA_VLAN; 0 when absent (a bridge without VLAN filtering, or an entry for no VLAN).
    pub vlan: u16,
    pub kind: FdbKind,
    /// NTF_EXT_LEARNED: added by a driver or a control plane (`extern_learn`), not by the
    /// bridge's own learning; never ages out.
    pub ext_learned: bool,
    /// NTF_SELF: the device's own entry (its address filter, what `bridge fdb show` prints as
    /// `self`), not an entry of its bridge's table.
    pub own: bool,
    /// The raw `ndm_state` (NUD_* bits) and `ndm_flags` (NTF_* bits), for what the fields above
    /// leave out (NTF_STICKY, NTF_OFFLOADED...). A `self` entry's notification echoes the state
    /// its adder asked for (`bridge fdb add ... self permanent`: NOARP|PERMANENT) where the
    /// dump says PERMANENT: compare entries by [`key`](Self::key) and `kind`, not whole.
    pub state: u16,
    pub flags: u8,
}

#[cfg(test)]
impl FdbEntry {
    /// An entry of `dev`'s own address list, as its dump reports it (`self`, permanent): the
    /// tests' fixture for a device's own MAC or a macvlan's.
    pub fn own_address(dev: u32, mac: Mac) -> FdbEntry {
        FdbEntry {
            ifindex: dev,
            master: None,
            mac,
            vlan: 0,
            kind: FdbKind::Local,
            ext_learned: false,
            own: true,
            state: libc::NUD_PERMANENT,
            flags: 2, // NTF_SELF
        }
    }
}

/// What `ndm_state` says about an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FdbKind {
    /// NUD_PERMANENT: the host's own address (a port's or the bridge's MAC, `bridge fdb show`'s
    /// `permanent`); every `self` entry is also reported so.
    Local,
    /// NUD_NOARP: added by hand (`static`) and never aged out, but not the host's own.
    Static,
    /// NUD_REACHABLE or NUD_STALE (aged past the bridge's ageing time, about to go): learned
    /// from the source MAC of a frame received on the port.
    Learned,
}

/// What identifies an entry across its changes: a bridge keys its table by MAC and VLAN (a
/// MAC that moves to another port is an RTM_NEWNEIGH with the new port and no RTM_DELNEIGH for
/// the old one); a device's own list by MAC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FdbKey {
    /// The bridge for a bridge's entry, the device for a `self` entry.
    pub table: u32,
    pub own: bool,
    pub mac: Mac,
    pub vlan: u16,
}

impl FdbEntry {
    /// The bridge whose forwarding table holds this entry (`None` for a device's own entry).
    pub fn bridge(&self) -> Option<u32> {
        self.master.filter(|_| !self.own)
    }

    /// A MAC the bridge learned behind one of its ports (from a frame, or from a driver): a
    /// guest's or a remote host's, not one of this host's own.
    pub fn is_learned_on_port(&self) -> bool {
        self.bridge().is_some_and(|br| br != self.ifindex) && self.kind == FdbKind::Learned
    }

    /// A unicast address on a device's own address list (`self permanent`): one the device
    /// accepts besides its own MAC, which an upper device put there (a macvlan that is up adds
    /// its MAC to its lower device's list wherever it lives, in another namespace too; a VLAN
    /// device with a MAC of its own likewise).
    pub fn is_own_unicast(&self) -> bool {
        self.own && self.kind == FdbKind::Local && self.mac.is_unicast() && !self.mac.is_zero()
    }

    pub fn key(&self) -> FdbKey {
        FdbKey {
            table: self.bridge().unwrap_or(self.ifindex),
            own: self.bridge().is_none(),
            mac: self.mac,
            vlan: self.vlan,
        }
    }
}

/// sizeof(struct ndmsg)
const NDMSG_LEN: usize = 12;
const NDA_LLADDR: u16 = 2;
const NDA_VLAN: u16 = 5;
const NDA_MASTER: u16 = 9;

/// True when a neighbour message's payload is an FDB entry (`ndm_family` AF_BRIDGE): those
/// arrive on RTNLGRP_NEIGH beside the IPv4 and IPv6 neighbours.
pub(crate) fn is_fdb(payload: &[u8]) -> bool {
    payload.first() == Some(&(libc::AF_BRIDGE as u8))
}

/// Decodes the payload of an AF_BRIDGE RTM_NEWNEIGH/RTM_DELNEIGH. `Ok(None)` for another
/// family, and for entries without a 6-byte MAC (a VXLAN's default remote has one, all-zero;
/// other link types may have none).
pub(crate) fn parse_fdb(payload: &[u8]) -> Result<Option<FdbEntry>, DecodeError> {
    let header = NeighbourHeader::parse(payload)?;
    let family = header.family;
    if family != AddressFamily::Bridge {
        return Ok(None);
    }
    let (mut mac, mut vlan, mut master) = (None, 0, None);
    let attrs = payload.get(NDMSG_LEN..).unwrap_or_default();
    for nla in NlasIterator::new(attrs) {
        let nla = match nla {
            Ok(nla) => nla,
            Err(e) => {
                debug!(
                    "fdb entry on ifindex {}: truncated attributes: {e}",
                    header.ifindex
                );
                break;
            }
        };
        let kind = nla.kind();
        if !matches!(kind, NDA_LLADDR | NDA_VLAN | NDA_MASTER) {
            continue;
        }
        match NeighbourAttribute::parse_with_param(&nla, family) {
            Ok(NeighbourAttribute::LinkLayerAddress(bytes)) => mac = mac_from_slice(&bytes),
            Ok(NeighbourAttribute::Vlan(v)) => vlan = v,
            // The crate calls NDA_MASTER "Controller".
            Ok(NeighbourAttribute::Controller(m)) => master = (m != 0).then_some(m),
            Ok(other) => debug!("fdb entry: unexpected attribute {other:?}"),
            Err(e) => debug!(
                "fdb entry on ifindex {}: skipping attribute {kind}: {e}",
                header.ifindex
            ),
        }
    }
    let Some(mac) = mac else {
        debug!(
            "fdb entry on ifindex {} without a MAC, skipped",
            header.ifindex
        );
        return Ok(None);
    };
    let state = u16::from(header.state);
    Ok(Some(FdbEntry {
        ifindex: header.ifindex,
        master,
        mac,
        vlan,
        kind: kind_of(state),
        ext_learned: header.flags.contains(NeighbourFlags::ExtLearned),
        own: header.flags.contains(NeighbourFlags::Own),
        state,
        flags: header.flags.bits(),
    }))
}

/// The bridge's `fdb_to_nud` the other way round.
fn kind_of(state: u16) -> FdbKind {
    if state & libc::NUD_PERMANENT != 0 {
        FdbKind::Local
    } else if state & libc::NUD_NOARP != 0 {
        FdbKind::Static
    } else {
        FdbKind::Learned
    }
}

#[cfg(test)]
mod tests;
