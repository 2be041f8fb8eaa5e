//! IPv6 Neighbor Discovery frames of the simulated LAN, as real bytes with their checksum: a
//! client's Neighbor Solicitation for the server's address, the server's answer, and the
//! server's own probe of a client.

use std::net::Ipv6Addr;

use crate::Mac;

/// The server's IPv6 address (on p0, /64).
pub const SERVER6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);

const ICMPV6_NS: u8 = 135;
const ICMPV6_NA: u8 = 136;
const OPT_SOURCE_LLADDR: u8 = 1;
const OPT_TARGET_LLADDR: u8 = 2;

/// The solicited-node multicast address of `ip` (RFC 4291 2.7.1).
pub fn solicited_node(ip: Ipv6Addr) -> Ipv6Addr {
    let o = ip.octets();
    Ipv6Addr::new(
        0xff02,
        0,
        0,
        0,
        0,
        1,
        0xff00 | u16::from(o[13]),
        u16::from_be_bytes([o[14], o[15]]),
    )
}

/// The Ethernet address of an IPv6 multicast address (RFC 2464 7).
pub fn multicast_mac(ip: Ipv6Addr) -> Mac {
    let o = ip.octets();
    Mac(0x33, 0x33, o[12], o[13], o[14], o[15])
}

/// A Neighbor Solicitation for `target`, with the sender's link-layer address.
pub fn ns_frame(eth_dst: Mac, src: (Mac, Ipv6Addr), dst_ip: Ipv6Addr, target: Ipv6Addr) -> Vec<u8> {
    nd_frame(
        eth_dst,
        src,
        dst_ip,
        ICMPV6_NS,
        0,
        target,
        OPT_SOURCE_LLADDR,
    )
}

/// A Neighbor Advertisement of `target` at the sender's MAC; `solicited` and `override_` are
/// its S and O flags.
pub fn na_frame(
    eth_dst: Mac,
    src: (Mac, Ipv6Addr),
    dst_ip: Ipv6Addr,
    target: Ipv6Addr,
    solicited: bool,
    override_: bool,
) -> Vec<u8> {
    let flags = if solicited { 0x40 } else { 0 } | if override_ { 0x20 } else { 0 };
    nd_frame(
        eth_dst,
        src,
        dst_ip,
        ICMPV6_NA,
        flags,
        target,
        OPT_TARGET_LLADDR,
    )
}

fn nd_frame(
    eth_dst: Mac,
    (src_mac, src_ip): (Mac, Ipv6Addr),
    dst_ip: Ipv6Addr,
    kind: u8,
    flags: u8,
    target: Ipv6Addr,
    option: u8,
) -> Vec<u8> {
    let mut icmp = vec![kind, 0, 0, 0, flags, 0, 0, 0];
    icmp.extend_from_slice(&target.octets());
    icmp.extend_from_slice(&[option, 1]);
    icmp.extend_from_slice(&src_mac.octets());
    let sum = checksum(src_ip, dst_ip, &icmp);
    icmp[2..4].copy_from_slice(&sum.to_be_bytes());
    let mut f = Vec::with_capacity(14 + 40 + icmp.len());
    f.extend_from_slice(&eth_dst.octets());
    f.extend_from_slice(&src_mac.octets());
    f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
    f.extend_from_slice(&(icmp.len() as u16).to_be_bytes());
    f.extend_from_slice(&[58, 255]);
    f.extend_from_slice(&src_ip.octets());
    f.extend_from_slice(&dst_ip.octets());
    f.extend_from_slice(&icmp);
    f
}

/// ICMPv6's checksum over the pseudo-header and the message (RFC 4443 2.3).
fn checksum(src: Ipv6Addr, dst: Ipv6Addr, icmp: &[u8]) -> u16 {
    let mut bytes = Vec::with_capacity(40 + icmp.len());
    bytes.extend_from_slice(&src.octets());
    bytes.extend_from_slice(&dst.octets());
    bytes.extend_from_slice(&(icmp.len() as u32).to_be_bytes());
    bytes.extend_from_slice(&[0, 0, 0, 58]);
    bytes.extend_from_slice(icmp);
    let mut sum: u32 = bytes
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}
