//! Tests of `fdb`: messages built with the crate's emitters, as the kernel's bridge and
//! `ndo_dflt_fdb_dump` fill them, and malformed input.

use super::*;
use crate::netlink::event::{route_event, NlEvent};
use crate::netlink::neigh::parse_neigh;
use netlink_packet_core::Emitable;
use netlink_packet_route::neighbour::{NeighbourAddress, NeighbourMessage, NeighbourState};
use std::net::Ipv4Addr;

const BR: u32 = 5;
const PORT: u32 = 7;
const GUEST: Mac = Mac(0x52, 0x54, 0, 0x12, 0x34, 0x56);

const RTM_NEWNEIGH: u16 = 28;
const RTM_DELNEIGH: u16 = 29;

fn emit(msg: &NeighbourMessage) -> Vec<u8> {
    let mut buf = vec![0u8; msg.buffer_len()];
    msg.emit(&mut buf);
    buf
}

/// An entry as the bridge's `fdb_fill_info` sends it.
fn bridge_msg(port: u32, state: NeighbourState, vlan: Option<u16>) -> NeighbourMessage {
    let mut msg = NeighbourMessage::default();
    msg.header.family = AddressFamily::Bridge;
    msg.header.ifindex = port;
    msg.header.state = state;
    msg.attributes = vec![
        NeighbourAttribute::LinkLayerAddress(GUEST.octets().to_vec()),
        NeighbourAttribute::Controller(BR),
    ];
    msg.attributes.extend(vlan.map(NeighbourAttribute::Vlan));
    msg
}

fn parse_ok(msg: &NeighbourMessage) -> FdbEntry {
    parse_fdb(&emit(msg)).expect("parses").expect("is an entry")
}

#[test]
fn learned_entry_behind_a_port() {
    let e = parse_ok(&bridge_msg(PORT, NeighbourState::Reachable, None));
    assert_eq!(
        e,
        FdbEntry {
            ifindex: PORT,
            master: Some(BR),
            mac: GUEST,
            vlan: 0,
            kind: FdbKind::Learned,
            ext_learned: false,
            own: false,
            state: libc::NUD_REACHABLE,
            flags: 0,
        }
    );
    assert_eq!(e.bridge(), Some(BR));
    assert!(e.is_learned_on_port());
    // Aged but not yet collected: still learned.
    let stale = parse_ok(&bridge_msg(PORT, NeighbourState::Stale, Some(100)));
    assert_eq!((stale.kind, stale.vlan), (FdbKind::Learned, 100));
}

#[test]
fn local_static_and_externally_learned() {
    let local = parse_ok(&bridge_msg(PORT, NeighbourState::Permanent, Some(1)));
    assert_eq!((local.kind, local.vlan), (FdbKind::Local, 1));
    assert!(!local.is_learned_on_port());
    // The bridge's own address: the bridge is its own "port".
    let own_mac = parse_ok(&bridge_msg(BR, NeighbourState::Permanent, None));
    assert_eq!((own_mac.ifindex, own_mac.bridge()), (BR, Some(BR)));

    let stat = parse_ok(&bridge_msg(PORT, NeighbourState::Noarp, None));
    assert_eq!(stat.kind, FdbKind::Static);
    assert!(!stat.is_learned_on_port());

    let mut msg = bridge_msg(PORT, NeighbourState::Reachable, None);
    msg.header.flags = NeighbourFlags::ExtLearned | NeighbourFlags::Offloaded;
    let ext = parse_ok(&msg);
    assert!(ext.ext_learned && !ext.own);
    assert_eq!(ext.kind, FdbKind::Learned);
    assert_eq!(
        ext.flags,
        (NeighbourFlags::ExtLearned | NeighbourFlags::Offloaded).bits()
    );
}

#[test]
fn a_devices_own_entry_is_not_the_bridges() {
    // `ndo_dflt_fdb_dump`: NTF_SELF, PERMANENT, no NDA_MASTER (a port's multicast filter).
    let mut msg = NeighbourMessage::default();
    msg.header.family = AddressFamily::Bridge;
    msg.header.ifindex = PORT;
    msg.header.state = NeighbourState::Permanent;
    msg.header.flags = NeighbourFlags::Own;
    msg.attributes = vec![NeighbourAttribute::LinkLayerAddress(vec![
        0x33, 0x33, 0, 0, 0, 1,
    ])];
    let e = parse_ok(&msg);
    assert!(e.own);
    assert_eq!((e.master, e.bridge()), (None, None));
    assert_eq!(e.kind, FdbKind::Local);
    assert!(!e.is_learned_on_port());
    assert_eq!(
        e.key(),
        FdbKey {
            table: PORT,
            own: true,
            mac: Mac(0x33, 0x33, 0, 0, 0, 1),
            vlan: 0
        }
    );
}

/// A device's own entry as `ndo_dflt_fdb_dump` fills it: NTF_SELF, PERMANENT, no NDA_MASTER.
fn own_msg(dev: u32, mac: Mac) -> NeighbourMessage {
    let mut msg = NeighbourMessage::default();
    msg.header.family = AddressFamily::Bridge;
    msg.header.ifindex = dev;
    msg.header.state = NeighbourState::Permanent;
    msg.header.flags = NeighbourFlags::Own;
    msg.attributes = vec![NeighbourAttribute::LinkLayerAddress(mac.octets().to_vec())];
    msg
}

#[test]
fn a_macvlans_mac_on_its_lower_devices_list_is_an_own_unicast_entry() {
    let e = parse_ok(&own_msg(PORT, GUEST));
    assert!(e.is_own_unicast(), "{e:?}");
    assert_eq!((e.ifindex, e.bridge()), (PORT, None));
    // The multicast filter's entries, the all-zero address, and a bridge's own permanent
    // entry (not NTF_SELF) are not.
    for mac in [
        Mac(0x33, 0x33, 0, 0, 0, 1),
        Mac(1, 0, 0x5e, 0, 0, 1),
        Mac(0, 0, 0, 0, 0, 0),
    ] {
        assert!(!parse_ok(&own_msg(PORT, mac)).is_own_unicast(), "{mac}");
    }
    assert!(!parse_ok(&bridge_msg(PORT, NeighbourState::Permanent, None)).is_own_unicast());
    // An address added by hand to a device's list as static (NOARP only) is not a permanent one.
    let mut msg = own_msg(PORT, GUEST);
    msg.header.state = NeighbourState::Noarp;
    assert!(!parse_ok(&msg).is_own_unicast());
}

#[test]
fn a_move_to_another_port_keeps_the_key() {
    let here = parse_ok(&bridge_msg(PORT, NeighbourState::Reachable, Some(100)));
    let there = parse_ok(&bridge_msg(PORT + 1, NeighbourState::Reachable, Some(100)));
    assert_eq!(here.key(), there.key());
    assert_eq!(here.key().table, BR);
    let other_vlan = parse_ok(&bridge_msg(PORT, NeighbourState::Reachable, Some(200)));
    assert_ne!(here.key(), other_vlan.key());
}

#[test]
fn vxlan_remotes_and_unknown_attributes_are_tolerated() {
    // A VXLAN's remote: NTF_SELF, an IPv4 NDA_DST, NDA_PORT, NDA_VNI beside the MAC.
    let mut msg = NeighbourMessage::default();
    msg.header.family = AddressFamily::Bridge;
    msg.header.ifindex = 9;
    msg.header.state = NeighbourState::Noarp;
    msg.header.flags = NeighbourFlags::Own;
    msg.attributes = vec![
        NeighbourAttribute::LinkLayerAddress(GUEST.octets().to_vec()),
        NeighbourAttribute::Destination(NeighbourAddress::Inet(Ipv4Addr::new(198, 18, 0, 9))),
        NeighbourAttribute::Port(4789),
        NeighbourAttribute::Vni(42),
    ];
    let e = parse_ok(&msg);
    assert_eq!((e.ifindex, e.mac, e.own), (9, GUEST, true));
    // And no MAC at all: nothing to report.
    msg.attributes.remove(0);
    assert_eq!(parse_fdb(&emit(&msg)).unwrap(), None);
}

#[test]
fn fdb_messages_are_not_neighbours_and_neighbours_not_fdb() {
    let fdb = emit(&bridge_msg(PORT, NeighbourState::Reachable, None));
    assert!(is_fdb(&fdb));
    assert_eq!(parse_neigh(&fdb).unwrap(), None);
    let e = parse_ok(&bridge_msg(PORT, NeighbourState::Reachable, None));
    assert_eq!(route_event(RTM_NEWNEIGH, &fdb), Some(NlEvent::Fdb(e)));
    assert_eq!(
        route_event(RTM_DELNEIGH, &fdb),
        Some(NlEvent::FdbRemoved(e))
    );

    let mut v4 = NeighbourMessage::default();
    v4.header.family = AddressFamily::Inet;
    v4.header.state = NeighbourState::Reachable;
    v4.attributes = vec![
        NeighbourAttribute::Destination(NeighbourAddress::Inet(Ipv4Addr::new(198, 18, 0, 2))),
        NeighbourAttribute::LinkLayerAddress(GUEST.octets().to_vec()),
    ];
    let v4 = emit(&v4);
    assert!(!is_fdb(&v4));
    assert_eq!(parse_fdb(&v4).unwrap(), None);
    assert!(matches!(
        route_event(RTM_NEWNEIGH, &v4),
        Some(NlEvent::Neigh(_))
    ));
}

#[test]
fn garbage_never_panics() {
    for len in 0..64 {
        let mut buf: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
        if let Some(b) = buf.first_mut() {
            *b = libc::AF_BRIDGE as u8;
        }
        let _ = parse_fdb(&buf);
        let _ = route_event(RTM_NEWNEIGH, &buf);
    }
    // A well-formed header, then attributes cut short anywhere.
    let full = emit(&bridge_msg(PORT, NeighbourState::Reachable, Some(100)));
    for cut in 0..full.len() {
        let _ = parse_fdb(&full[..cut]);
    }
}
