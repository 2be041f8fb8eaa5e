use super::*;
use crate::guests::GuestsConfig;

const BOND: u32 = 10;
const BOND100: u32 = 11;
const BR: u32 = 20;
const OTHER: u32 = 30;
const CONTAINER: Mac = Mac(2, 0, 0, 0, 3, 1);
const HOSTS_MACVLAN: Mac = Mac(2, 0, 0, 0, 0, 0x30);
const LOWERS: [(u32, u16); 2] = [(BOND, 0), (BOND100, 100)];

fn port() -> PortView {
    PortView {
        capacity_bps: 30e6,
        up: true,
        rx_bps: 0.0,
        overloaded: false,
        resolution_bps: 0.0,
    }
}

/// A table over a bond with no bridge: macvlans only.
fn table() -> Guests {
    let cfg = GuestsConfig {
        enabled: true,
        ..GuestsConfig::default()
    };
    let mut g = Guests::new(cfg, 30);
    let names = vec!["eth0".to_string(), "eth1".to_string()];
    g.set_topology((Some(BOND), Vec::new(), names), false, &mut Vec::new());
    g
}

fn feed(g: &mut Guests, e: &FdbEntry, removed: bool, out: &mut Vec<GuestAction>) {
    if let Some(f) = macvlan_fact(e, &LOWERS, &[HOSTS_MACVLAN], removed) {
        g.on_fdb(0, &f, &[port(), port()], out);
    }
}

fn keys(g: &Guests) -> Vec<ClientKey> {
    g.iter().map(|x| x.key).collect()
}

#[test]
fn a_containers_mac_on_the_bonds_list_is_a_guest_and_the_hosts_own_is_not() {
    let f = macvlan_fact(
        &FdbEntry::own_address(BOND, CONTAINER),
        &LOWERS,
        &[HOSTS_MACVLAN],
        false,
    )
    .unwrap();
    assert_eq!(f.key, ClientKey::untagged(CONTAINER));
    assert!(f.macvlan && f.learned && !f.removed);
    assert_eq!((f.bridge, f.bridge_port), (BOND, BOND));
    let tagged = macvlan_fact(
        &FdbEntry::own_address(BOND100, CONTAINER),
        &LOWERS,
        &[],
        true,
    )
    .unwrap();
    assert_eq!(tagged.key, ClientKey::new(CONTAINER, 100));
    assert!(tagged.removed);
    // The host's own macvlan, a multicast filter entry, another device's list, a bridge's entry.
    assert_eq!(
        macvlan_fact(
            &FdbEntry::own_address(BOND, HOSTS_MACVLAN),
            &LOWERS,
            &[HOSTS_MACVLAN],
            false
        ),
        None
    );
    assert_eq!(
        macvlan_fact(
            &FdbEntry::own_address(BOND, Mac(1, 0, 0x5e, 0, 0, 1)),
            &LOWERS,
            &[],
            false
        ),
        None
    );
    assert_eq!(
        macvlan_fact(
            &FdbEntry::own_address(OTHER, CONTAINER),
            &LOWERS,
            &[],
            false
        ),
        None
    );
    let bridges = FdbEntry {
        master: Some(BR),
        own: false,
        ..FdbEntry::own_address(BOND, CONTAINER)
    };
    assert_eq!(macvlan_fact(&bridges, &LOWERS, &[], false), None);
}

#[test]
fn a_macvlan_guest_is_placed_without_a_bridge_and_released_when_its_mac_leaves_the_list() {
    let mut g = table();
    let mut out = Vec::new();
    feed(
        &mut g,
        &FdbEntry::own_address(BOND, HOSTS_MACVLAN),
        false,
        &mut out,
    );
    feed(
        &mut g,
        &FdbEntry::own_address(BOND, CONTAINER),
        false,
        &mut out,
    );
    let key = ClientKey::untagged(CONTAINER);
    assert_eq!(keys(&g), vec![key]);
    assert!(g.has_macvlans());
    assert!(matches!(out[..], [GuestAction::Pin { key: k, reason: None, .. }] if k == key));
    let st = g.statuses(0, &["eth0".into(), "eth1".into()], &|i| format!("if{i}"));
    assert_eq!(st[0].bridge_port, format!("macvlan on if{BOND}"));
    // Every later dump reports it again: nothing new.
    out.clear();
    feed(
        &mut g,
        &FdbEntry::own_address(BOND, CONTAINER),
        false,
        &mut out,
    );
    assert!(out.is_empty(), "{out:?}");
    // The topology again (a link changed): a macvlan guest needs no bridge.
    g.set_topology((Some(BOND), Vec::new(), Vec::new()), false, &mut out);
    assert_eq!(keys(&g), vec![key]);
    feed(
        &mut g,
        &FdbEntry::own_address(BOND, CONTAINER),
        true,
        &mut out,
    );
    assert!(g.is_empty());
    assert!(out.contains(&GuestAction::Unpin { key }), "{out:?}");
    assert_eq!(g.totals.released, 1);
}

#[test]
fn a_macvlan_over_a_vlan_of_the_bond_is_one_guest_on_that_vlan() {
    let mut g = table();
    let mut out = Vec::new();
    // The dump lists the bond (with the VLAN device's addresses passed down) before the VLAN.
    feed(
        &mut g,
        &FdbEntry::own_address(BOND, CONTAINER),
        false,
        &mut out,
    );
    feed(
        &mut g,
        &FdbEntry::own_address(BOND100, CONTAINER),
        false,
        &mut out,
    );
    let key = ClientKey::new(CONTAINER, 100);
    assert_eq!(keys(&g), vec![key]);
    assert_eq!(
        g.totals.released, 0,
        "the untagged copy is replaced, not released"
    );
    assert!(out.contains(&GuestAction::Unpin {
        key: ClientKey::untagged(CONTAINER)
    }));
    // The next dumps: the bond's copy is not a second guest.
    out.clear();
    feed(
        &mut g,
        &FdbEntry::own_address(BOND, CONTAINER),
        false,
        &mut out,
    );
    feed(
        &mut g,
        &FdbEntry::own_address(BOND100, CONTAINER),
        false,
        &mut out,
    );
    assert_eq!(keys(&g), vec![key]);
    assert!(out.is_empty(), "{out:?}");
    // The bond's copy removed changes nothing; the VLAN's releases it.
    feed(
        &mut g,
        &FdbEntry::own_address(BOND, CONTAINER),
        true,
        &mut out,
    );
    assert_eq!(keys(&g), vec![key]);
    feed(
        &mut g,
        &FdbEntry::own_address(BOND100, CONTAINER),
        true,
        &mut out,
    );
    assert!(g.is_empty());
}

#[test]
fn a_vlan_device_that_goes_takes_its_macvlan_guests_with_it() {
    let mut g = table();
    let mut out = Vec::new();
    feed(
        &mut g,
        &FdbEntry::own_address(BOND100, CONTAINER),
        false,
        &mut out,
    );
    feed(
        &mut g,
        &FdbEntry::own_address(BOND, Mac(2, 0, 0, 0, 3, 2)),
        false,
        &mut out,
    );
    assert_eq!(g.len(), 2);
    g.set_lowers(&[(BOND, 0)], &mut out);
    assert_eq!(keys(&g), vec![ClientKey::untagged(Mac(2, 0, 0, 0, 3, 2))]);
    g.set_lowers(&[], &mut out);
    assert!(g.is_empty());
}

#[test]
fn a_bridge_guests_mac_on_the_bonds_list_is_not_a_second_guest() {
    let mut g = table();
    let mut out = Vec::new();
    let names = vec!["eth0".to_string(), "eth1".to_string()];
    g.set_topology(
        (Some(BOND), vec![(BR, "br0".into())], names),
        false,
        &mut out,
    );
    let behind_tap = FdbFact {
        key: ClientKey::untagged(CONTAINER),
        bridge_port: 100,
        bridge: BR,
        learned: true,
        removed: false,
        macvlan: false,
    };
    g.on_fdb(0, &behind_tap, &[port(), port()], &mut out);
    feed(
        &mut g,
        &FdbEntry::own_address(BOND, CONTAINER),
        false,
        &mut out,
    );
    let all: Vec<(ClientKey, bool)> = g.iter().map(|x| (x.key, x.macvlan)).collect();
    assert_eq!(all, vec![(ClientKey::untagged(CONTAINER), false)]);
    // Nor is its entry's removal from the list a release of the bridge's guest.
    feed(
        &mut g,
        &FdbEntry::own_address(BOND, CONTAINER),
        true,
        &mut out,
    );
    assert_eq!(g.len(), 1);
}

#[test]
fn an_excluded_mac_and_a_disabled_table_learn_nothing() {
    let cfg = GuestsConfig {
        enabled: true,
        exclude: vec!["02:00:00:00:03:01".into()],
        ..GuestsConfig::default()
    };
    let mut g = Guests::new(cfg, 30);
    g.set_topology((Some(BOND), Vec::new(), Vec::new()), false, &mut Vec::new());
    let mut out = Vec::new();
    feed(
        &mut g,
        &FdbEntry::own_address(BOND, CONTAINER),
        false,
        &mut out,
    );
    assert!(g.is_empty());
    let mut off = Guests::new(GuestsConfig::default(), 30);
    feed(
        &mut off,
        &FdbEntry::own_address(BOND, CONTAINER),
        false,
        &mut out,
    );
    assert!(off.is_empty() && out.is_empty());
}
