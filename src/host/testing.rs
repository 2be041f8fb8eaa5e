//! Builders for tests of the host view and the steering core: a bond with the server's
//! addresses and a confirmed client, as netlink events.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::config::Target;
use crate::host::HostView;
use crate::netlink::{
    AddrEntry, BondInfo, BondMode, LinkInfo, LinkKind, NeighEntry, NlEvent, VlanInfo,
};
use crate::Mac;

pub const BOND: u32 = 10;
/// bond0.100, an 802.1Q VLAN over the bond.
pub const VLAN_IF: u32 = 11;
pub const OTHER_IF: u32 = 99;
pub const CLIENT: Mac = Mac(2, 0, 0, 0, 0, 0xc1);
pub const SERVER: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
pub const SERVER2: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
pub const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 11);
pub const SERVER6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
pub const CLIENT6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0x11);

pub fn link(index: u32, name: &str, kind: Option<&str>) -> NlEvent {
    NlEvent::Link(LinkInfo {
        index,
        name: name.into(),
        mac: Some(Mac(2, 0, 0, 0, 1, index as u8)),
        admin_up: true,
        oper_up: true,
        kind: kind.map(LinkKind::from),
        bond: (kind == Some("bond")).then_some(BondInfo {
            mode: BondMode::BalanceAlb,
            all_slaves_active: None,
            arp_validate: None,
        }),
        ..LinkInfo::default()
    })
}

/// An 802.1Q VLAN `id` named `name` over `parent`.
pub fn vlan_link(index: u32, name: &str, parent: u32, id: u16) -> NlEvent {
    let NlEvent::Link(l) = link(index, name, Some("vlan")) else {
        unreachable!()
    };
    NlEvent::Link(LinkInfo {
        parent: Some(parent),
        vlan: Some(VlanInfo { id, ad: false }),
        ..l
    })
}

pub fn addr(ifindex: u32, net: &str) -> NlEvent {
    NlEvent::Addr(AddrEntry {
        ifindex,
        network: net.parse().unwrap(),
    })
}

pub fn neigh(ifindex: u32, ip: IpAddr, mac: Mac, state: u16) -> NlEvent {
    NlEvent::Neigh(NeighEntry {
        ifindex,
        ip,
        mac: Some(mac),
        state,
    })
}

/// A bond with 198.18.0.1/24 and 2001:db8::1/64, VLAN 100 over it (bond0.100) with
/// 198.18.100.1/24 and 2001:db8:100::1/64, an unrelated interface with 198.18.0.2/24, and the
/// client confirmed on the bond (untagged) for both families.
pub fn view() -> HostView {
    let mut v = HostView::new(Target::Bond("bond0".into()));
    for ev in [
        link(BOND, "bond0", Some("bond")),
        link(OTHER_IF, "eth9", None),
        vlan_link(VLAN_IF, "bond0.100", BOND, 100),
        addr(BOND, "198.18.0.1/24"),
        addr(BOND, "2001:db8::1/64"),
        addr(VLAN_IF, "198.18.100.1/24"),
        addr(VLAN_IF, "2001:db8:100::1/64"),
        addr(OTHER_IF, "198.18.0.2/24"),
        neigh(BOND, CLIENT_IP.into(), CLIENT, libc::NUD_REACHABLE),
        neigh(BOND, CLIENT6.into(), CLIENT, libc::NUD_STALE),
    ] {
        v.apply(&ev);
    }
    v
}
