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
pub(crate) mod tests;
