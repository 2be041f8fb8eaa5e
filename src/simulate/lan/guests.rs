//! Guests behind the bond (issue 38): on some bond seeds bond0 is the port of br0, with a few to
//! a few dozen guests (VMs on taps, some on VLAN 100) behind it, and the switch in front of the
//! slaves learns each guest where its frames come from (`switch.rs`). This is the LAN's and the
//! host kernel's side: the guests arriving, changing their demand and leaving (gone from the
//! FDB, or migrated: their MAC then seen from the switch's side), where their traffic arrives
//! (the switch's table, or flooded), what the slaves accept (the ingress program's pins, the
//! promiscuous ports the guest path holds, the active slave under the kernel alone) and what
//! the guests transmit (through their pinned slave, or the active one). They share each slave
//! with the host's clients (`World::traffic`). The shell's side and the checks: `guest_shell.rs`.

use std::collections::{HashMap, HashSet};

use crate::client::ClientKey;
use crate::engine::PortId;
use crate::guests::GuestCount;
use crate::netlink::{FdbEntry, FdbKind, NlEvent};
use crate::Mac;

use super::bond::{BOND_IF, VLAN_ID};
use super::switch::{Delivery, Switch};
use super::World;

pub const BRIDGE_IF: u32 = 30;
/// Guest slot `n`'s tap is ifindex `TAP_BASE + n`.
const TAP_BASE: u32 = 100;

/// Whether seed `seed` has guests behind its bond: every bond seed but the crowded ones (1, 3,
/// 7, 9, 11, ...: every fifth seed's few hundred clients would make the month too slow) by
/// default; `RLBD_SIM_GUESTS=1` every bond seed, `=0` none.
pub fn has_guests(seed: u64) -> bool {
    let bonded = seed % 2 == 1;
    match std::env::var("RLBD_SIM_GUESTS").as_deref() {
        Ok("0") => false,
        Ok(_) => bonded,
        Err(_) => bonded && seed % 5 != 0,
    }
}

impl World {
    /// Seed `seed`'s guests, if it has them: 4 to 28 slots; the host's clients then draw 60%
    /// of their usual demand, leaving the slaves room for the guests.
    pub fn with_guests(&mut self, seed: u64) {
        if has_guests(seed) {
            self.guests = Some(GuestLan::new(4 + ((seed / 2) % 4) as usize * 8));
            self.mean_demand *= 0.6;
        }
    }
}

#[derive(Debug, Clone)]
pub struct Guest {
    pub key: ClientKey,
    pub tap: u32,
    /// On the host (behind its tap).
    pub present: bool,
    pub demand_bps: f64,
    /// This second: bytes that reached each slave (by world index), what the guest got, and on
    /// how many slaves it was delivered.
    pub arrived: Vec<u64>,
    pub delivered_bps: f64,
    pub deliveries: u32,
    /// Where it was delivered this second (the last slave, if several).
    pub delivered_on: Option<usize>,
    next_change: u64,
    leaves_at: u64,
    /// When its tap's FDB entry goes (a migrated guest's, a moment after its RARP).
    pub tap_gone_at: Option<u64>,
    /// It migrated this second: its RARP arrives from the switch's side.
    pub rarp: bool,
}

/// The guests and what the host's kernel holds for them.
pub struct GuestLan {
    pub guests: Vec<Guest>,
    pub switch: Switch,
    /// The guest path (the programs attached), the ingress program's pins (guest -> world
    /// port) and the ports held promiscuous (by ifindex).
    pub path: bool,
    pub pins: HashMap<ClientKey, usize>,
    pub promisc: HashSet<u32>,
    /// Each port's `down_since` as last seen: a change is a link that went down.
    pub down_seen: Vec<u64>,
    /// The second being simulated (the switch's table ages).
    pub now: u64,
    /// Figures for the report.
    pub arrivals: u64,
    pub vanished: u64,
    pub migrated: u64,
}

impl GuestLan {
    /// `n` guest slots.
    pub fn new(n: usize) -> GuestLan {
        let guests = (0..n)
            .map(|s| Guest {
                key: ClientKey::new(
                    Mac(0x52, 0x54, 0, 0, 0, s as u8),
                    if s % 4 == 3 { VLAN_ID } else { 0 },
                ),
                tap: TAP_BASE + s as u32,
                present: false,
                demand_bps: 0.0,
                arrived: Vec::new(),
                delivered_bps: 0.0,
                deliveries: 0,
                delivered_on: None,
                next_change: 0,
                leaves_at: 0,
                tap_gone_at: None,
                rarp: false,
            })
            .collect();
        GuestLan {
            guests,
            switch: Switch::default(),
            path: false,
            pins: HashMap::new(),
            promisc: HashSet::new(),
            down_seen: Vec::new(),
            now: 0,
            arrivals: 0,
            vanished: 0,
            migrated: 0,
        }
    }

    /// Guests behind their taps from the start, each `key` in its slot, none sending yet (an
    /// operator's scenario says what they send).
    pub fn present(keys: &[ClientKey]) -> GuestLan {
        let mut lan = GuestLan::new(0);
        lan.guests = keys
            .iter()
            .enumerate()
            .map(|(s, &key)| Guest {
                key,
                tap: TAP_BASE + s as u32,
                present: true,
                demand_bps: 0.0,
                arrived: Vec::new(),
                delivered_bps: 0.0,
                deliveries: 0,
                delivered_on: None,
                next_change: u64::MAX,
                leaves_at: u64::MAX,
                tap_gone_at: None,
                rarp: false,
            })
            .collect();
        lan
    }

    /// The guest path off (the daemon stopped, or gave guests up): the programs detach, the
    /// pins go with their map, the ports are given back.
    pub fn path_off(&mut self) {
        self.path = false;
        self.pins.clear();
        self.promisc.clear();
    }
}

/// A guest's FDB entry on br0: learned behind `port` (its tap, or the bond).
pub fn fdb(key: ClientKey, port: u32, removed: bool) -> NlEvent {
    let e = FdbEntry {
        ifindex: port,
        master: Some(BRIDGE_IF),
        mac: key.mac,
        vlan: key.vlan,
        kind: FdbKind::Learned,
        ext_learned: false,
        own: false,
        state: 0x02,
        flags: 0x04,
    };
    if removed {
        NlEvent::FdbRemoved(e)
    } else {
        NlEvent::Fdb(e)
    }
}

/// What the world's guests do in a second, for the shell to hand in.
pub enum GuestEvent {
    /// A guest's tap entry appeared (it arrived) or went (it left the bridge).
    Tap(usize, bool),
    /// The host's bridge learned a migrated guest's MAC on the bond.
    BehindBond(usize),
}

impl World {
    /// The bridge over the bond and its guests' entries, for a dump.
    pub fn guest_dump(&self, ev: &mut Vec<NlEvent>) {
        let Some(g) = &self.guests else {
            return;
        };
        for e in ev.iter_mut() {
            if let NlEvent::Link(l) = e {
                if l.index == BOND_IF {
                    l.master = Some(BRIDGE_IF);
                }
            }
        }
        ev.push(NlEvent::Link(crate::netlink::LinkInfo {
            index: BRIDGE_IF,
            name: "br0".into(),
            mac: Some(Mac(2, 0, 0, 0, 3, 0)),
            admin_up: true,
            oper_up: true,
            kind: Some("bridge".into()),
            ..Default::default()
        }));
        let present = g.guests.iter().filter(|x| x.present);
        ev.extend(present.map(|x| fdb(x.key, x.tap, false)));
    }

    /// The guests' arrivals, departures and demand changes this second (none in a calm).
    pub fn tick_guests(&mut self, now: u64) -> Vec<GuestEvent> {
        let mut out = Vec::new();
        let mean = self.mean_demand;
        let cap = self
            .ports
            .iter()
            .map(|p| p.capacity_bps())
            .fold(0.0, f64::max);
        let (calm, rng) = (self.calm, &mut self.rng);
        let Some(lan) = self.guests.as_mut() else {
            return out;
        };
        for (i, g) in lan.guests.iter_mut().enumerate() {
            g.rarp = false;
            if g.tap_gone_at.is_some_and(|t| now >= t) {
                g.tap_gone_at = None;
                out.push(GuestEvent::Tap(i, false));
            }
            if calm {
                continue;
            }
            if !g.present && g.tap_gone_at.is_none() && now >= g.next_change {
                g.present = true;
                g.leaves_at = now + rng.exp(4.0 * 3_600_000.0);
                g.next_change = now;
                lan.arrivals += 1;
                out.push(GuestEvent::Tap(i, true));
            }
            if g.present && now >= g.leaves_at {
                g.present = false;
                g.demand_bps = 0.0;
                g.next_change = now + rng.exp(1_800_000.0);
                if rng.chance(0.5) {
                    lan.vanished += 1;
                    out.push(GuestEvent::Tap(i, false));
                } else {
                    // Migrated: its new host's RARP reaches the switch, which floods it to
                    // every slave; the host's bridge learns it on the bond now and then (the
                    // frame came in before the pin's drop, or under the kernel alone).
                    lan.migrated += 1;
                    g.rarp = true;
                    lan.switch.learn(now, g.key, None);
                    if rng.chance(0.3) {
                        out.push(GuestEvent::BehindBond(i));
                    }
                    g.tap_gone_at = Some(now + 1000 * (1 + rng.below(5)));
                }
            } else if g.present && now >= g.next_change {
                g.demand_bps = guest_demand(rng, mean, cap, i);
                g.next_change = now + rng.exp(600_000.0);
            }
        }
        out
    }

    /// The guests' demands reaching port `p` this second: (guest, demand).
    pub fn guest_demands(&mut self, p: usize) -> Vec<(usize, f64)> {
        let live: Vec<bool> = self.ports.iter().map(|x| x.live()).collect();
        let Some(lan) = self.guests.as_mut() else {
            return Vec::new();
        };
        let (mut on, now) = (Vec::new(), lan.now);
        for (i, g) in lan.guests.iter().enumerate() {
            if !g.present || g.demand_bps <= 0.0 || !live[p] {
                continue;
            }
            let here = match lan.switch.deliver(now, g.key) {
                Delivery::Port(q) => q == p,
                Delivery::Flooded => true,
                Delivery::Away => false,
            };
            if here {
                on.push((i, g.demand_bps));
            }
        }
        on
    }

    /// What reached port `p` for the guests (`shares`, bit/s, as `guest_demands` listed them):
    /// counted on the port, and delivered where the slave accepts it.
    pub fn guests_received(&mut self, p: usize, on: &[(usize, f64)], shares: &[f64]) {
        for (&(i, _), &got) in on.iter().zip(shares) {
            self.guest_received(i, p, got);
        }
    }

    /// `got` bit/s for guest `i` reached port `p`: counted on the port, and delivered if the
    /// slave accepts it.
    pub fn guest_received(&mut self, i: usize, p: usize, got: f64) {
        let active = self.rlb.as_ref().and_then(|r| r.active);
        let ifindex = self.ports[p].ifindex;
        let Some(lan) = self.guests.as_mut() else {
            return;
        };
        let bytes = (got / 8.0) as u64;
        self.ports[p].rx_bytes += bytes;
        let g = &mut lan.guests[i];
        if g.arrived.len() < self.ports.len() {
            g.arrived.resize(self.ports.len(), 0);
        }
        g.arrived[p] += bytes;
        // A slave with its part of the guest path (the ingress program, promiscuous) takes a
        // pinned guest's frames only if pinned there, any other guest's all; one without
        // takes a guest's MAC only if it is the active one (the bridge's promiscuity).
        let accepted = match lan.pins.get(&g.key) {
            _ if !lan.path || !lan.promisc.contains(&ifindex) => Some(p) == active,
            Some(&q) => q == p,
            None => true,
        };
        if accepted {
            g.delivered_bps += got;
            g.deliveries += 1;
            g.delivered_on = Some(p);
        }
    }

    /// The start of a second for the guests, at `now`: the switch forgets the ports whose link
    /// went down since the last, and each guest's figures of the last second are cleared.
    pub fn guests_begin_second(&mut self, now: u64) {
        let Some(lan) = self.guests.as_mut() else {
            return;
        };
        lan.now = now;
        lan.down_seen.resize(self.ports.len(), 0);
        for (p, port) in self.ports.iter().enumerate() {
            if std::mem::replace(&mut lan.down_seen[p], port.down_since) != port.down_since {
                lan.switch.port_down(p);
            }
        }
        for g in &mut lan.guests {
            g.arrived.iter_mut().for_each(|b| *b = 0);
            (g.delivered_bps, g.deliveries, g.delivered_on) = (0.0, 0, None);
        }
    }

    /// The slaves guest `i`'s frames reach this second: where the switch learned it, every
    /// live slave when it does not know it, none when it is idle or elsewhere.
    pub fn guest_arrives_on(&mut self, i: usize) -> Vec<usize> {
        let live: Vec<usize> = (0..self.ports.len())
            .filter(|p| self.ports[*p].live())
            .collect();
        let Some(lan) = self.guests.as_mut() else {
            return Vec::new();
        };
        let g = &lan.guests[i];
        if !g.present || g.demand_bps <= 0.0 {
            return Vec::new();
        }
        match lan.switch.deliver(lan.now, g.key) {
            Delivery::Port(q) => live.into_iter().filter(|p| *p == q).collect(),
            Delivery::Flooded => live,
            Delivery::Away => Vec::new(),
        }
    }

    /// What the guest path's ingress programs counted this second, as the shell hands it in:
    /// each pinned guest's bytes on its slave (with a little it sent, and a migrated guest's
    /// RARP seen from the switch) and what reached it elsewhere; `port` names a world port to
    /// the engine. With them, the guests that migrated this second.
    pub fn guest_counts(
        &self,
        port: impl Fn(usize) -> Option<PortId>,
    ) -> (Vec<GuestCount>, Vec<ClientKey>) {
        let (mut counts, mut migrated) = (Vec::new(), Vec::new());
        let Some(lan) = self.guests.as_ref() else {
            return (counts, migrated);
        };
        for g in lan.guests.iter() {
            let Some(&home) = lan.pins.get(&g.key).filter(|_| lan.path) else {
                continue;
            };
            for (p, &bytes) in g.arrived.iter().enumerate() {
                if let (true, Some(id)) = (bytes > 0 && p != home, port(p)) {
                    counts.push(count(g.key, id, bytes, 0, 0));
                }
            }
            let rx = g.arrived.get(home).copied().unwrap_or(0);
            let tx = if g.demand_bps > 0.0 { rx / 50 + 60 } else { 0 };
            if g.rarp {
                migrated.push(g.key);
            }
            if let Some(id) = port(home) {
                counts.push(count(g.key, id, rx, tx, u64::from(g.rarp)));
            }
        }
        (counts, migrated)
    }

    /// The guests' frames leave: through the slave a guest is pinned to, else the bond's
    /// choice (the active slave: its ARP, or its frames with that slave's MAC written over
    /// theirs); the switch learns each where it came in. An idle guest sends nothing.
    pub fn guests_transmit(&mut self, now: u64) {
        let live: Vec<bool> = self.ports.iter().map(|x| x.live()).collect();
        let active = self.rlb.as_ref().and_then(|r| r.active);
        let Some(lan) = self.guests.as_mut() else {
            return;
        };
        for g in lan
            .guests
            .iter()
            .filter(|g| g.present && g.demand_bps > 0.0)
        {
            let pinned = lan.pins.get(&g.key).copied().filter(|_| lan.path);
            if let Some(p) = pinned.or(active).filter(|p| live[*p]) {
                lan.switch.learn(now, g.key, Some(p));
            }
        }
    }

    /// The guests' load on each port this second, bit/s (the balance rule weighs it).
    pub fn guest_load(&self, load: &mut [f64]) {
        let Some(lan) = &self.guests else {
            return;
        };
        for g in &lan.guests {
            for (l, b) in load.iter_mut().zip(&g.arrived) {
                *l += *b as f64 * 8.0;
            }
        }
    }
}

/// A guest's demand: most light, some idle, guests 0 and 1 heavy (over two fifths of a slave
/// each: the two on one slave overload it by themselves, and only a guest's move mends it).
fn guest_demand(rng: &mut crate::simulate::generate::Rng, mean: f64, cap: f64, slot: usize) -> f64 {
    let r = rng.unit();
    if slot < 2 {
        cap * (0.41 + 0.04 * rng.unit())
    } else if r < 0.2 {
        0.0
    } else {
        0.5 * mean * rng.unit()
    }
}

fn count(key: ClientKey, port: PortId, rx: u64, tx: u64, seen: u64) -> GuestCount {
    GuestCount {
        key,
        port,
        rx_bytes: rx,
        tx_bytes: tx,
        seen_from_switch: seen,
    }
}
