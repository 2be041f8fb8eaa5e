//! Serialised rtnetlink requests (the dumps and the single-link request), and taking a single
//! request's answer off the list of those awaited.

use std::collections::VecDeque;
use std::fmt;
use std::io;
use std::time::Instant;

use log::debug;
use netlink_packet_core::{NetlinkHeader, NetlinkMessage, NLMSG_ERROR, NLM_F_DUMP, NLM_F_REQUEST};
use netlink_packet_route::address::AddressMessage;
use netlink_packet_route::link::LinkMessage;
use netlink_packet_route::neighbour::NeighbourMessage;
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};

/// The kinds of dump the route socket asks for, one at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DumpKind {
    Links,
    Neighbours,
    /// The bridge forwarding databases, with every device's own (`self`) entries.
    Fdb,
    Addresses,
}

impl fmt::Display for DumpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DumpKind::Links => "RTM_GETLINK",
            DumpKind::Neighbours => "RTM_GETNEIGH",
            DumpKind::Fdb => "RTM_GETNEIGH (AF_BRIDGE)",
            DumpKind::Addresses => "RTM_GETADDR",
        })
    }
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Dump {
    pub kind: DumpKind,
    pub seq: u32,
}

/// Serialises one rtnetlink request: `msg` with `NLM_F_REQUEST` and `flags`, numbered `seq`.
/// The one way every part of rlbd builds a request (the route socket's dumps and link
/// requests, the tc filters of the counting programs).
pub fn request(msg: RouteNetlinkMessage, flags: u16, seq: u32) -> Vec<u8> {
    let mut header = NetlinkHeader::default();
    header.flags = NLM_F_REQUEST | flags;
    header.sequence_number = seq;
    let mut m = NetlinkMessage::new(header, msg.into());
    m.finalize();
    let mut buf = vec![0u8; m.buffer_len()];
    m.serialize(&mut buf);
    buf
}

/// Serialises one dump request.
pub(super) fn dump_request(dump: Dump) -> Vec<u8> {
    let payload = match dump.kind {
        DumpKind::Links => RouteNetlinkMessage::GetLink(LinkMessage::default()),
        DumpKind::Neighbours => {
            // AF_UNSPEC: one dump covering the ARP and the IPv6 neighbour tables.
            let mut msg = NeighbourMessage::default();
            msg.header.family = AddressFamily::Unspec;
            RouteNetlinkMessage::GetNeighbour(msg)
        }
        DumpKind::Fdb => {
            // AF_BRIDGE goes to the kernel's FDB dump (rtnl_fdb_dump), which AF_UNSPEC does
            // not reach; a bare ndmsg asks for every bridge and every device.
            let mut msg = NeighbourMessage::default();
            msg.header.family = AddressFamily::Bridge;
            RouteNetlinkMessage::GetNeighbour(msg)
        }
        // AF_UNSPEC: one dump covering IPv4 and IPv6.
        DumpKind::Addresses => RouteNetlinkMessage::GetAddress(AddressMessage::default()),
    };
    request(payload, NLM_F_DUMP, dump.seq)
}

/// Serialises an RTM_GETLINK for link `index` alone.
pub(super) fn link_request(index: u32, seq: u32) -> Vec<u8> {
    let mut link = LinkMessage::default();
    link.header.index = index;
    request(RouteNetlinkMessage::GetLink(link), 0, seq)
}

/// Takes the answer to a `RouteSocket::request_link` off the list of those awaited; true when
/// it was an error (logged here: nothing more to decode).
pub(super) fn single_answer(
    singles: &mut VecDeque<(u32, u32, Instant)>,
    seq: u32,
    msg_type: u16,
    code: i32,
) -> bool {
    let Some(i) = singles.iter().position(|(s, _, _)| *s == seq) else {
        return false;
    };
    let index = singles.remove(i).map_or(0, |(_, index, _)| index);
    if msg_type != NLMSG_ERROR {
        return false;
    }
    debug!(
        "RTM_GETLINK for ifindex {index}: {}",
        io::Error::from_raw_os_error(code.saturating_neg())
    );
    true
}
