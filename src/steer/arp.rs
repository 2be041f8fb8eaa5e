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

#[cfg(test)]
mod tests {
    use super::*;
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
