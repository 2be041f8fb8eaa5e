use super::*;
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

#[test]
fn claims_need_a_confirmed_neighbour_and_our_address() {
    let v = view();
    let talk = Talk {
        v4: Some((CLIENT_IP, SERVER)),
        v6: Some((CLIENT6, SERVER6)),
    };
    assert_eq!(
        v.claims_for(CLIENT, &talk),
        vec![
            Claim::V4 {
                client: CLIENT_IP,
                server: SERVER
            },
            Claim::V6 {
                client: CLIENT6,
                server: SERVER6
            }
        ]
    );
    // A spoofed source: the same addresses from a MAC the kernel does not confirm.
    assert!(v.claims_for(Mac(2, 9, 9, 9, 9, 9), &talk).is_empty());
    // Talking to an address that is not ours: ours in its subnet is claimed instead.
    let talk = Talk {
        v4: Some((CLIENT_IP, SERVER2)),
        v6: Some((CLIENT6, "2001:db8::99".parse().unwrap())),
    };
    assert_eq!(
        v.claims_for(CLIENT, &talk),
        vec![Claim::V4 {
            client: CLIENT_IP,
            server: SERVER
        }]
    );
}

#[test]
fn an_unconfirmed_or_removed_neighbour_is_not_confirmed() {
    let mut v = view();
    assert!(v.confirms(CLIENT, CLIENT_IP.into()));
    v.apply(&neigh(BOND, CLIENT_IP.into(), CLIENT, libc::NUD_FAILED));
    assert!(!v.confirms(CLIENT, CLIENT_IP.into()));
    assert_eq!(v.confirmed_v4(CLIENT), None);
    v.apply(&neigh(BOND, CLIENT_IP.into(), CLIENT, libc::NUD_REACHABLE));
    assert!(v.confirms(CLIENT, CLIENT_IP.into()));
    // The IP moved to another MAC: the old MAC is no longer confirmed for it.
    let other = Mac(2, 0, 0, 0, 0, 0xc2);
    v.apply(&neigh(BOND, CLIENT_IP.into(), other, libc::NUD_REACHABLE));
    assert!(!v.confirms(CLIENT, CLIENT_IP.into()));
    assert!(v.confirms(other, CLIENT_IP.into()));
    v.apply(&NlEvent::NeighRemoved(NeighEntry {
        ifindex: BOND,
        ip: CLIENT_IP.into(),
        mac: Some(other),
        state: 0,
    }));
    assert!(!v.confirms(other, CLIENT_IP.into()));
    assert!(v.knows(CLIENT), "still confirmed for IPv6");
}

#[test]
fn neighbours_on_other_interfaces_do_not_count() {
    let mut v = view();
    let m = Mac(2, 0, 0, 0, 0, 0x77);
    let ip: IpAddr = Ipv4Addr::new(198, 18, 0, 77).into();
    v.apply(&neigh(OTHER_IF, ip, m, libc::NUD_REACHABLE));
    assert!(!v.confirms(m, ip));
    assert!(!v.knows(m));
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
    assert!(!v.knows(CLIENT));
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
