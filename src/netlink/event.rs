//! What the kernel tells us, as typed events: the decoding of one rtnetlink message of the
//! route family (links, neighbours, bridge FDB entries, addresses) into an [`NlEvent`].

use log::debug;
use netlink_packet_core::{DecodeError, NetlinkBuffer, NLMSG_OVERRUN};

use super::addr::{parse_addr, AddrEntry};
use super::fdb::{is_fdb, parse_fdb, FdbEntry};
use super::link::{parse_link, LinkInfo, LinkMsg};
use super::neigh::{parse_neigh, NeighEntry};

/// One thing the kernel told us.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NlEvent {
    /// RTM_NEWLINK: a link appeared or changed, one entry of a link dump, or the answer to
    /// [`RouteSocket::request_link`] (the last two with fresh counters).
    ///
    /// [`RouteSocket::request_link`]: crate::netlink::RouteSocket::request_link
    Link(LinkInfo),
    LinkRemoved {
        index: u32,
        name: String,
    },
    /// RTM_NEWNEIGH: an entry was added or changed state, including to FAILED. Notifications
    /// and the dump (`request_neighbours`) cover IPv4 and IPv6 neighbours.
    Neigh(NeighEntry),
    NeighRemoved(NeighEntry),
    /// AF_BRIDGE RTM_NEWNEIGH: a bridge FDB entry (or a device's own, `self`) appeared or
    /// changed: learned, moved to another port (same [`FdbEntry::key`], new `ifindex`, and no
    /// `FdbRemoved` for the old port), or changed kind. Also one entry of the FDB dump
    /// (`request_fdb`). Refreshing a learned entry (every frame from the MAC) is not notified.
    Fdb(FdbEntry),
    /// AF_BRIDGE RTM_DELNEIGH: aged out, deleted (`bridge fdb del`, flush), or gone with its
    /// port or bridge. A device's own entries go with the device without one: forget them
    /// on `LinkRemoved`.
    FdbRemoved(FdbEntry),
    Addr(AddrEntry),
    AddrRemoved(AddrEntry),
    /// The oldest outstanding dump request is complete. Dumps run one at a time in request
    /// order; a request made while one of the same kind is still queued (not yet sent) shares
    /// that one's reply and `DumpDone`.
    DumpDone,
    /// The kernel dropped notifications (receive buffer full) or a datagram was truncated:
    /// the caller's view may be stale and it should request fresh dumps.
    Overrun,
}

const RTM_NEWLINK: u16 = 16;
const RTM_DELLINK: u16 = 17;
const RTM_NEWADDR: u16 = 20;
const RTM_DELADDR: u16 = 21;
const RTM_NEWNEIGH: u16 = 28;
const RTM_DELNEIGH: u16 = 29;

/// The event a link, neighbour or address message of type `msg_type` makes, if any. Messages
/// that do not decode are logged and skipped: one bad message must not cost the others.
pub(super) fn route_event(msg_type: u16, payload: &[u8]) -> Option<NlEvent> {
    match msg_type {
        RTM_NEWLINK | RTM_DELLINK => match parse_link(payload) {
            Ok(LinkMsg::Link(link)) if msg_type == RTM_NEWLINK => Some(NlEvent::Link(link)),
            Ok(LinkMsg::Link(link)) => Some(NlEvent::LinkRemoved {
                index: link.index,
                name: link.name,
            }),
            Ok(LinkMsg::Ignored) => None,
            Err(e) => {
                debug!("skipping undecodable link message (type {msg_type}): {e}");
                None
            }
        },
        RTM_NEWNEIGH | RTM_DELNEIGH if is_fdb(payload) => match parse_fdb(payload) {
            Ok(Some(e)) if msg_type == RTM_NEWNEIGH => Some(NlEvent::Fdb(e)),
            Ok(Some(e)) => Some(NlEvent::FdbRemoved(e)),
            Ok(None) => None,
            Err(e) => {
                debug!("skipping undecodable fdb message (type {msg_type}): {e}");
                None
            }
        },
        RTM_NEWNEIGH | RTM_DELNEIGH => match parse_neigh(payload) {
            Ok(Some(n)) if msg_type == RTM_NEWNEIGH => Some(NlEvent::Neigh(n)),
            Ok(Some(n)) => Some(NlEvent::NeighRemoved(n)),
            Ok(None) => None,
            Err(e) => {
                debug!("skipping undecodable neighbour message (type {msg_type}): {e}");
                None
            }
        },
        RTM_NEWADDR | RTM_DELADDR => match parse_addr(payload) {
            Ok(Some(a)) if msg_type == RTM_NEWADDR => Some(NlEvent::Addr(a)),
            Ok(Some(a)) => Some(NlEvent::AddrRemoved(a)),
            Ok(None) => None,
            Err(e) => {
                debug!("skipping undecodable address message (type {msg_type}): {e}");
                None
            }
        },
        other => {
            debug!("ignoring rtnetlink message type {other}");
            None
        }
    }
}

/// The error code of an NLMSG_ERROR payload (negative errno, 0 for an acknowledgement).
pub(super) fn error_code(payload: &[u8]) -> i32 {
    payload
        .get(..4)
        .map_or(0, |b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
}

/// The header fields of one netlink message that the socket's bookkeeping needs.
#[derive(Debug, Clone, Copy)]
pub(super) struct MsgHead {
    pub msg_type: u16,
    pub flags: u16,
    pub seq: u32,
    pub port: u32,
}

/// Splits the first netlink message off `rest`: its header, its payload and how far to advance
/// (its length rounded up to 4, never past the end). `Err` when no well-formed message starts
/// there (the rest of the datagram is unusable then: lengths cannot be trusted).
pub(super) fn next_message(rest: &[u8]) -> Result<(MsgHead, &[u8], usize), DecodeError> {
    let buf = NetlinkBuffer::new_checked(rest)?;
    let len = buf.length() as usize;
    let head = MsgHead {
        msg_type: buf.message_type(),
        flags: buf.flags(),
        seq: buf.sequence_number(),
        port: buf.port_number(),
    };
    let payload = buf.payload();
    Ok((head, payload, len.next_multiple_of(4).min(rest.len())))
}

/// Decodes one rtnetlink datagram (as read from the socket) into the events its link,
/// neighbour and address messages make, with the socket's framing and decoders, but without its
/// request bookkeeping (dump replies and notifications alike). A pure function of the bytes:
/// for fuzzing and for tests of captured kernel messages.
pub fn decode_datagram(datagram: &[u8]) -> Vec<NlEvent> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < datagram.len() {
        let Ok((head, payload, advance)) = next_message(&datagram[pos..]) else {
            break;
        };
        pos += advance.max(1);
        match head.msg_type {
            NLMSG_OVERRUN => out.push(NlEvent::Overrun),
            t => out.extend(route_event(t, payload)),
        }
    }
    out
}
