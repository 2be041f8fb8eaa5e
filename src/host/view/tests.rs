use super::*;
use crate::client::{ClientKey, ServerSet};
use crate::host::testing::*;

#[test]
fn only_addresses_on_the_servers_interfaces_are_ours() {
    let v = view();
    assert!(v.is_ours(SERVER.into()));
    assert!(v.is_ours(SERVER6.into()));
    assert!(
        !v.is_ours(SERVER2.into()),
        "an address on another interface"
    );
    assert!(!v.is_ours(CLIENT_IP.into()));
}

const KEY: ClientKey = ClientKey::untagged(CLIENT);

fn talk_to(v4: Option<Ipv4Addr>, v6: Option<Ipv6Addr>, servers: &[IpAddr]) -> Talk {
    let mut set = ServerSet::default();
    for ip in servers {
        set.note(*ip, 0, 0);
    }
    Talk {
        v4,
        v6,
        servers: set,
    }
}

#[test]
fn claims_need_a_confirmed_neighbour_and_our_address() {
    let v = view();
    let talk = talk_to(
        Some(CLIENT_IP),
        Some(CLIENT6),
        &[SERVER.into(), SERVER6.into()],
    );
    assert_eq!(
        v.claims_for(KEY, &talk),
        Ok(vec![
            Claim::V4 {
                client: CLIENT_IP,
                server: SERVER
            },
            Claim::V6 {
                client: CLIENT6,
                server: SERVER6
            }
        ])
    );
    // A spoofed source: the same addresses from a MAC the kernel does not confirm.
    let stranger = ClientKey::untagged(Mac(2, 9, 9, 9, 9, 9));
    assert!(v.claims_for(stranger, &talk).is_err());
    // The same MAC on a VLAN where the kernel has no entry for it.
    assert!(v.claims_for(ClientKey::new(CLIENT, 100), &talk).is_err());
}

#[test]
fn a_client_of_several_addresses_is_claimed_for_each_or_not_at_all() {
    let mut v = view();
    v.apply(&addr(BOND, "198.18.0.3/24"));
    let third: IpAddr = Ipv4Addr::new(198, 18, 0, 3).into();
    let talk = talk_to(
        Some(CLIENT_IP),
        None,
        &[SERVER.into(), third, SERVER6.into()],
    );
    let claims = v.claims_for(KEY, &talk).unwrap();
    let servers: Vec<IpAddr> = claims.iter().map(Claim::server).collect();
    assert_eq!(servers, vec![SERVER.into(), third, SERVER6.into()]);
    // IPv6 no longer confirmed: the move would leave its IPv6 traffic behind.
    v.apply(&neigh(BOND, CLIENT6.into(), CLIENT, libc::NUD_FAILED));
    assert_eq!(
        v.claims_for(KEY, &talk),
        Err(Unclaimable::NoNeighbour {
            server: SERVER6.into()
        })
    );
    // More addresses than a move claims.
    let mut many = talk_to(Some(CLIENT_IP), None, &[]);
    for n in 1..=5 {
        many.servers
            .note(Ipv4Addr::new(198, 18, 0, n).into(), 1, 60);
    }
    assert_eq!(v.claims_for(KEY, &many), Err(Unclaimable::TooManyAddresses));
}

#[test]
fn traffic_through_the_server_claims_its_address_on_the_clients_subnet() {
    let v = view();
    let mut talk = talk_to(Some(CLIENT_IP), None, &[]);
    talk.servers
        .note_other(Ipv4Addr::new(203, 0, 113, 5).into());
    assert_eq!(
        v.claims_for(KEY, &talk),
        Ok(vec![Claim::V4 {
            client: CLIENT_IP,
            server: SERVER
        }])
    );
    // Quiet (nothing measured this second): the same next hop.
    assert_eq!(
        v.claims_for(KEY, &talk_to(Some(CLIENT_IP), None, &[])),
        Ok(vec![Claim::V4 {
            client: CLIENT_IP,
            server: SERVER
        }])
    );
    // To an address on an interface not stacked on the bond: named, not moved.
    let mut talk = talk_to(Some(CLIENT_IP), None, &[SERVER.into()]);
    talk.servers.note_other(SERVER2.into());
    assert_eq!(
        v.claims_for(KEY, &talk),
        Err(Unclaimable::Unwatched {
            server: SERVER2.into(),
            interface: "eth9".into()
        })
    );
}

#[test]
fn a_client_on_a_vlan_is_confirmed_there_and_claimed_its_vlans_address() {
    let mut v = view();
    let on100 = ClientKey::new(CLIENT, 100);
    let ip100 = Ipv4Addr::new(198, 18, 100, 11);
    let server100 = Ipv4Addr::new(198, 18, 100, 1);
    assert_eq!(v.vlan_of(VLAN_IF), Some(100));
    assert!(v.is_ours(server100.into()));
    v.apply(&neigh(VLAN_IF, ip100.into(), CLIENT, libc::NUD_REACHABLE));
    assert!(v.confirms(on100, ip100.into()));
    assert!(!v.confirms(KEY, ip100.into()), "not on the untagged side");
    assert!(!v.confirms(on100, CLIENT_IP.into()));
    let talk = talk_to(Some(ip100), None, &[server100.into()]);
    assert_eq!(
        v.claims_for(on100, &talk),
        Ok(vec![Claim::V4 {
            client: ip100,
            server: server100
        }])
    );
    // The VLAN removed: its addresses and neighbours go with it.
    v.apply(&NlEvent::LinkRemoved {
        index: VLAN_IF,
        name: "bond0.100".into(),
    });
    assert!(!v.is_ours(server100.into()));
    assert!(!v.knows(on100));
}

#[test]
fn a_bridge_over_the_bond_and_a_macvlan_carry_the_servers_addresses() {
    let mut v = HostView::new(Target::Bond("bond0".into()));
    let NlEvent::Link(mut bond) = link(BOND, "bond0", Some("bond")) else {
        unreachable!()
    };
    bond.master = Some(20);
    let NlEvent::Link(mut mv) = link(21, "mv0", Some("macvlan")) else {
        unreachable!()
    };
    mv.parent = Some(BOND);
    mv.mac = Some(Mac(2, 0, 0, 0, 0, 0x30));
    for ev in [
        NlEvent::Link(bond),
        link(20, "br0", Some("bridge")),
        NlEvent::Link(mv),
        addr(20, "198.18.0.1/24"),
        addr(21, "198.18.1.1/24"),
        neigh(20, CLIENT_IP.into(), CLIENT, libc::NUD_REACHABLE),
    ] {
        v.apply(&ev);
    }
    assert!(v.is_ours(SERVER.into()));
    assert!(v.is_ours(Ipv4Addr::new(198, 18, 1, 1).into()));
    assert!(v.confirms(KEY, CLIENT_IP.into()));
    assert!(v.host_macs().contains(&Mac(2, 0, 0, 0, 0, 0x30)));
    assert!(v.unsupported().is_empty());
}

#[test]
fn an_unconfirmed_or_removed_neighbour_is_not_confirmed() {
    let mut v = view();
    assert!(v.confirms(KEY, CLIENT_IP.into()));
    v.apply(&neigh(BOND, CLIENT_IP.into(), CLIENT, libc::NUD_FAILED));
    assert!(!v.confirms(KEY, CLIENT_IP.into()));
    assert_eq!(v.confirmed_v4(KEY), None);
    v.apply(&neigh(BOND, CLIENT_IP.into(), CLIENT, libc::NUD_REACHABLE));
    assert!(v.confirms(KEY, CLIENT_IP.into()));
    // The IP moved to another MAC: the old MAC is no longer confirmed for it.
    let other = Mac(2, 0, 0, 0, 0, 0xc2);
    v.apply(&neigh(BOND, CLIENT_IP.into(), other, libc::NUD_REACHABLE));
    assert!(!v.confirms(KEY, CLIENT_IP.into()));
    assert!(v.confirms(other.into(), CLIENT_IP.into()));
    v.apply(&NlEvent::NeighRemoved(NeighEntry {
        ifindex: BOND,
        ip: CLIENT_IP.into(),
        mac: Some(other),
        state: 0,
    }));
    assert!(!v.confirms(other.into(), CLIENT_IP.into()));
    assert!(v.knows(KEY), "still confirmed for IPv6");
}

#[test]
fn neighbours_on_other_interfaces_do_not_count() {
    let mut v = view();
    let m = Mac(2, 0, 0, 0, 0, 0x77);
    let ip: IpAddr = Ipv4Addr::new(198, 18, 0, 77).into();
    v.apply(&neigh(OTHER_IF, ip, m, libc::NUD_REACHABLE));
    assert!(!v.confirms(m.into(), ip));
    assert!(!v.knows(m.into()));
}

#[test]
fn a_removed_interface_takes_its_addresses_and_neighbours() {
    let mut v = view();
    let ev = NlEvent::LinkRemoved {
        index: BOND,
        name: "bond0".into(),
    };
    assert!(v.apply(&ev).links);
    assert!(!v.is_ours(SERVER.into()));
    assert!(!v.knows(KEY));
    // The bond made again: addresses and neighbours come back only from new events.
    assert!(v.apply(&link(BOND + 1, "bond0", Some("bond"))).links);
    assert!(v.is_host_if(BOND + 1));
    assert!(!v.is_ours(SERVER.into()));
}

#[test]
fn counters_alone_do_not_change_the_links() {
    let mut v = view();
    let NlEvent::Link(mut l) = link(BOND, "bond0", Some("bond")) else {
        unreachable!()
    };
    l.rx_bytes = Some(12345);
    assert!(!v.apply(&NlEvent::Link(l.clone())).links);
    l.oper_up = false;
    assert!(v.apply(&NlEvent::Link(l)).links);
}

#[test]
fn ports_mode_uses_the_ports_as_the_servers_interfaces() {
    let mut v = HostView::new(Target::Ports(vec!["p0".into(), "p1".into()]));
    v.apply(&link(3, "p0", Some("veth")));
    v.apply(&link(4, "p1", Some("veth")));
    v.apply(&link(5, "p2", Some("veth")));
    v.apply(&addr(3, "198.18.0.1/24"));
    v.apply(&addr(5, "198.18.0.2/24"));
    assert!(v.is_host_if(3) && v.is_host_if(4) && !v.is_host_if(5));
    assert!(v.is_ours(SERVER.into()));
    assert!(!v.is_ours(SERVER2.into()));
}
