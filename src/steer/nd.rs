//! The IPv6 counterpart of the ARP update: an unsolicited Neighbor Advertisement with the
//! Override flag set, carrying the chosen port's MAC. Built with pnet's packet types.

use std::net::Ipv6Addr;

use pnet_packet::ethernet::{EtherTypes, MutableEthernetPacket};
use pnet_packet::icmpv6::ndp::{
    MutableNdpOptionPacket, MutableNeighborAdvertPacket, NdpOptionTypes, NeighborAdvertFlags,
};
use pnet_packet::icmpv6::{checksum, Icmpv6Code, Icmpv6Packet, Icmpv6Types};
use pnet_packet::ip::IpNextHeaderProtocols;
use pnet_packet::ipv6::MutableIpv6Packet;

use super::arp::Mac;

const ETH_HDR: usize = 14;
const IPV6_HDR: usize = 40;
/// ICMPv6 NA header with its target (24) + one Target Link-Layer Address option (8).
const NA_LEN: usize = 32;
/// The whole frame: 86 bytes, above Ethernet's minimum, so no padding.
pub const NA_FRAME: usize = ETH_HDR + IPV6_HDR + NA_LEN;

/// The update that moves `client` (MAC `client_mac`, address `client_ip`) to the port with MAC
/// `port_mac` for the server's `server_ip`: an unsolicited NA (Override = 1, Solicited = 0,
/// Router = 0, hop limit 255) for target `server_ip` with `port_mac` as the Target Link-Layer
/// Address, unicast to the client from the port. A Linux client takes it for an existing entry
/// at once (Override), whatever its state.
pub fn neighbor_advertisement(
    client_mac: Mac,
    client_ip: Ipv6Addr,
    port_mac: Mac,
    server_ip: Ipv6Addr,
) -> [u8; NA_FRAME] {
    let mut buf = [0u8; NA_FRAME];
    {
        let mut eth = MutableEthernetPacket::new(&mut buf[..]).expect("room for Ethernet");
        eth.set_destination(client_mac);
        eth.set_source(port_mac);
        eth.set_ethertype(EtherTypes::Ipv6);
    }
    {
        let mut ip =
            MutableIpv6Packet::new(&mut buf[ETH_HDR..ETH_HDR + IPV6_HDR]).expect("room for IPv6");
        ip.set_version(6);
        ip.set_traffic_class(0);
        ip.set_flow_label(0);
        ip.set_payload_length(NA_LEN as u16);
        ip.set_next_header(IpNextHeaderProtocols::Icmpv6);
        ip.set_hop_limit(255);
        ip.set_source(server_ip);
        ip.set_destination(client_ip);
    }
    let icmp = &mut buf[ETH_HDR + IPV6_HDR..];
    {
        let mut na = MutableNeighborAdvertPacket::new(&mut icmp[..]).expect("room for the NA");
        na.set_icmpv6_type(Icmpv6Types::NeighborAdvert);
        na.set_icmpv6_code(Icmpv6Code(0));
        na.set_flags(NeighborAdvertFlags::Override);
        na.set_reserved(0);
        na.set_target_addr(server_ip);
    }
    {
        let mut opt =
            MutableNdpOptionPacket::new(&mut icmp[24..]).expect("room for the TLLA option");
        opt.set_option_type(NdpOptionTypes::TargetLLAddr);
        opt.set_length(1);
        opt.set_data(&port_mac.octets());
    }
    let sum = checksum(
        &Icmpv6Packet::new(&icmp[..]).expect("room for ICMPv6"),
        &server_ip,
        &client_ip,
    );
    icmp[2..4].copy_from_slice(&sum.to_be_bytes());
    buf
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::frame::NdKind;
    use crate::capture::{parse, Frame};

    const CLIENT: Mac = Mac(0x02, 0, 0, 0, 0, 0x0b);
    const PORT: Mac = Mac(0x02, 0, 0, 0, 1, 0x01);

    /// RFC 1071 over the IPv6 pseudo-header and the ICMPv6 message, written out here so the
    /// test does not trust pnet's own checksum.
    fn ones_complement_sum(src: Ipv6Addr, dst: Ipv6Addr, icmp: &[u8]) -> u16 {
        let mut data = Vec::new();
        data.extend_from_slice(&src.octets());
        data.extend_from_slice(&dst.octets());
        data.extend_from_slice(&(icmp.len() as u32).to_be_bytes());
        data.extend_from_slice(&[0, 0, 0, 58]);
        data.extend_from_slice(icmp);
        if data.len() % 2 == 1 {
            data.push(0);
        }
        let mut sum: u32 = 0;
        for w in data.chunks(2) {
            sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
        }
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        sum as u16
    }

    #[test]
    fn na_is_unsolicited_override_with_the_ports_mac() {
        let server: Ipv6Addr = "2001:db8:77::1".parse().unwrap();
        let client: Ipv6Addr = "2001:db8:77::13".parse().unwrap();
        let f = neighbor_advertisement(CLIENT, client, PORT, server);
        assert_eq!(f.len(), 86);
        assert_eq!(
            parse(&f),
            Some(Frame::Nd {
                eth_src: PORT,
                eth_dst: CLIENT,
                kind: NdKind::Na,
                target: server,
                src_ip: server,
                dst_ip: client,
                override_flag: true,
                lladdr: Some(PORT),
            })
        );
        // IPv6: payload length 32, next header 58, hop limit 255.
        assert_eq!(&f[12..14], &[0x86, 0xdd]);
        assert_eq!(f[14] >> 4, 6);
        assert_eq!(&f[18..20], &[0, 32]);
        assert_eq!((f[20], f[21]), (58, 255));
        // ICMPv6: type 136 code 0.
        let icmp = &f[54..];
        assert_eq!((icmp[0], icmp[1]), (136, 0));
        assert_eq!(icmp[4], 0x20, "Override only: not Router, not Solicited");
        assert_eq!(&icmp[5..8], &[0, 0, 0]);
        assert_eq!(&icmp[8..24], &server.octets());
        assert_eq!(&icmp[24..26], &[2, 1], "Target Link-Layer Address, 8 bytes");
        assert_eq!(icmp[26..32], PORT.octets());
        // The checksum verifies: summing the message with its checksum in gives 0xffff.
        assert_eq!(ones_complement_sum(server, client, icmp), 0xffff);
        let mut zeroed = icmp.to_vec();
        zeroed[2..4].copy_from_slice(&[0, 0]);
        let want = !ones_complement_sum(server, client, &zeroed);
        assert_eq!(u16::from_be_bytes([icmp[2], icmp[3]]), want);
    }
}
