//! Tests of `link.rs`: messages built with the crate's types and by hand, malformed input.

use super::*;
use netlink_packet_core::Emitable;
use netlink_packet_route::link::{
    BondAllPortActive, BondPortState, InfoBond, InfoBondPort, InfoBridge, InfoData, InfoKind,
    InfoPortData, InfoPortKind, InfoVlan, LinkInfo as NlLinkInfo, LinkMessage, Stats64,
    VlanProtocol,
};

fn emit(msg: &LinkMessage) -> Vec<u8> {
    let mut buf = vec![0u8; msg.buffer_len()];
    msg.emit(&mut buf);
    buf
}

fn parse_ok(buf: &[u8]) -> LinkInfo {
    match parse_link(buf).expect("parses") {
        LinkMsg::Link(info) => info,
        LinkMsg::Ignored => panic!("message was ignored"),
    }
}

/// Appends one netlink attribute (header, value, padding to 4 bytes).
fn nla(out: &mut Vec<u8>, kind: u16, value: &[u8]) {
    let len = 4 + value.len();
    out.extend_from_slice(&(len as u16).to_ne_bytes());
    out.extend_from_slice(&kind.to_ne_bytes());
    out.extend_from_slice(value);
    out.resize(out.len().next_multiple_of(4), 0);
}

#[test]
fn counter_delta_forward_and_backward() {
    assert_eq!(counter_delta(100, 250), Some(150));
    assert_eq!(counter_delta(7, 7), Some(0));
    assert_eq!(counter_delta(0, u64::MAX), Some(u64::MAX));
    assert_eq!(
        counter_delta(250, 100),
        None,
        "reset must not look like a spike"
    );
    assert_eq!(
        counter_delta(u64::from(u32::MAX) - 5, 10),
        None,
        "32-bit wrap"
    );
}

#[test]
fn plain_link_with_stats() {
    let mut msg = LinkMessage::default();
    msg.header.index = 7;
    msg.header.flags = LinkFlags::Up | LinkFlags::LowerUp;
    let mut stats = Stats64::default();
    stats.rx_bytes = 123_456;
    stats.rx_packets = 789;
    msg.attributes = vec![
        LinkAttribute::IfName("eth7".into()),
        LinkAttribute::Address(vec![2, 0, 0, 0, 0, 7]),
        LinkAttribute::OperState(State::Up),
        LinkAttribute::Controller(3),
        LinkAttribute::Stats64(stats),
        LinkAttribute::CarrierChanges(4),
        LinkAttribute::Mtu(1500),
        LinkAttribute::LinkInfo(vec![NlLinkInfo::Kind(InfoKind::Veth)]),
    ];
    let info = parse_ok(&emit(&msg));
    assert_eq!(info.index, 7);
    assert_eq!(info.name, "eth7");
    assert_eq!(info.mac, Some(Mac(2, 0, 0, 0, 0, 7)));
    assert!(info.admin_up);
    assert!(info.oper_up);
    assert_eq!(info.master, Some(3));
    assert_eq!(info.kind.as_ref().map(LinkKind::as_str), Some("veth"));
    assert_eq!(info.rx_bytes, Some(123_456));
    assert_eq!(info.rx_packets, Some(789));
    assert_eq!(info.carrier_changes, Some(4));
    assert_eq!(info.bond, None);
}

#[test]
fn operstate_decides_over_lower_up_flag() {
    let mut msg = LinkMessage::default();
    msg.header.flags = LinkFlags::Up | LinkFlags::LowerUp;
    msg.attributes = vec![LinkAttribute::OperState(State::LowerLayerDown)];
    assert!(!parse_ok(&emit(&msg)).oper_up);

    msg.attributes = vec![LinkAttribute::OperState(State::Unknown)];
    assert!(
        parse_ok(&emit(&msg)).oper_up,
        "UNKNOWN falls back to IFF_LOWER_UP"
    );

    msg.header.flags = LinkFlags::Up;
    assert!(!parse_ok(&emit(&msg)).oper_up);
    msg.attributes.clear();
    let info = parse_ok(&emit(&msg));
    assert!(!info.oper_up);
    assert!(info.admin_up);
    assert_eq!(info.rx_bytes, None);
}

#[test]
fn bond_master_info_from_crate_types() {
    let mut msg = LinkMessage::default();
    msg.header.index = 10;
    msg.attributes = vec![
        LinkAttribute::IfName("bond0".into()),
        LinkAttribute::LinkInfo(vec![
            NlLinkInfo::Kind(InfoKind::Bond),
            NlLinkInfo::Data(InfoData::Bond(vec![
                InfoBond::Mode(BondMode::BalanceAlb),
                InfoBond::ActivePort(11),
                InfoBond::MiiMon(100),
                InfoBond::UpDelay(0),
                InfoBond::AllPortsActive(BondAllPortActive::Dropped),
            ])),
        ]),
    ];
    let info = parse_ok(&emit(&msg));
    assert_eq!(info.kind.as_ref().map(LinkKind::as_str), Some("bond"));
    assert_eq!(
        info.bond,
        Some(BondInfo {
            mode: BondMode::BalanceAlb,
            all_slaves_active: Some(false),
            arp_validate: None,
        })
    );
}

#[test]
fn bond_slave_is_known_by_its_master_not_its_kind() {
    let mut msg = LinkMessage::default();
    msg.header.index = 11;
    msg.attributes = vec![
        LinkAttribute::IfName("eth0".into()),
        LinkAttribute::Address(vec![2, 0, 0, 0, 0, 10]),
        LinkAttribute::Controller(10),
        LinkAttribute::LinkInfo(vec![
            NlLinkInfo::PortKind(InfoPortKind::Bond),
            NlLinkInfo::PortData(InfoPortData::BondPort(vec![
                InfoBondPort::BondPortState(BondPortState::Backup),
                InfoBondPort::PermHwaddr(vec![2, 0, 0, 0, 0, 11]),
            ])),
        ]),
    ];
    let info = parse_ok(&emit(&msg));
    assert_eq!(info.kind, None, "a slave NIC has only a slave kind");
    assert_eq!(info.master, Some(10));
    assert_eq!(info.mac, Some(Mac(2, 0, 0, 0, 0, 10)));
}

/// An IFLA_LINKINFO nest for a balance-alb bond, built byte by byte as the kernel lays it out,
/// with IFLA_BOND_MIIMON given a 2-byte value that the crate rejects.
fn hand_built_bond_linkinfo(miimon: &[u8]) -> Vec<u8> {
    // Options rlbd does not read, but the crate validates.
    const IFLA_BOND_ACTIVE_SLAVE: u16 = 2;
    const IFLA_BOND_MIIMON: u16 = 3;
    let mut data = Vec::new();
    nla(&mut data, IFLA_BOND_MODE, &[6]);
    nla(&mut data, IFLA_BOND_ACTIVE_SLAVE, &4u32.to_ne_bytes());
    nla(&mut data, IFLA_BOND_MIIMON, miimon);
    nla(&mut data, IFLA_BOND_ALL_SLAVES_ACTIVE, &[1]);
    // Never set on an alb bond by today's kernels, but read when there (3: all).
    nla(&mut data, IFLA_BOND_ARP_VALIDATE, &3u32.to_ne_bytes());
    nla(&mut data, 999, &[1, 2, 3]); // unknown to everyone
    let mut nest = Vec::new();
    nla(&mut nest, IFLA_INFO_KIND, b"bond\0");
    nla(
        &mut nest,
        IFLA_INFO_DATA | netlink_packet_core::NLA_F_NESTED,
        &data,
    );
    nest
}

fn ifinfomsg_with(index: u32, attrs: &[u8]) -> Vec<u8> {
    let mut buf = vec![0u8; IFINFOMSG_LEN];
    buf[4..8].copy_from_slice(&index.to_ne_bytes());
    buf.extend_from_slice(attrs);
    buf
}

#[test]
fn bond_master_info_from_hand_built_bytes() {
    let mut attrs = Vec::new();
    nla(&mut attrs, IFLA_IFNAME, b"bond0\0");
    nla(
        &mut attrs,
        IFLA_LINKINFO,
        &hand_built_bond_linkinfo(&100u32.to_ne_bytes()),
    );
    let info = parse_ok(&ifinfomsg_with(5, &attrs));
    assert_eq!(info.index, 5);
    assert_eq!(info.name, "bond0");
    assert_eq!(info.kind.as_ref().map(LinkKind::as_str), Some("bond"));
    assert_eq!(
        info.bond,
        Some(BondInfo {
            mode: BondMode::BalanceAlb,
            all_slaves_active: Some(true),
            arp_validate: Some(3),
        })
    );
}

#[test]
fn a_bond_option_the_crate_rejects_costs_nothing() {
    let mut attrs = Vec::new();
    nla(&mut attrs, IFLA_IFNAME, b"bond0\0");
    nla(
        &mut attrs,
        IFLA_LINKINFO,
        &hand_built_bond_linkinfo(&[100, 0]),
    );
    // The crate alone refuses the nest, and with it the whole message.
    assert!(
        <netlink_packet_route::link::LinkMessage as netlink_packet_core::Parseable<[u8]>>::parse(
            &ifinfomsg_with(5, &attrs)
        )
        .is_err()
    );
    let info = parse_ok(&ifinfomsg_with(5, &attrs));
    assert_eq!(info.kind.as_ref().map(LinkKind::as_str), Some("bond"));
    let bond = info.bond.expect("bond info decoded by hand");
    assert_eq!(bond.mode, BondMode::BalanceAlb);
    assert_eq!(bond.all_slaves_active, Some(true));
}

/// The nest the fuzzer found: a bareudp link whose IFLA_BAREUDP_SRCPORT_MIN is 4 bytes, not 2.
/// The crate's parser panics on it (copy_from_slice of a wrong length); the link must still be
/// read, name and all.
#[test]
fn a_short_or_long_value_in_another_kinds_data_is_not_a_panic() {
    const IFLA_BAREUDP_SRCPORT_MIN: u16 = 3;
    let mut data = Vec::new();
    nla(&mut data, IFLA_BAREUDP_SRCPORT_MIN, &[0, 0, 1, 0]);
    let mut nest = Vec::new();
    nla(&mut nest, IFLA_INFO_KIND, b"bareudp\0");
    nla(
        &mut nest,
        IFLA_INFO_DATA | netlink_packet_core::NLA_F_NESTED,
        &data,
    );
    let mut attrs = Vec::new();
    nla(&mut attrs, IFLA_IFNAME, b"bareudp0\0");
    nla(&mut attrs, IFLA_LINKINFO, &nest);
    nla(&mut attrs, IFLA_MASTER, &7u32.to_ne_bytes());
    let info = parse_ok(&ifinfomsg_with(9, &attrs));
    assert_eq!(info.name, "bareudp0");
    assert_eq!(info.kind.as_ref().map(LinkKind::as_str), Some("bareudp"));
    assert_eq!((info.bond, info.vlan), (None, None));
    assert_eq!(info.master, Some(7), "attributes after the nest are read");
}

#[test]
fn bad_attribute_is_skipped_not_fatal() {
    let mut attrs = Vec::new();
    nla(&mut attrs, IFLA_IFNAME, b"eth0\0");
    nla(&mut attrs, IFLA_MASTER, &[1]); // a u32 attribute one byte long
    nla(&mut attrs, IFLA_ADDRESS, &[2, 0, 0, 0, 0, 1]);
    let info = parse_ok(&ifinfomsg_with(2, &attrs));
    assert_eq!(info.name, "eth0");
    assert_eq!(info.master, None);
    assert_eq!(info.mac, Some(Mac(2, 0, 0, 0, 0, 1)));
}

#[test]
fn truncated_attribute_list_keeps_what_came_before() {
    let mut attrs = Vec::new();
    nla(&mut attrs, IFLA_IFNAME, b"eth0\0");
    attrs.extend_from_slice(&[200, 0, 1, 0, 9]); // claims 200 bytes, has 5
    let info = parse_ok(&ifinfomsg_with(2, &attrs));
    assert_eq!(info.name, "eth0");
}

#[test]
fn garbage_never_panics() {
    for len in 0..64 {
        let buf: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
        let _ = parse_link(&buf);
    }
    assert!(parse_link(&[0; 8]).is_err(), "shorter than ifinfomsg");
}

#[test]
fn bridge_family_messages_are_ignored() {
    let mut buf = ifinfomsg_with(3, &[]);
    buf[0] = libc::AF_BRIDGE as u8;
    assert!(matches!(parse_link(&buf), Ok(LinkMsg::Ignored)));
}

#[test]
fn mac_needs_exactly_six_bytes() {
    assert_eq!(
        mac_from_slice(&[1, 2, 3, 4, 5, 6]),
        Some(Mac(1, 2, 3, 4, 5, 6))
    );
    assert_eq!(mac_from_slice(&[1, 2, 3, 4]), None);
    assert_eq!(
        mac_from_slice(&[0; 20]),
        None,
        "IPoIB-style addresses are not MACs"
    );
}

#[test]
fn a_vlan_names_its_parent_tag_and_protocol() {
    for (proto, ad) in [
        (VlanProtocol::Ieee8021Q, false),
        (VlanProtocol::Ieee8021Ad, true),
    ] {
        let mut msg = LinkMessage::default();
        msg.header.index = 12;
        msg.attributes = vec![
            LinkAttribute::IfName("bond0.100".into()),
            LinkAttribute::Link(4),
            LinkAttribute::LinkInfo(vec![
                NlLinkInfo::Kind(InfoKind::Vlan),
                NlLinkInfo::Data(InfoData::Vlan(vec![
                    InfoVlan::Id(100),
                    InfoVlan::Protocol(proto),
                ])),
            ]),
        ];
        let info = parse_ok(&emit(&msg));
        assert_eq!(info.parent, Some(4));
        assert_eq!(info.kind.as_ref().map(LinkKind::as_str), Some("vlan"));
        assert_eq!(info.vlan, Some(VlanInfo { id: 100, ad }));
    }
}

#[test]
fn a_device_that_is_its_own_link_has_no_parent() {
    let mut msg = LinkMessage::default();
    msg.header.index = 3;
    msg.attributes = vec![LinkAttribute::IfName("eth0".into()), LinkAttribute::Link(3)];
    assert_eq!(parse_ok(&emit(&msg)).parent, None);
}

#[test]
fn vlan_data_decoded_by_hand() {
    let mut data = Vec::new();
    nla(&mut data, IFLA_VLAN_ID, &200u16.to_ne_bytes());
    nla(&mut data, IFLA_VLAN_PROTOCOL, &0x88a8u16.to_be_bytes());
    let mut nest = Vec::new();
    nla(&mut nest, IFLA_INFO_KIND, b"vlan\0");
    nla(&mut nest, IFLA_INFO_DATA, &data);
    let mut info = LinkInfo::default();
    apply_link_info(&mut info, &nest);
    assert_eq!(info.vlan, Some(VlanInfo { id: 200, ad: true }));
    // Truncated: no id, no VLAN info (never a made-up tag).
    let mut nest = Vec::new();
    nla(&mut nest, IFLA_INFO_KIND, b"vlan\0");
    nla(&mut nest, IFLA_INFO_DATA, &[1, 0]);
    let mut info = LinkInfo::default();
    apply_link_info(&mut info, &nest);
    assert_eq!(info.vlan, None);
}

#[test]
fn a_bridge_says_whether_it_filters_vlans() {
    for filtering in [false, true] {
        let mut msg = LinkMessage::default();
        msg.header.index = 20;
        msg.attributes = vec![
            LinkAttribute::IfName("br0".into()),
            LinkAttribute::LinkInfo(vec![
                NlLinkInfo::Kind(InfoKind::Bridge),
                NlLinkInfo::Data(InfoData::Bridge(vec![
                    InfoBridge::AgeingTime(30_000),
                    InfoBridge::VlanFiltering(filtering),
                    InfoBridge::VlanDefaultPvid(1),
                    InfoBridge::GroupAddr([1, 0x80, 0xc2, 0, 0, 0]),
                ])),
            ]),
        ];
        let info = parse_ok(&emit(&msg));
        assert_eq!(info.kind.as_ref().map(LinkKind::as_str), Some("bridge"));
        assert_eq!(
            info.bridge,
            Some(BridgeInfo {
                vlan_filtering: filtering,
                default_pvid: Some(1),
                ageing_time_cs: Some(30_000),
            })
        );
    }
    // Without vlan_filtering nothing is claimed; another kind's data never fills it.
    let mut data = Vec::new();
    nla(&mut data, IFLA_BR_VLAN_DEFAULT_PVID, &[1]);
    for kind in [&b"bridge\0"[..], b"bond\0"] {
        let mut nest = Vec::new();
        nla(&mut nest, IFLA_INFO_KIND, kind);
        nla(&mut nest, IFLA_INFO_DATA, &data);
        let mut info = LinkInfo::default();
        apply_link_info(&mut info, &nest);
        assert_eq!(info.bridge, None);
    }
}

#[test]
fn guests_devices_name_their_kind_and_master() {
    for (kind, name) in [
        (InfoKind::Veth, "veth"),
        (InfoKind::Tun, "tun"),
        (InfoKind::MacVlan, "macvlan"),
        (InfoKind::MacVtap, "macvtap"),
        (InfoKind::Vlan, "vlan"),
        (InfoKind::Bond, "bond"),
    ] {
        let mut msg = LinkMessage::default();
        msg.header.index = 30;
        msg.attributes = vec![
            LinkAttribute::IfName("vnet0".into()),
            LinkAttribute::Controller(20),
            LinkAttribute::LinkInfo(vec![NlLinkInfo::Kind(kind)]),
        ];
        let info = parse_ok(&emit(&msg));
        assert_eq!(info.kind.as_ref().map(|k| k.as_str()), Some(name));
        assert_eq!(info.master, Some(20));
        assert_eq!(info.bridge, None);
    }
}
