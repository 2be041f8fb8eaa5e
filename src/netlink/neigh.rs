//! Decoding of RTM_NEWNEIGH / RTM_DELNEIGH into [`NeighEntry`].

use std::net::IpAddr;

use log::debug;
use netlink_packet_core::{DecodeError, NlasIterator, ParseableParametrized};
use netlink_packet_route::neighbour::{NeighbourAddress, NeighbourAttribute, NeighbourHeader};
use netlink_packet_route::AddressFamily;

use super::link::{mac_from_slice, Mac};

/// One entry of the kernel's ARP (or IPv6 neighbour) table.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NeighEntry {
    pub ifindex: u32,
    pub ip: IpAddr,
    pub mac: Option<Mac>,
    /// NUD_* bits (`libc::NUD_REACHABLE`...). A bitmask, although usually one bit is set.
    pub state: u16,
}

const CONFIRMED: u16 = libc::NUD_REACHABLE
    | libc::NUD_STALE
    | libc::NUD_DELAY
    | libc::NUD_PROBE
    | libc::NUD_PERMANENT
    | libc::NUD_NOARP;
const UNRESOLVED: u16 = libc::NUD_INCOMPLETE | libc::NUD_FAILED;

impl NeighEntry {
    /// The kernel has (or had, for STALE/DELAY/PROBE) a working unicast hardware address for
    /// this neighbour.
    ///
    /// Multicast and all-zero addresses are refused: NOARP entries for multicast destinations
    /// and point-to-point devices carry such "MACs", and nothing may be sent to them as a host.
    pub fn is_confirmed(&self) -> bool {
        let Some(mac) = self.mac else { return false };
        let unicast = mac.is_unicast() && !mac.is_zero();
        unicast && self.state & CONFIRMED != 0 && self.state & UNRESOLVED == 0
    }
}

/// sizeof(struct ndmsg)
const NDMSG_LEN: usize = 12;
const NDA_DST: u16 = 1;
const NDA_LLADDR: u16 = 2;

/// Decodes the payload of an RTM_NEWNEIGH/RTM_DELNEIGH. `Ok(None)` for entries that are not
/// IP neighbours: bridge FDB entries arrive on the same multicast group with AF_BRIDGE.
pub(crate) fn parse_neigh(payload: &[u8]) -> Result<Option<NeighEntry>, DecodeError> {
    let header = NeighbourHeader::parse(payload)?;
    let family = header.family;
    if !matches!(family, AddressFamily::Inet | AddressFamily::Inet6) {
        return Ok(None);
    }
    let mut ip = None;
    let mut mac = None;
    let attrs = payload.get(NDMSG_LEN..).unwrap_or_default();
    for nla in NlasIterator::new(attrs) {
        let nla = match nla {
            Ok(nla) => nla,
            Err(e) => {
                debug!(
                    "neighbour on ifindex {}: truncated attributes: {e}",
                    header.ifindex
                );
                break;
            }
        };
        let kind = nla.kind();
        if kind != NDA_DST && kind != NDA_LLADDR {
            continue;
        }
        match NeighbourAttribute::parse_with_param(&nla, family) {
            Ok(NeighbourAttribute::Destination(NeighbourAddress::Inet(v4))) => ip = Some(v4.into()),
            Ok(NeighbourAttribute::Destination(NeighbourAddress::Inet6(v6))) => {
                ip = Some(v6.into())
            }
            Ok(NeighbourAttribute::LinkLayerAddress(bytes)) => mac = mac_from_slice(&bytes),
            Ok(other) => debug!("neighbour: unexpected attribute {other:?}"),
            Err(e) => debug!(
                "neighbour on ifindex {}: skipping attribute {kind}: {e}",
                header.ifindex
            ),
        }
    }
    let Some(ip) = ip else {
        debug!(
            "neighbour on ifindex {} without NDA_DST, skipped",
            header.ifindex
        );
        return Ok(None);
    };
    Ok(Some(NeighEntry {
        ifindex: header.ifindex,
        ip,
        mac,
        // The crate folds the bitmask into an enum; `Other(bits)` keeps combinations.
        state: u16::from(header.state),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use netlink_packet_core::Emitable;
    use netlink_packet_route::neighbour::{NeighbourMessage, NeighbourState};
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn entry(mac: Option<Mac>, state: u16) -> NeighEntry {
        NeighEntry {
            ifindex: 1,
            ip: Ipv4Addr::new(198, 18, 0, 2).into(),
            mac,
            state,
        }
    }

    const M: Option<Mac> = Some(Mac(2, 0, 0, 0, 0, 2));

    #[test]
    fn confirmed_states() {
        for state in [
            libc::NUD_REACHABLE,
            libc::NUD_STALE,
            libc::NUD_DELAY,
            libc::NUD_PROBE,
            libc::NUD_PERMANENT,
            libc::NUD_NOARP,
        ] {
            assert!(entry(M, state).is_confirmed(), "state {state:#x}");
        }
        for state in [libc::NUD_INCOMPLETE, libc::NUD_FAILED, libc::NUD_NONE] {
            assert!(!entry(M, state).is_confirmed(), "state {state:#x}");
        }
        assert!(!entry(M, libc::NUD_STALE | libc::NUD_FAILED).is_confirmed());
        assert!(!entry(None, libc::NUD_REACHABLE).is_confirmed());
        assert!(!entry(Some(Mac(0, 0, 0, 0, 0, 0)), libc::NUD_NOARP).is_confirmed());
        assert!(!entry(Some(Mac(1, 0, 0x5e, 0, 0, 1)), libc::NUD_NOARP).is_confirmed());
        assert!(!entry(
            Some(Mac(0xff, 0xff, 0xff, 0xff, 0xff, 0xff)),
            libc::NUD_PERMANENT
        )
        .is_confirmed());
    }

    fn emit(msg: &NeighbourMessage) -> Vec<u8> {
        let mut buf = vec![0u8; msg.buffer_len()];
        msg.emit(&mut buf);
        buf
    }

    #[test]
    fn parses_ipv4_neighbour() {
        let mut msg = NeighbourMessage::default();
        msg.header.family = AddressFamily::Inet;
        msg.header.ifindex = 4;
        msg.header.state = NeighbourState::Reachable;
        msg.attributes = vec![
            NeighbourAttribute::Destination(NeighbourAddress::Inet(Ipv4Addr::new(198, 18, 0, 2))),
            NeighbourAttribute::LinkLayerAddress(vec![2, 0, 0, 0, 0, 2]),
            NeighbourAttribute::Probes(3),
        ];
        let e = parse_neigh(&emit(&msg)).unwrap().unwrap();
        assert_eq!(e, entry(M, libc::NUD_REACHABLE).with_ifindex(4));
        assert!(e.is_confirmed());
    }

    #[test]
    fn keeps_combined_state_bits() {
        let mut msg = NeighbourMessage::default();
        msg.header.family = AddressFamily::Inet6;
        msg.header.state = NeighbourState::Other(libc::NUD_STALE | libc::NUD_PERMANENT);
        msg.attributes = vec![NeighbourAttribute::Destination(NeighbourAddress::Inet6(
            Ipv6Addr::LOCALHOST,
        ))];
        let e = parse_neigh(&emit(&msg)).unwrap().unwrap();
        assert_eq!(e.state, libc::NUD_STALE | libc::NUD_PERMANENT);
        assert_eq!(e.ip, IpAddr::from(Ipv6Addr::LOCALHOST));
        assert_eq!(e.mac, None);
        assert!(!e.is_confirmed());
    }

    #[test]
    fn skips_bridge_fdb_and_missing_destination() {
        let mut msg = NeighbourMessage::default();
        msg.header.family = AddressFamily::Bridge;
        msg.attributes = vec![NeighbourAttribute::LinkLayerAddress(vec![2, 0, 0, 0, 0, 2])];
        assert_eq!(parse_neigh(&emit(&msg)).unwrap(), None);
        msg.header.family = AddressFamily::Inet;
        assert_eq!(parse_neigh(&emit(&msg)).unwrap(), None);
    }

    #[test]
    fn garbage_never_panics() {
        for len in 0..48 {
            let mut buf: Vec<u8> = (0..len).map(|i| (i * 53 + 7) as u8).collect();
            if let Some(b) = buf.first_mut() {
                *b = libc::AF_INET as u8;
            }
            let _ = parse_neigh(&buf);
        }
    }

    impl NeighEntry {
        fn with_ifindex(mut self, ifindex: u32) -> Self {
            self.ifindex = ifindex;
            self
        }
    }
}
