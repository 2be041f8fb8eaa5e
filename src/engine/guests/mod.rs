//! The guests table inside the engine: what it is told (the bond and the bridges over it, the
//! bridge FDB and the own address lists of the bond and its VLANs (containers' macvlans), the
//! second's counts, ports failing) and its actions turned into outputs.

use log::Level;

use super::io::{Output, SendTag, Topic};
use super::Engine;
use crate::client::ClientKey;
use crate::guests::{macvlan_fact, FdbFact, GuestAction, GuestCount};
use crate::logging::{Fields, MessageId};
use crate::netlink::{BondMode, FdbKind, LinkKind, NlEvent};
use crate::steer::{guest_announcement, tagged};

impl Engine {
    /// The containers' macvlans on the bond (or its VLANs) taken as guests now.
    pub fn macvlan_guests(&self) -> usize {
        self.guests.iter().filter(|g| g.macvlan).count()
    }

    /// The guests table's view of the host: the bond, the bridges it is a port of, the ports'
    /// names; and whether the guest path should be on (guests enabled and a bridge or a
    /// container's macvlan to serve).
    pub(super) fn guests_topology(&mut self) {
        if !self.settings.guests.enabled && !self.guest_path {
            return;
        }
        let ports = &self.lan.ports;
        let links = self.lan.host.links();
        let bond = ports.bond_index;
        let bridges: Vec<(u32, String)> = bond
            .and_then(|b| links.get(&b))
            .and_then(|b| b.master)
            .and_then(|m| links.get(&m))
            .filter(|br| br.kind == Some(LinkKind::Bridge))
            .map(|br| vec![(br.index, br.name.clone())])
            .unwrap_or_default();
        let names = ports.list.iter().map(|p| p.name.clone()).collect();
        let tlb = ports.bond_mode == Some(BondMode::BalanceTlb);
        let refused_before = self.guests.refused().is_some();
        self.guests
            .set_topology((bond, bridges.clone(), names), tlb, &mut self.guest_actions);
        if let (Some(why), false) = (self.guests.refused(), refused_before) {
            let text = format!("guests are not balanced: {why}");
            self.out.log(Level::Error, Topic::Guest, text);
        }
        let lowers = self.macvlan_lowers();
        self.guests.set_lowers(&lowers, &mut self.guest_actions);
        let served = !bridges.is_empty() || self.guests.has_macvlans();
        let on = self.guests.enabled() && served && bond.is_some();
        self.set_guest_path(on, bridges.first().map(|b| b.1.as_str()));
        self.carry_out_guests();
    }

    /// The guest path on or off (said once per change): on while guests are enabled and a
    /// bridge over the bond, or a container's macvlan on it, has guests to serve.
    fn set_guest_path(&mut self, on: bool, bridge: Option<&str>) {
        if on == self.guest_path {
            return;
        }
        self.guest_path = on;
        let ports = &self.lan.ports;
        let bond = match (ports.bond_index, &ports.target) {
            (Some(b), crate::config::Target::Bond(name)) if on => Some((b, name.clone())),
            _ => None,
        };
        self.out.push(Output::GuestPath { on, bond });
        if on {
            self.guest_ports();
        }
        let text = match bridge {
            Some(br) if on => format!("guests: balancing the guests of {br} over the bond"),
            None if on => "guests: balancing the containers' macvlans over the bond".into(),
            _ => "guests: not balancing guests (no bridge or container's macvlan over the bond, \
                  or switched off)"
                .into(),
        };
        self.out.log(Level::Info, Topic::Guest, text);
    }

    /// The devices whose own address lists name macvlan guests: the bond (VLAN 0) and the
    /// 802.1Q VLAN devices over it.
    fn macvlan_lowers(&self) -> Vec<(u32, u16)> {
        let Some(bond) = self.lan.ports.bond_index else {
            return Vec::new();
        };
        let links = self.lan.host.links().values();
        let vlans = links.filter(|l| l.parent == Some(bond) && l.kind == Some(LinkKind::Vlan));
        let tagged = vlans.filter_map(|l| l.vlan.filter(|v| !v.ad).map(|v| (l.index, v.id)));
        std::iter::once((bond, 0)).chain(tagged).collect()
    }

    /// The shell could not set the guest path up: guests are given up (released, the path
    /// off), said once as an error. A reload that changes `[guests]` tries again.
    pub(super) fn guest_path_failed(&mut self, why: String) {
        // The verifier's log is for a developer; the error says what failed.
        let why = match why.split_once("; verifier log") {
            Some((short, log)) => {
                let text = format!("guests: verifier log{log}");
                self.out.log(Level::Debug, Topic::Guest, text);
                short.to_string()
            }
            None => why,
        };
        let text =
            format!("guests are not balanced: {why}; their frames stay with the bonding driver");
        self.out.log(Level::Error, Topic::Guest, text);
        self.guests.give_up(why, &mut self.guest_actions);
        self.carry_out_guests();
        if self.guest_path {
            self.guest_path = false;
            self.out.push(Output::GuestPath {
                on: false,
                bond: None,
            });
        }
    }

    /// The FDB entries of a netlink batch: a bridge's table (where a guest's MAC is), and the
    /// own address lists of the bond and its VLANs (the containers' macvlans on them: their
    /// first one turns the guest path on).
    pub(super) fn on_fdb(&mut self, now: u64, events: &[NlEvent]) {
        if !self.guests.enabled()
            || !events
                .iter()
                .any(|e| matches!(e, NlEvent::Fdb(_) | NlEvent::FdbRemoved(_)))
        {
            return;
        }
        let lowers = self.macvlan_lowers();
        let links = self.lan.host.links().values();
        let host_macs: Vec<crate::Mac> = links.filter_map(|l| l.mac).collect();
        self.lan.ports.views_into(&mut self.bufs.ports);
        for ev in events {
            let (e, removed) = match ev {
                NlEvent::Fdb(e) => (e, false),
                NlEvent::FdbRemoved(e) => (e, true),
                _ => continue,
            };
            let fact = match e.bridge() {
                Some(bridge) if self.guest_path => FdbFact {
                    key: ClientKey::new(e.mac, e.vlan),
                    bridge_port: e.ifindex,
                    bridge,
                    learned: e.kind == FdbKind::Learned || e.ext_learned,
                    removed,
                    macvlan: false,
                },
                Some(_) => continue,
                None => match macvlan_fact(e, &lowers, &host_macs, removed) {
                    Some(f) => f,
                    None => continue,
                },
            };
            if fact.macvlan && !fact.removed && !self.guest_path {
                if self.lan.ports.bond_index.is_none() {
                    continue;
                }
                self.set_guest_path(true, None);
            }
            self.guests
                .on_fdb(now, &fact, &self.bufs.ports, &mut self.guest_actions);
        }
        self.carry_out_guests();
    }

    pub(super) fn on_guest_counts(&mut self, now: u64, counts: &[GuestCount]) {
        self.guests.on_counts(now, counts, &mut self.guest_actions);
        self.carry_out_guests();
    }

    /// The second's balancing of guests, after the clients': only when no client moved this
    /// second (the ports' next reading shows what a client move left).
    /// `whole`: the host clients' rates of this second are known (no ring drops), and are
    /// weighed beside the guests.
    pub(super) fn rebalance_guests(&mut self, now: u64, client_moves: bool, whole: bool) {
        if !self.guest_path {
            return;
        }
        if client_moves {
            if self.bufs.ports.iter().any(|p| p.overloaded) {
                let text = "guests: not weighed this second: a client moved".to_string();
                self.out.log(Level::Debug, Topic::Guest, text);
            }
            return;
        }
        let policy = &self.settings.policy;
        let hosts = if whole { self.steer.flows() } else { &[] };
        let views = (&self.bufs.ports[..], hosts);
        self.guests
            .rebalance(now, policy, views, &mut self.guest_actions);
        self.carry_out_guests();
    }

    pub(super) fn fail_over_guests(&mut self, now: u64) {
        if !self.guest_path {
            return;
        }
        self.lan.ports.views_into(&mut self.bufs.ports);
        self.guests
            .fail_over(now, &self.bufs.ports, &mut self.guest_actions);
        self.carry_out_guests();
    }

    /// The guests table's actions as outputs: a pin is the program's map entry and, at once,
    /// the guest's announcement out of its new port.
    pub(super) fn carry_out_guests(&mut self) {
        let actions = std::mem::take(&mut self.guest_actions);
        // A guest placed, moved or released is durable state (the state file's pins).
        self.durable.dirty |= actions
            .iter()
            .any(|a| matches!(a, GuestAction::Pin { .. } | GuestAction::Unpin { .. }));
        for a in actions {
            match a {
                GuestAction::Pin { key, port, reason } => {
                    let Some(p) = self.lan.port_ref(port) else {
                        continue;
                    };
                    let name = p.name.clone();
                    self.out.push(Output::PinGuest { key, port: p });
                    if !self.rules_off.has(crate::steer::Rule::GuestAnnounce) {
                        self.announce(key, port);
                    }
                    let text = match reason {
                        None => format!("guest {key}: placed on {name}"),
                        Some(r) => format!("guest {key}: moved to {name} ({})", r.as_str()),
                    };
                    let level = if reason.is_some() {
                        Level::Info
                    } else {
                        Level::Debug
                    };
                    let fields = Fields {
                        id: reason.map(|_| MessageId::GuestMove),
                        port: Some(name.to_string()),
                        client_mac: Some(key.mac),
                        vlan: key.vlan,
                        reason: reason.map(|r| r.as_str()),
                        ..Fields::default()
                    };
                    self.out.log_with(level, Topic::Guest, text, fields);
                }
                GuestAction::Unpin { key } => self.out.push(Output::UnpinGuest { key }),
                GuestAction::Announce { key, port } => self.announce(key, port),
                GuestAction::Log(level, text) => self.out.log(level, Topic::Guest, text),
            }
        }
    }

    fn announce(&mut self, guest: ClientKey, port: usize) {
        let Some(r) = self.lan.port_ref(port) else {
            return;
        };
        let frame = tagged(&guest_announcement(guest.mac), guest.vlan);
        let tag = SendTag::Announce { port: r.id, guest };
        self.out.push(Output::Send {
            port: r,
            tag,
            frame,
        });
    }
}

#[cfg(test)]
mod tests;
