//! The guests table inside the engine, through its door: containers' macvlans over a bond with
//! no bridge, learned from the bond's (and its VLAN's) own address list as the netlink dump
//! reports it; the host's own macvlan left to the host.

use std::collections::BTreeMap;

use super::*;
use crate::config::{Settings, Target};
use crate::engine::{CountingHook, HookFacts, Input};
use crate::guests::GuestsConfig;
use crate::host::testing::{link, vlan_link, BOND, VLAN_IF};
use crate::netlink::{FdbEntry, LinkInfo};
use crate::Mac;

const SLAVES: [u32; 2] = [21, 22];
const HOSTS_MACVLAN: u32 = 40;
const CONTAINER: Mac = Mac(2, 0, 0, 0, 3, 1);
const START: u64 = 5_000_000;

fn settings(enabled: bool) -> Settings {
    let capacity_mbps: BTreeMap<String, f64> = ["sl0", "sl1"].map(|n| (n.to_string(), 30.0)).into();
    Settings {
        capacity_mbps,
        guests: GuestsConfig {
            enabled,
            ..Default::default()
        },
        ..Settings::for_target(Target::Bond("bond0".into()))
    }
}

fn slave(i: usize) -> NlEvent {
    let NlEvent::Link(l) = link(SLAVES[i], &format!("sl{i}"), None) else {
        unreachable!()
    };
    NlEvent::Link(LinkInfo {
        master: Some(BOND),
        rx_bytes: Some(0),
        ..l
    })
}

/// The host's own macvlan over the bond (its MAC: `link`'s, from its index).
fn hosts_macvlan() -> NlEvent {
    let NlEvent::Link(l) = link(HOSTS_MACVLAN, "mv0", Some("macvlan")) else {
        unreachable!()
    };
    NlEvent::Link(LinkInfo {
        parent: Some(BOND),
        ..l
    })
}

/// The engine on bond0 (sl0, sl1), a VLAN 100 over it and the host's mv0, with every output
/// collected.
fn engine(enabled: bool) -> (Engine, Vec<Output>) {
    let mut e = Engine::new(settings(enabled), START);
    let events = [
        link(BOND, "bond0", Some("bond")),
        slave(0),
        slave(1),
        vlan_link(VLAN_IF, "bond0.100", BOND, 100),
        hosts_macvlan(),
    ];
    e.handle(START, Input::Netlink(&events));
    let out = drain(&mut e);
    (e, out)
}

fn feed(e: &mut Engine, events: &[NlEvent]) -> Vec<Output> {
    e.handle(START + 1000, Input::Netlink(events));
    drain(e)
}

/// Every output so far, the ports' captures opened as the shell would.
fn drain(e: &mut Engine) -> Vec<Output> {
    let mut out = Vec::new();
    while let Some(o) = e.poll_output() {
        match &o {
            Output::OpenCapture { port } => {
                let input = Input::CaptureOpened {
                    port: port.id,
                    speed_mbps: Some(30),
                    error: None,
                };
                e.handle(START, input);
            }
            Output::AttachHook { port, hook } => {
                let result = Ok(HookFacts {
                    store: "slots",
                    tc_attach: (*hook == CountingHook::Tc).then_some("tcx"),
                    store_fallback: None,
                });
                let (port, hook) = (port.id, *hook);
                e.handle(START, Input::HookAttached { port, hook, result });
            }
            _ => {}
        }
        out.push(o);
    }
    out
}

fn pins(out: &[Output]) -> Vec<ClientKey> {
    out.iter()
        .filter_map(|o| match o {
            Output::PinGuest { key, .. } => Some(*key),
            _ => None,
        })
        .collect()
}

#[test]
fn a_containers_macvlan_turns_the_guest_path_on_and_is_pinned_without_a_bridge() {
    let (mut e, out) = engine(true);
    assert!(
        !out.iter().any(|o| matches!(o, Output::GuestPath { .. })),
        "no bridge and no macvlan guest: the path stays off"
    );
    // The host's own macvlan's MAC on the bond's list, a multicast entry, a container's MAC.
    let mv0_mac = Mac(2, 0, 0, 0, 1, HOSTS_MACVLAN as u8);
    let dump = [
        NlEvent::Fdb(FdbEntry::own_address(BOND, mv0_mac)),
        NlEvent::Fdb(FdbEntry::own_address(BOND, Mac(0x33, 0x33, 0, 0, 0, 1))),
        NlEvent::Fdb(FdbEntry::own_address(BOND, CONTAINER)),
    ];
    let out = feed(&mut e, &dump);
    let on = out
        .iter()
        .position(|o| matches!(o, Output::GuestPath { on: true, .. }));
    let pin = out
        .iter()
        .position(|o| matches!(o, Output::PinGuest { .. }));
    assert!(
        on.is_some() && on < pin,
        "the path on before the pin: {out:?}"
    );
    assert_eq!(pins(&out), vec![ClientKey::untagged(CONTAINER)]);
    let announced = out.iter().any(|o| {
        matches!(o, Output::Send { tag: SendTag::Announce { guest, .. }, .. } if guest.mac == CONTAINER)
    });
    assert!(announced, "{out:?}");
    // Its VLAN device's entry (the dump lists it after the bond's copy): the guest is on VLAN
    // 100; then the entry gone (the container stopped): released, and the path stays on only
    // while a guest is left (the next topology change turns it off).
    let out = feed(
        &mut e,
        &[NlEvent::Fdb(FdbEntry::own_address(VLAN_IF, CONTAINER))],
    );
    assert_eq!(pins(&out), vec![ClientKey::new(CONTAINER, 100)]);
    let out = feed(
        &mut e,
        &[NlEvent::FdbRemoved(FdbEntry::own_address(
            VLAN_IF, CONTAINER,
        ))],
    );
    assert!(out.iter().any(
        |o| matches!(o, Output::UnpinGuest { key } if *key == ClientKey::new(CONTAINER, 100))
    ));
    let out = feed(&mut e, &[slave(0)]);
    assert!(
        out.iter()
            .any(|o| matches!(o, Output::GuestPath { on: false, .. })),
        "{out:?}"
    );
}

#[test]
fn with_guests_off_a_containers_macvlan_changes_nothing() {
    let (mut e, _) = engine(false);
    let out = feed(
        &mut e,
        &[NlEvent::Fdb(FdbEntry::own_address(BOND, CONTAINER))],
    );
    assert!(
        !out.iter().any(|o| matches!(
            o,
            Output::GuestPath { .. } | Output::PinGuest { .. } | Output::Send { .. }
        )),
        "{out:?}"
    );
}
