//! When the server sends its own frames in the month: a broadcast request now and then, and
//! more rarely a re-announcement (the world's side is `rlbd::simulate::lan::server_arp`).

use std::net::IpAddr;

use rlbd::simulate::lan::server_arp::{BROADCAST_MS, REANNOUNCE_MS};

use super::driver::Driver;
use super::setup::{Fault, Faults};

/// Once a second (not in a calm): now and then a broadcast request for a client the server has
/// no entry for (any, when it has them all), and more rarely a re-announcement.
pub fn server_arp(d: &mut Driver, faults: Faults) {
    if d.world.calm || !faults.has(Fault::ServerArp) {
        return;
    }
    let now = d.now;
    let rng = &mut d.world.rng;
    let (broadcast, reannounce) = (
        rng.chance(1000.0 / BROADCAST_MS),
        rng.chance(1000.0 / REANNOUNCE_MS),
    );
    let pick = rng.below(d.world.clients.len().max(1) as u64) as usize;
    if broadcast && !d.world.clients.is_empty() {
        let w = &d.world;
        let unknown = (0..w.clients.len())
            .map(|k| (pick + k) % w.clients.len())
            .find(|c| {
                let cl = &w.clients[*c];
                cl.present && cl.ip6.is_none() && !w.neigh.contains_key(&IpAddr::V4(cl.ip))
            });
        let c = unknown.unwrap_or(pick);
        if d.world.server_broadcast(now, c) {
            d.stats.server_broadcasts += 1;
            let ip = d.world.clients[c].ip;
            d.trace
                .note(now, || format!("the server broadcasts a request for {ip}"));
        }
    }
    if reannounce && d.world.server_reannounce(now) {
        d.stats.reannouncements += 1;
        d.trace
            .note(now, || "the server re-announces its addresses".into());
    }
}
