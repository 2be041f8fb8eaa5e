//! Tests of `frame.rs`, and the frame builders other capture tests share.

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
