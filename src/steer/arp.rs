//! The frames rlbd sends. Built with pnet's packet types, padded to Ethernet's 60-byte minimum
//! since AF_PACKET sends what it is given and not every driver pads.

use std::net::Ipv4Addr;

use pnet_packet::arp::{ArpHardwareTypes, ArpOperations, MutableArpPacket};
use pnet_packet::ethernet::{EtherType, EtherTypes, MutableEthernetPacket};

pub use crate::Mac;

const ETH_HDR: usize = 14;
const ARP_LEN: usize = 28;
/// Smallest Ethernet frame without its FCS.
pub const MIN_FRAME: usize = 60;
/// IEEE 802.3 "loopback" (configuration testing protocol), as the bonding driver's learning
/// frames use: every switch forwards it, no host stack acts on it.
const ETHERTYPE_LOOPBACK: u16 = 0x9000;

/// The update that moves `client` to the port with MAC `port_mac`: a unicast ARP reply in the
/// gratuitous form (sender IP = target IP = the server's, sender MAC = target MAC = the port's).
/// A Linux client takes the gratuitous form at once even inside its `locktime`, where an
/// ordinary reply that changes a fresh entry would be ignored.
pub fn steering_update(client: Mac, port_mac: Mac, server_ip: Ipv4Addr) -> [u8; MIN_FRAME] {
    let mut buf = [0u8; MIN_FRAME];
    {
        let mut eth =
            MutableEthernetPacket::new(&mut buf[..]).expect("60 bytes hold an Ethernet header");
        eth.set_destination(client);
        eth.set_source(port_mac);
        eth.set_ethertype(EtherTypes::Arp);
    }
    let mut arp = MutableArpPacket::new(&mut buf[ETH_HDR..ETH_HDR + ARP_LEN])
        .expect("28 bytes hold an ARP body");
    arp.set_hardware_type(ArpHardwareTypes::Ethernet);
    arp.set_protocol_type(EtherTypes::Ipv4);
    arp.set_hw_addr_len(6);
    arp.set_proto_addr_len(4);
    arp.set_operation(ArpOperations::Reply);
    arp.set_sender_hw_addr(port_mac);
    arp.set_sender_proto_addr(server_ip);
    arp.set_target_hw_addr(port_mac);
    arp.set_target_proto_addr(server_ip);
    buf
}

/// A frame whose only purpose is to have the switch learn `port_mac` on this port: sent from and
/// to the port's own MAC, so a switch that knows the MAC drops it at the same port.
pub fn learning_frame(port_mac: Mac) -> [u8; MIN_FRAME] {
    let mut buf = [0u8; MIN_FRAME];
    let mut eth =
        MutableEthernetPacket::new(&mut buf[..]).expect("60 bytes hold an Ethernet header");
    eth.set_destination(port_mac);
    eth.set_source(port_mac);
    eth.set_ethertype(EtherType(ETHERTYPE_LOOPBACK));
    buf
}

/// EtherType of RARP (RFC 903).
const ETHERTYPE_RARP: u16 = 0x8035;

/// The frame that tells the switches a guest's MAC now sits behind this port: a broadcast RARP
/// request ("reverse request", opcode 3) from the guest's MAC, as VMware's and QEMU's
/// announcements send. Broadcast, so every switch of the LAN learns it (a frame to the MAC
/// itself, as [`learning_frame`], updates only the first switch); RARP, so no host changes an
/// ARP cache on it (it carries no address); the copies the switch floods back to the bond's
/// other ports are dropped there as reflections of a local guest.
pub fn guest_announcement(guest: Mac) -> [u8; MIN_FRAME] {
    let mut buf = [0u8; MIN_FRAME];
    {
        let mut eth =
            MutableEthernetPacket::new(&mut buf[..]).expect("60 bytes hold an Ethernet header");
        eth.set_destination(Mac::broadcast());
        eth.set_source(guest);
        eth.set_ethertype(EtherType(ETHERTYPE_RARP));
    }
    let mut arp = MutableArpPacket::new(&mut buf[ETH_HDR..ETH_HDR + ARP_LEN])
        .expect("28 bytes hold an ARP body");
    arp.set_hardware_type(ArpHardwareTypes::Ethernet);
    arp.set_protocol_type(EtherTypes::Ipv4);
    arp.set_hw_addr_len(6);
    arp.set_proto_addr_len(4);
    arp.set_operation(pnet_packet::arp::ArpOperation(3));
    arp.set_sender_hw_addr(guest);
    arp.set_sender_proto_addr(Ipv4Addr::UNSPECIFIED);
    arp.set_target_hw_addr(guest);
    arp.set_target_proto_addr(Ipv4Addr::UNSPECIFIED);
    buf
}

/// TPID of an 802.1Q tag.
const TPID_8021Q: [u8; 2] = [0x81, 0x00];

/// `frame` as it must leave a bond's port toward a client on VLAN `vlan`: with an 802.1Q tag
/// (priority 0) after the MAC addresses, padded so the frame is still Ethernet's minimum once a
/// switch strips the tag. Untouched for VLAN 0. AF_PACKET sends exactly these bytes: a VLAN
/// device's tagging is not in the path of a frame sent on a slave.
pub fn tagged(frame: &[u8], vlan: u16) -> Vec<u8> {
    if vlan == 0 || frame.len() < 12 {
        return frame.to_vec();
    }
    let mut out = Vec::with_capacity(frame.len().max(MIN_FRAME) + 4);
    out.extend_from_slice(&frame[..12]);
    out.extend_from_slice(&TPID_8021Q);
    out.extend_from_slice(&(vlan & 0x0fff).to_be_bytes());
    out.extend_from_slice(&frame[12..]);
    if out.len() < MIN_FRAME + 4 {
        out.resize(MIN_FRAME + 4, 0);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guest_announcement_is_a_broadcast_rarp_from_the_guest() {
        let guest = Mac(2, 0, 0, 0, 0, 0x51);
        let f = guest_announcement(guest);
        assert_eq!(&f[0..6], &[0xff; 6]);
        assert_eq!(&f[6..12], &guest.octets());
        assert_eq!(&f[12..14], &[0x80, 0x35]);
        assert_eq!(&f[20..22], &[0, 3], "opcode: reverse request");
        assert_eq!(&f[22..28], &guest.octets());
        assert_eq!(&f[32..38], &guest.octets());
        assert_eq!(&f[28..32], &[0; 4]);
        let t = tagged(&f, 100);
        assert_eq!(&t[12..18], &[0x81, 0x00, 0x00, 100, 0x80, 0x35]);
    }

    #[test]
    fn a_tag_goes_after_the_addresses_and_the_frame_stays_parseable() {
        let client = Mac(2, 0, 0, 0, 0, 0xc1);
        let port = Mac(2, 0, 0, 0, 1, 1);
        let ip = Ipv4Addr::new(198, 18, 100, 1);
        let plain = steering_update(client, port, ip);
        assert_eq!(tagged(&plain, 0), plain.to_vec());
        let t = tagged(&plain, 100);
        assert_eq!(t.len(), MIN_FRAME + 4);
        assert_eq!(&t[12..16], &[0x81, 0x00, 0x00, 100]);
        assert_eq!(&t[16..16 + 30], &plain[12..42]);
        match crate::capture::frame::parse(&t) {
            Some(crate::capture::frame::Frame::Arp {
                sha, spa, eth_dst, ..
            }) => {
                assert_eq!((sha, spa, eth_dst), (port, ip, client));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(&tagged(&plain, 4095)[14..16], &[0x0f, 0xff]);
    }
    use crate::capture::{parse, Frame};

    const CLIENT: Mac = Mac(0x02, 0, 0, 0, 0, 0x0b);
    const PORT: Mac = Mac(0x02, 0, 0, 0, 1, 0x01);

    #[test]
    fn update_is_the_unicast_gratuitous_form() {
        let ip = Ipv4Addr::new(198, 18, 0, 1);
        let f = steering_update(CLIENT, PORT, ip);
        assert_eq!(f.len(), 60);
        match parse(&f) {
            Some(Frame::Arp {
                eth_src,
                eth_dst,
                op,
                sha,
                spa,
                tha,
                tpa,
            }) => {
                assert_eq!(
                    (eth_dst, eth_src),
                    (CLIENT, PORT),
                    "unicast to the client, from the port"
                );
                assert_eq!(op, 2, "a reply");
                assert_eq!((sha, tha), (PORT, PORT), "sender MAC = target MAC");
                assert_eq!((spa, tpa), (ip, ip), "sender IP = target IP");
            }
            other => panic!("not an ARP frame: {other:?}"),
        }
        assert!(f[42..].iter().all(|b| *b == 0), "padding is zero");
    }

    #[test]
    fn learning_frame_is_from_and_to_the_port() {
        let f = learning_frame(PORT);
        assert_eq!(f[0..6], PORT.octets());
        assert_eq!(f[6..12], PORT.octets());
        assert_eq!(&f[12..14], &[0x90, 0x00]);
        assert!(parse(&f).is_none(), "not IPv4 nor ARP: no host acts on it");
    }
}
