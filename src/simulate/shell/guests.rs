//! The shell's part for the scenario's guests, as the daemon's (`src/daemon/guests.rs`,
//! `edge.rs`) and the month's (`tests/sim/guest_shell.rs`, with its checks) carry it out: the
//! guest path on and off, each slave held promiscuous, the pins map, the announcements on the
//! wire (the switch learns a guest where it was announced), the second's per-slave counts of
//! the ingress programs handed in before the clients'. The LAN decides where a guest's frames
//! arrive and which slave takes them (`lan/guests.rs`).

use std::collections::HashMap;

use crate::client::ClientKey;
use crate::engine::{Input, Output, PortId, SendTag};
use crate::logging::Fields;
use crate::simulate::lan::guest_path::Carried;
use crate::simulate::lan::guests::GuestLan;
use crate::simulate::lan::World as Lan;
use crate::simulate::{MoveOut, Scenario};

use super::{reason, Shell, START};

/// The scenario's guests as the shell knows them.
pub struct GuestBook {
    /// Each guest's key, by its index in the scenario, and its name by key.
    keys: Vec<ClientKey>,
    names: HashMap<ClientKey, String>,
    /// The slave each guest was pinned to before its last pin.
    from: HashMap<ClientKey, Option<usize>>,
    /// What each received last second, Mbit/s (a move's record gives it).
    rate: Vec<f64>,
}

impl GuestBook {
    /// The scenario's guests, put behind their taps on `lan`'s bridge.
    pub fn new(s: &Scenario, lan: &mut Lan) -> GuestBook {
        let keys: Vec<ClientKey> = s
            .guests
            .iter()
            .map(|g| ClientKey::new(g.mac.parse().expect("parse checked the MAC"), g.vlan))
            .collect();
        if !keys.is_empty() {
            lan.guests = Some(GuestLan::present(&keys));
        }
        GuestBook {
            names: keys
                .iter()
                .zip(&s.guests)
                .map(|(k, g)| (*k, g.name.clone()))
                .collect(),
            rate: vec![0.0; keys.len()],
            keys,
            from: HashMap::new(),
        }
    }
}

impl Shell {
    /// A guest output of the engine, carried out on the LAN.
    pub(super) fn guest_output(&mut self, out: Output) {
        if let Some(Carried::Pinned { key, from, .. }) = self.lan.carry_out_guest(&out) {
            self.guests.from.insert(key, from);
        }
    }

    /// A frame went out of slave `port` (`None`: refused): a guest's announcement teaches the
    /// switch where the guest is.
    pub(super) fn guest_announced(&mut self, tag: &SendTag, port: Option<usize>) {
        let (SendTag::Announce { guest, .. }, Some(p)) = (*tag, port) else {
            return;
        };
        if let Some(lan) = self.lan.guests.as_mut() {
            lan.switch.learn(self.now, guest, Some(p));
        }
    }

    /// A guest's move, from its log record, as the scenario's output.
    pub(super) fn record_guest_move(&mut self, f: &Fields) {
        let (Some(mac), Some(to), Some(reason)) =
            (f.client_mac, f.port.clone(), f.reason.and_then(reason))
        else {
            return;
        };
        let key = ClientKey::new(mac, f.vlan);
        let Some(g) = self.guests.keys.iter().position(|k| *k == key) else {
            return;
        };
        let from = self.guests.from.get(&key).copied().flatten();
        let out = MoveOut {
            client: self.guests.names[&key].clone(),
            from: from.map_or_else(String::new, |p| self.lan.ports[p].name.clone()),
            to,
            rate_mbps: (self.guests.rate[g] * 1000.0).round() / 1000.0,
            reason,
        };
        self.moves.push(out);
    }

    /// Second `t` begins for the guests, each wanting `demand_mbps`: the slaves each one's
    /// frames reach.
    pub fn guest_paths(&mut self, t: u64, demand_mbps: &[f64]) -> Vec<Vec<usize>> {
        self.lan.guests_begin_second(START + (t + 1) * 1000);
        let Some(lan) = self.lan.guests.as_mut() else {
            return Vec::new();
        };
        for (g, d) in lan.guests.iter_mut().zip(demand_mbps) {
            g.demand_bps = d * 1e6;
        }
        (0..demand_mbps.len())
            .map(|g| self.lan.guest_arrives_on(g))
            .collect()
    }

    /// The guests' traffic of the second, (guest, slave, Mbit/s): received, handed in as the
    /// ingress programs counted it. What each guest got, Mbit/s.
    pub(super) fn guests_second(&mut self, shares: &[(usize, usize, f64)]) -> Vec<f64> {
        for &(g, p, mbps) in shares {
            self.lan.guest_received(g, p, mbps * 1e6);
        }
        let list = &self.engine.ports().list;
        let ports = &self.lan.ports;
        let engine_port = |p: usize| {
            let name = &ports[p].name;
            list.iter().position(|x| &x.name == name).map(PortId::new)
        };
        let (counts, _) = self.lan.guest_counts(engine_port);
        if !counts.is_empty() {
            self.input(Input::GuestCounts(&counts));
        }
        let got: Vec<f64> = self
            .lan
            .guests
            .iter()
            .flat_map(|l| &l.guests)
            .map(|g| g.delivered_bps / 1e6)
            .collect();
        self.guests.rate.clone_from(&got);
        got
    }
}
