//! One client of the table, and how a frame's destination is noted in it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::client::{ClientKey, ServerSet};

/// One client: an on-link neighbour that delivers frames to the server (routed traffic counts
/// toward the gateway's MAC), on one VLAN.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientEntry {
    /// The sender's MAC and VLAN (the table key).
    pub key: ClientKey,
    /// The IPv4 source of its latest IPv4 frame (for an on-link client, its own address);
    /// unspecified (0.0.0.0) while it has sent IPv6 only.
    pub ip: Ipv4Addr,
    /// The IPv6 source of its latest IPv6 frame, if it sent any: a dual-stack client is one
    /// client (one MAC), accounted for both families.
    pub ip6: Option<Ipv6Addr>,
    /// The server addresses it sends to (both families), and whether it sends through the
    /// server to others.
    pub servers: ServerSet,
    /// Index of the port (slave) its latest frame arrived on.
    pub port: u16,
    /// Bytes (frame lengths on the wire, scaled by the sampling ratio on a sampled port) since the
    /// last `roll_over`.
    pub bytes_this_second: u64,
    /// Bytes per tick over the interval that the last `roll_over` closed (bytes/s for 1 s ticks).
    pub rate: u64,
    /// Tick of its latest frame.
    pub last_seen: u64,
}

/// Notes a frame's destination in the client's server set.
#[inline]
pub(super) fn note_dst(
    e: &mut ClientEntry,
    dst_ip: IpAddr,
    now_tick: u64,
    stale: u64,
    ours: impl Fn(IpAddr) -> bool,
) {
    // Most frames go where the previous one went: the address lists are not searched then.
    if e.servers.is_last(dst_ip) {
        if e.servers.other() != Some(dst_ip) {
            e.servers.note(dst_ip, now_tick, stale);
        }
    } else if ours(dst_ip) {
        e.servers.note(dst_ip, now_tick, stale);
    } else {
        e.servers.note_other(dst_ip);
    }
}
