//! Decoding of RTM_NEWADDR / RTM_DELADDR into [`AddrEntry`].

use std::net::IpAddr;

use ipnetwork::IpNetwork;
use log::debug;
use netlink_packet_core::{DecodeError, NlasIterator, Parseable};
use netlink_packet_route::address::{AddressAttribute, AddressHeader};
use netlink_packet_route::AddressFamily;

/// An address configured on an interface, with its prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AddrEntry {
    pub ifindex: u32,
    pub network: IpNetwork,
}

/// sizeof(struct ifaddrmsg)
const IFADDRMSG_LEN: usize = 8;
const IFA_ADDRESS: u16 = 1;
const IFA_LOCAL: u16 = 2;

/// Decodes the payload of an RTM_NEWADDR/RTM_DELADDR. `Ok(None)` for families other than
/// IPv4/IPv6 and for messages without a usable address.
pub(crate) fn parse_addr(payload: &[u8]) -> Result<Option<AddrEntry>, DecodeError> {
    let header = AddressHeader::parse(payload)?;
    if !matches!(header.family, AddressFamily::Inet | AddressFamily::Inet6) {
        return Ok(None);
    }
    let mut local = None;
    let mut address = None;
    let attrs = payload.get(IFADDRMSG_LEN..).unwrap_or_default();
    for nla in NlasIterator::new(attrs) {
        let nla = match nla {
            Ok(nla) => nla,
            Err(e) => {
                debug!(
                    "address on ifindex {}: truncated attributes: {e}",
                    header.index
                );
                break;
            }
        };
        let kind = nla.kind();
        if kind != IFA_ADDRESS && kind != IFA_LOCAL {
            continue;
        }
        match AddressAttribute::parse(&nla) {
            Ok(AddressAttribute::Local(ip)) => local = Some(ip),
            Ok(AddressAttribute::Address(ip)) => address = Some(ip),
            Ok(other) => debug!("address: unexpected attribute {other:?}"),
            Err(e) => debug!(
                "address on ifindex {}: skipping attribute {kind}: {e}",
                header.index
            ),
        }
    }
    // On point-to-point links IFA_ADDRESS is the peer and IFA_LOCAL our own address; IPv6
    // sends only IFA_ADDRESS.
    let Some(ip): Option<IpAddr> = local.or(address) else {
        debug!(
            "address on ifindex {} without IFA_LOCAL/IFA_ADDRESS, skipped",
            header.index
        );
        return Ok(None);
    };
    match IpNetwork::new(ip, header.prefix_len) {
        Ok(network) => Ok(Some(AddrEntry {
            ifindex: header.index,
            network,
        })),
        Err(e) => {
            debug!(
                "address {ip}/{} on ifindex {}: {e}",
                header.prefix_len, header.index
            );
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netlink_packet_core::Emitable;
    use netlink_packet_route::address::AddressMessage;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn emit(msg: &AddressMessage) -> Vec<u8> {
        let mut buf = vec![0u8; msg.buffer_len()];
        msg.emit(&mut buf);
        buf
    }

    #[test]
    fn ipv4_prefers_local_over_peer() {
        let mut msg = AddressMessage::default();
        msg.header.family = AddressFamily::Inet;
        msg.header.prefix_len = 24;
        msg.header.index = 3;
        msg.attributes = vec![
            AddressAttribute::Address(Ipv4Addr::new(198, 18, 0, 9).into()),
            AddressAttribute::Local(Ipv4Addr::new(198, 18, 0, 1).into()),
            AddressAttribute::Label("veth0".into()),
        ];
        let a = parse_addr(&emit(&msg)).unwrap().unwrap();
        assert_eq!(a.ifindex, 3);
        assert_eq!(a.network, "198.18.0.1/24".parse::<IpNetwork>().unwrap());
    }

    #[test]
    fn ipv6_address_only() {
        let mut msg = AddressMessage::default();
        msg.header.family = AddressFamily::Inet6;
        msg.header.prefix_len = 64;
        let ip: Ipv6Addr = "2001:db8::1".parse().unwrap();
        msg.attributes = vec![AddressAttribute::Address(ip.into())];
        let a = parse_addr(&emit(&msg)).unwrap().unwrap();
        assert_eq!(a.network, IpNetwork::new(ip.into(), 64).unwrap());
    }

    #[test]
    fn bad_prefix_or_missing_address_is_skipped() {
        let mut msg = AddressMessage::default();
        msg.header.family = AddressFamily::Inet;
        msg.header.prefix_len = 40;
        msg.attributes = vec![AddressAttribute::Local(Ipv4Addr::new(198, 18, 0, 1).into())];
        assert_eq!(parse_addr(&emit(&msg)).unwrap(), None);
        msg.header.prefix_len = 24;
        msg.attributes.clear();
        assert_eq!(parse_addr(&emit(&msg)).unwrap(), None);
    }

    #[test]
    fn garbage_never_panics() {
        for len in 0..40 {
            let mut buf: Vec<u8> = (0..len).map(|i| (i * 29 + 3) as u8).collect();
            if let Some(b) = buf.first_mut() {
                *b = libc::AF_INET as u8;
            }
            let _ = parse_addr(&buf);
        }
    }
}
