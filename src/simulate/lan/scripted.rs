//! A LAN an operator describes (`rlbd simulate`'s scenario) rather than one a seed draws:
//! named ports of given speeds (plain, or the slaves of a balance-alb bond whose driver
//! assigned each client the slave it starts on), each client placed on one with a confirmed
//! entry for the server's address in its cache and in the server's table, nobody arriving or
//! leaving. All
//! else is the month's model: a client's cache takes or refuses rlbd's frames as Linux does,
//! it re-resolves when its port goes quiet, and the server's table forgets the silent.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};

use ipnetwork::IpNetwork;

use super::bond::{Rlb, BOND_IF};
use super::clients::{Client, Entry, State, SERVER};
use super::ports::Port;
use super::{ServerNeigh, World};
use crate::simulate::generate::Rng;
use crate::Mac;

impl World {
    /// `ports` (up) and `clients` (each with its entry), the server at `nets` on the first
    /// port, or with `bonded` on bond0, whose first slave is active (it holds the bond's MAC)
    /// and whose driver assigned each client the slave its entry names; `seed` draws who
    /// answers a broadcast first.
    pub fn scripted(
        seed: u64,
        ports: Vec<Port>,
        clients: Vec<Client>,
        nets: Vec<IpNetwork>,
        bonded: bool,
    ) -> World {
        let home = match ports.first() {
            _ if bonded => BOND_IF,
            Some(p) => p.ifindex,
            None => 0,
        };
        let rlb = bonded.then(|| {
            let mut rlb = Rlb::with_active_first();
            for c in &clients {
                let on = c
                    .target()
                    .and_then(|m| ports.iter().position(|p| p.mac == m));
                if let Some(p) = on {
                    rlb.assign(c.ip, p);
                }
            }
            rlb
        });
        let neigh: HashMap<IpAddr, ServerNeigh> = clients
            .iter()
            .filter_map(|c| {
                let mac = c.target().map(|_| c.mac)?;
                Some((
                    IpAddr::V4(c.ip),
                    ServerNeigh {
                        mac,
                        heard: 0,
                        ifindex: home,
                    },
                ))
            })
            .collect();
        World {
            population: clients.len(),
            clients,
            neigh,
            // Nobody arrives or leaves: the scenario says who sends what.
            calm: true,
            rlb,
            ..World::bare(Rng::new(seed), ports, nets)
        }
    }
}

impl Client {
    /// A client at `ip` (IPv4, untagged) whose entry for the server's address names `on`,
    /// confirmed at `now`.
    pub fn placed(mac: Mac, ip: Ipv4Addr, on: Mac, now: u64) -> Client {
        Client {
            mac,
            ip,
            server: SERVER,
            vlan: 0,
            ip6: None,
            dual: false,
            present: true,
            demand_bps: 0.0,
            delivered_bps: 0.0,
            entry: Some(Entry {
                mac: on,
                state: State::Reachable,
                since: now,
                updated: now,
                probes: 0,
            }),
            next_change: u64::MAX,
            leaves_at: u64::MAX,
        }
    }
}
