//! Parsing the captured (possibly truncated) frames into the few fields the daemon needs.

use std::net::{Ipv4Addr, Ipv6Addr};

use pnet_packet::arp::{ArpHardwareTypes, ArpPacket};
use pnet_packet::ethernet::{EtherType, EtherTypes, EthernetPacket};
use pnet_packet::ipv4::Ipv4Packet;
use pnet_packet::ipv6::Ipv6Packet;
use pnet_packet::vlan::VlanPacket;

pub use crate::Mac;

/// The fields of one captured frame that the daemon uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Frame {
    /// An IPv4 packet.
    Ipv4 {
        src_mac: Mac,
        dst_mac: Mac,
        src_ip: Ipv4Addr,
        dst_ip: Ipv4Addr,
    },
    /// An Ethernet/IPv4 ARP packet (hardware type 1, protocol 0x0800, lengths 6 and 4).
    Arp {
        eth_src: Mac,
        eth_dst: Mac,
        /// 1 = request, 2 = reply (others are passed through as they are).
        op: u16,
        sha: Mac,
        spa: Ipv4Addr,
        tha: Mac,
        tpa: Ipv4Addr,
    },
    /// An IPv6 packet that is not Neighbor Discovery.
    Ipv6 {
        src_mac: Mac,
        dst_mac: Mac,
        src_ip: Ipv6Addr,
        dst_ip: Ipv6Addr,
    },
    /// An ICMPv6 Neighbor Solicitation or Advertisement (next header 58 right after the fixed
    /// IPv6 header, ICMPv6 type 135 or 136).
    Nd {
        eth_src: Mac,
        eth_dst: Mac,
        kind: NdKind,
        /// The target address: the address asked for (NS) or advertised (NA).
        target: Ipv6Addr,
        src_ip: Ipv6Addr,
        dst_ip: Ipv6Addr,
        /// The NA's Override flag (always false for an NS).
        override_flag: bool,
        /// The link-layer address option, when captured: Source Link-Layer Address for an NS,
        /// Target Link-Layer Address for an NA.
        lladdr: Option<Mac>,
    },
}

/// Which Neighbor Discovery message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NdKind {
    /// Neighbor Solicitation (ICMPv6 type 135).
    Ns,
    /// Neighbor Advertisement (ICMPv6 type 136).
    Na,
}

const IPV6_HDR: usize = 40;
const NEXT_HEADER_ICMPV6: u8 = 58;
const ICMPV6_NS: u8 = 135;
const ICMPV6_NA: u8 = 136;
/// ICMPv6 header (4) + flags/reserved (4) + target (16).
const ND_BODY: usize = 24;
const OPT_SOURCE_LLADDR: u8 = 1;
const OPT_TARGET_LLADDR: u8 = 2;

const ETH_HDR: usize = 14;
const VLAN_HDR: usize = 4;

/// The VLAN of a frame's own 802.1Q tag (0 when untagged); `u16::MAX` for an 802.1ad tag,
/// whose traffic rlbd does not steer.
#[inline]
pub fn tag_in_frame(frame: &[u8]) -> u16 {
    match frame.get(12..16) {
        Some([0x81, 0x00, hi, lo]) => u16::from_be_bytes([*hi & 0x0f, *lo]),
        Some([0x88, 0xa8, ..]) => u16::MAX,
        _ => 0,
    }
}

/// Parses an Ethernet frame, looking through one 802.1Q tag. Returns `None` for anything that is
/// not IPv4, IPv6 or Ethernet/IPv4 ARP, or too short to hold the fields (the IPv4 header must reach
/// the destination address; the IPv6 header must be whole; the ARP body must be whole; an NS/NA
/// must hold its target, else it counts as plain IPv6). Bytes past those fields may be missing
/// (snap length). Never panics.
pub fn parse(frame: &[u8]) -> Option<Frame> {
    let eth = EthernetPacket::new(frame)?;
    let src = eth.get_source();
    let dst = eth.get_destination();
    let (ethertype, payload): (EtherType, &[u8]) = if eth.get_ethertype() == EtherTypes::Vlan {
        let tag = VlanPacket::new(frame.get(ETH_HDR..)?)?;
        (tag.get_ethertype(), frame.get(ETH_HDR + VLAN_HDR..)?)
    } else {
        (eth.get_ethertype(), frame.get(ETH_HDR..)?)
    };
    match ethertype {
        EtherTypes::Ipv4 => {
            let ip = Ipv4Packet::new(payload)?;
            // What the kernel's ip_rcv would accept as a header at all.
            if ip.get_version() != 4 || ip.get_header_length() < 5 {
                return None;
            }
            Some(Frame::Ipv4 {
                src_mac: src,
                dst_mac: dst,
                src_ip: ip.get_source(),
                dst_ip: ip.get_destination(),
            })
        }
        EtherTypes::Arp => {
            let arp = ArpPacket::new(payload)?;
            if arp.get_hardware_type() != ArpHardwareTypes::Ethernet
                || arp.get_protocol_type() != EtherTypes::Ipv4
                || arp.get_hw_addr_len() != 6
                || arp.get_proto_addr_len() != 4
            {
                return None;
            }
            Some(Frame::Arp {
                eth_src: src,
                eth_dst: dst,
                op: arp.get_operation().0,
                sha: arp.get_sender_hw_addr(),
                spa: arp.get_sender_proto_addr(),
                tha: arp.get_target_hw_addr(),
                tpa: arp.get_target_proto_addr(),
            })
        }
        EtherTypes::Ipv6 => parse_ipv6(src, dst, payload),
        _ => None,
    }
}

fn parse_ipv6(src: Mac, dst: Mac, payload: &[u8]) -> Option<Frame> {
    let ip = Ipv6Packet::new(payload.get(..IPV6_HDR)?)?;
    if ip.get_version() != 6 {
        return None;
    }
    let (src_ip, dst_ip) = (ip.get_source(), ip.get_destination());
    let plain = Frame::Ipv6 {
        src_mac: src,
        dst_mac: dst,
        src_ip,
        dst_ip,
    };
    if ip.get_next_header().0 != NEXT_HEADER_ICMPV6 {
        return Some(plain);
    }
    let icmp = &payload[IPV6_HDR..];
    let kind = match icmp.first() {
        Some(&ICMPV6_NS) => NdKind::Ns,
        Some(&ICMPV6_NA) => NdKind::Na,
        _ => return Some(plain),
    };
    let Some(body) = icmp.get(..ND_BODY) else {
        return Some(plain);
    };
    let mut t = [0u8; 16];
    t.copy_from_slice(&body[8..24]);
    let want = match kind {
        NdKind::Ns => OPT_SOURCE_LLADDR,
        NdKind::Na => OPT_TARGET_LLADDR,
    };
    // Options: [type, length in 8-byte units, ...]; walk what was captured.
    let mut lladdr = None;
    let mut opts = &icmp[ND_BODY..];
    while let &[ty, len, ..] = opts {
        let n = usize::from(len) * 8;
        if n == 0 {
            break;
        }
        if ty == want && len == 1 {
            if let Some(m) = opts.get(2..8) {
                lladdr = <[u8; 6]>::try_from(m).ok().map(Mac::from);
            }
            break;
        }
        let Some(rest) = opts.get(n..) else { break };
        opts = rest;
    }
    Some(Frame::Nd {
        eth_src: src,
        eth_dst: dst,
        kind,
        target: Ipv6Addr::from(t),
        src_ip,
        dst_ip,
        override_flag: kind == NdKind::Na && body[4] & 0x20 != 0,
        lladdr,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use pnet_packet::arp::{ArpOperations, MutableArpPacket};
    use pnet_packet::ethernet::MutableEthernetPacket;
    use pnet_packet::ipv4::MutableIpv4Packet;
    use pnet_packet::vlan::MutableVlanPacket;

    pub(crate) const CLIENT_MAC: Mac = Mac(0x02, 0xcc, 0, 0, 0, 0x09);
    pub(crate) const SERVER_MAC: Mac = Mac(0x02, 0xaa, 0, 0, 0, 0x01);
    pub(crate) const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 9);
    pub(crate) const SERVER_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);

    /// Builds Ethernet [+ 802.1Q] + `body`, padded to `len` bytes.
    fn ethernet(src: Mac, dst: Mac, et: EtherType, vlan: bool, body: &[u8], len: usize) -> Vec<u8> {
        let hdr = if vlan { 18 } else { 14 };
        let mut buf = vec![0u8; (hdr + body.len()).max(len)];
        let mut e = MutableEthernetPacket::new(&mut buf).unwrap();
        e.set_source(src);
        e.set_destination(dst);
        if vlan {
            e.set_ethertype(EtherTypes::Vlan);
            let mut t = MutableVlanPacket::new(&mut buf[14..]).unwrap();
            t.set_vlan_identifier(5);
            t.set_ethertype(et);
        } else {
            e.set_ethertype(et);
        }
        buf[hdr..hdr + body.len()].copy_from_slice(body);
        buf
    }

    /// An IPv4 frame (20-byte header + zero payload) of total length `len`.
    pub(crate) fn ipv4_frame(
        src: Mac,
        dst: Mac,
        sip: Ipv4Addr,
        dip: Ipv4Addr,
        vlan: bool,
        len: usize,
    ) -> Vec<u8> {
        let mut ip = [0u8; 20];
        let mut p = MutableIpv4Packet::new(&mut ip).unwrap();
        p.set_version(4);
        p.set_header_length(5);
        p.set_total_length(len.saturating_sub(14).min(65535) as u16);
        p.set_ttl(64);
        p.set_next_level_protocol(pnet_packet::ip::IpNextHeaderProtocols::Udp);
        p.set_source(sip);
        p.set_destination(dip);
        ethernet(src, dst, EtherTypes::Ipv4, vlan, &ip, len)
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn arp_frame(
        src: Mac,
        dst: Mac,
        op: u16,
        sha: Mac,
        spa: Ipv4Addr,
        tha: Mac,
        tpa: Ipv4Addr,
        vlan: bool,
    ) -> Vec<u8> {
        let mut body = [0u8; 28];
        let mut a = MutableArpPacket::new(&mut body).unwrap();
        a.set_hardware_type(ArpHardwareTypes::Ethernet);
        a.set_protocol_type(EtherTypes::Ipv4);
        a.set_hw_addr_len(6);
        a.set_proto_addr_len(4);
        a.set_operation(pnet_packet::arp::ArpOperation(op));
        a.set_sender_hw_addr(sha);
        a.set_sender_proto_addr(spa);
        a.set_target_hw_addr(tha);
        a.set_target_proto_addr(tpa);
        ethernet(src, dst, EtherTypes::Arp, vlan, &body, 60)
    }

    #[test]
    fn ipv4_plain_and_tagged() {
        for vlan in [false, true] {
            let f = ipv4_frame(CLIENT_MAC, SERVER_MAC, CLIENT_IP, SERVER_IP, vlan, 1514);
            let want = Frame::Ipv4 {
                src_mac: CLIENT_MAC,
                dst_mac: SERVER_MAC,
                src_ip: CLIENT_IP,
                dst_ip: SERVER_IP,
            };
            assert_eq!(parse(&f), Some(want));
            assert_eq!(tag_in_frame(&f), if vlan { 5 } else { 0 });
            // Truncated to the snap length: still parses.
            assert_eq!(parse(&f[..96]), Some(want));
            // Shortest that still holds the destination address.
            let min = if vlan { 38 } else { 34 };
            assert_eq!(parse(&f[..min]), Some(want));
            assert_eq!(parse(&f[..min - 1]), None);
        }
    }

    #[test]
    fn an_8021ad_tag_is_not_a_vlan_of_ours() {
        let mut f = ipv4_frame(CLIENT_MAC, SERVER_MAC, CLIENT_IP, SERVER_IP, true, 100);
        f[12..14].copy_from_slice(&[0x88, 0xa8]);
        assert_eq!(tag_in_frame(&f), u16::MAX);
        assert_eq!(tag_in_frame(&f[..13]), 0);
    }

    #[test]
    fn ipv4_bad_version_or_ihl() {
        let mut f = ipv4_frame(CLIENT_MAC, SERVER_MAC, CLIENT_IP, SERVER_IP, false, 100);
        f[14] = 0x65; // version 6, ihl 5
        assert_eq!(parse(&f), None);
        f[14] = 0x44; // version 4, ihl 4
        assert_eq!(parse(&f), None);
        f[14] = 0x4f; // version 4, ihl 15 (options cut off by the snap: fine)
        assert!(parse(&f[..40]).is_some());
    }

    #[test]
    fn arp_request_and_reply() {
        let req = arp_frame(
            CLIENT_MAC,
            Mac::broadcast(),
            ArpOperations::Request.0,
            CLIENT_MAC,
            CLIENT_IP,
            Mac::zero(),
            SERVER_IP,
            false,
        );
        assert_eq!(
            parse(&req),
            Some(Frame::Arp {
                eth_src: CLIENT_MAC,
                eth_dst: Mac(0xff, 0xff, 0xff, 0xff, 0xff, 0xff),
                op: 1,
                sha: CLIENT_MAC,
                spa: CLIENT_IP,
                tha: Mac(0, 0, 0, 0, 0, 0),
                tpa: SERVER_IP,
            })
        );
        let rep = arp_frame(
            SERVER_MAC, CLIENT_MAC, 2, SERVER_MAC, SERVER_IP, CLIENT_MAC, CLIENT_IP, true,
        );
        let Some(Frame::Arp { op, sha, tpa, .. }) = parse(&rep) else {
            panic!("tagged ARP reply not parsed");
        };
        assert_eq!((op, sha, tpa), (2, SERVER_MAC, CLIENT_IP));
        // The ARP body must be whole.
        assert!(parse(&rep[..18 + 28]).is_some());
        assert_eq!(parse(&rep[..18 + 27]), None);
    }

    #[test]
    fn arp_wrong_types_rejected() {
        let good = arp_frame(
            CLIENT_MAC,
            Mac::broadcast(),
            1,
            CLIENT_MAC,
            CLIENT_IP,
            Mac::zero(),
            SERVER_IP,
            false,
        );
        for (off, val) in [(14, 1u8), (15, 6), (16, 0x86), (18, 8), (19, 16)] {
            let mut f = good.clone();
            f[off] = val;
            assert_eq!(parse(&f), None, "byte {off} = {val}");
        }
    }

    /// An IPv6 frame: fixed header with next header `nh`, then `body`.
    fn ipv6_frame(nh: u8, src: Ipv6Addr, dst: Ipv6Addr, body: &[u8], vlan: bool) -> Vec<u8> {
        let mut ip = vec![0u8; 40];
        ip[0] = 0x60;
        ip[4..6].copy_from_slice(&(body.len() as u16).to_be_bytes());
        ip[6] = nh;
        ip[7] = 255;
        ip[8..24].copy_from_slice(&src.octets());
        ip[24..40].copy_from_slice(&dst.octets());
        ip.extend_from_slice(body);
        ethernet(CLIENT_MAC, SERVER_MAC, EtherTypes::Ipv6, vlan, &ip, 0)
    }

    const C6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0x77, 0, 0, 0, 0, 0x11);
    const S6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0x77, 0, 0, 0, 0, 1);

    /// An NS/NA body: type, code 0, checksum 0, flags, target, then `opts`.
    fn nd_body(ty: u8, flags: u8, target: Ipv6Addr, opts: &[u8]) -> Vec<u8> {
        let mut b = vec![ty, 0, 0, 0, flags, 0, 0, 0];
        b.extend_from_slice(&target.octets());
        b.extend_from_slice(opts);
        b
    }

    #[test]
    fn ipv6_plain_and_tagged() {
        for vlan in [false, true] {
            let f = ipv6_frame(6, C6, S6, &[0; 20], vlan);
            let want = Frame::Ipv6 {
                src_mac: CLIENT_MAC,
                dst_mac: SERVER_MAC,
                src_ip: C6,
                dst_ip: S6,
            };
            assert_eq!(parse(&f), Some(want));
            let hdr = if vlan { 58 } else { 54 };
            assert_eq!(parse(&f[..hdr]), Some(want), "the fixed header suffices");
            assert_eq!(parse(&f[..hdr - 1]), None);
            // ICMPv6 that is not ND, and an NS cut before its target: plain IPv6.
            assert_eq!(
                parse(&ipv6_frame(58, C6, S6, &[128, 0, 0, 0], vlan)),
                Some(want)
            );
            let ns = ipv6_frame(58, C6, S6, &nd_body(135, 0, S6, &[]), vlan);
            assert_eq!(parse(&ns[..hdr + 23]), Some(want));
        }
        let mut f = ipv6_frame(6, C6, S6, &[], false);
        f[14] = 0x40;
        assert_eq!(parse(&f), None, "version 4 under the IPv6 EtherType");
    }

    #[test]
    fn neighbor_solicitation_and_advertisement() {
        let sll = [1, 1, 2, 0xcc, 0, 0, 0, 9];
        let ns = ipv6_frame(58, C6, S6, &nd_body(135, 0xff, S6, &sll), false);
        assert_eq!(
            parse(&ns),
            Some(Frame::Nd {
                eth_src: CLIENT_MAC,
                eth_dst: SERVER_MAC,
                kind: NdKind::Ns,
                target: S6,
                src_ip: C6,
                dst_ip: S6,
                override_flag: false,
                lladdr: Some(CLIENT_MAC),
            })
        );
        // An NA: Override and Solicited; an unknown option before the target's link-layer one.
        let mut opts = vec![14, 1, 0, 0, 0, 0, 0, 0];
        opts.extend_from_slice(&[2, 1, 2, 0xaa, 0, 0, 0, 1]);
        for vlan in [false, true] {
            let na = ipv6_frame(58, S6, C6, &nd_body(136, 0x60, S6, &opts), vlan);
            let Some(Frame::Nd {
                kind,
                target,
                override_flag,
                lladdr,
                ..
            }) = parse(&na)
            else {
                panic!("NA not parsed");
            };
            assert_eq!((kind, target), (NdKind::Na, S6));
            assert!(override_flag);
            assert_eq!(lladdr, Some(SERVER_MAC));
            // Cut inside the option: no lladdr, still an NA.
            let cut = na.len() - 3;
            assert!(matches!(
                parse(&na[..cut]),
                Some(Frame::Nd { lladdr: None, .. })
            ));
        }
        // Without Override; a source link-layer option in an NA is not its lladdr.
        let na = ipv6_frame(58, S6, C6, &nd_body(136, 0x40, S6, &sll), false);
        assert!(matches!(
            parse(&na),
            Some(Frame::Nd {
                override_flag: false,
                lladdr: None,
                ..
            })
        ));
        // A zero-length option ends the walk (RFC 4861: such a packet is invalid).
        let na = ipv6_frame(
            58,
            S6,
            C6,
            &nd_body(136, 0x20, S6, &[2, 0, 1, 2, 3, 4, 5, 6]),
            false,
        );
        assert!(matches!(parse(&na), Some(Frame::Nd { lladdr: None, .. })));
    }

    #[test]
    fn other_and_runt_frames() {
        let v6 = ethernet(
            CLIENT_MAC,
            SERVER_MAC,
            EtherTypes::Ipv6,
            false,
            &[0x50; 40],
            100,
        );
        assert_eq!(parse(&v6), None, "IPv6 EtherType, version 5");
        // Double tag: only one is looked through.
        let mut qinq = ipv4_frame(CLIENT_MAC, SERVER_MAC, CLIENT_IP, SERVER_IP, true, 100);
        qinq[16..18].copy_from_slice(&[0x81, 0x00]);
        assert_eq!(parse(&qinq), None);
        for n in 0..20 {
            assert_eq!(parse(&vec![0u8; n]), None);
        }
        let f = ipv4_frame(CLIENT_MAC, SERVER_MAC, CLIENT_IP, SERVER_IP, true, 100);
        for n in 0..38 {
            assert_eq!(parse(&f[..n]), None, "{n} bytes");
        }
    }
}
