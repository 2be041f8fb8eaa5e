//! The switch in front of the slaves, as far as guests need it: it learns each MAC (on its
//! VLAN) on the port it last received a frame from, forgets a port whose link goes down and an
//! entry not refreshed for `AGING_MS`, and floods a frame for a MAC it does not know to every
//! port. Its ports are the server's slaves by world index; `None` is the rest of the LAN (a
//! guest that migrated to another host is learned there).

use std::collections::HashMap;

use crate::client::ClientKey;

/// The usual age limit of a switch's table (300 s).
pub const AGING_MS: u64 = 300_000;

/// Where a frame for a guest arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// On one slave: the switch learned the MAC there.
    Port(usize),
    /// On every live slave: the switch does not know the MAC.
    Flooded,
    /// Elsewhere on the LAN: the MAC was learned away from the server.
    Away,
}

#[derive(Debug, Default)]
pub struct Switch {
    /// MAC on its VLAN -> (the port it was learned on, when last heard).
    table: HashMap<ClientKey, (Option<usize>, u64)>,
}

impl Switch {
    /// A frame from `key` arrived on `port` (a slave, or `None`: the rest of the LAN).
    pub fn learn(&mut self, now: u64, key: ClientKey, port: Option<usize>) {
        self.table.insert(key, (port, now));
    }

    /// Port `port`'s link went down: what was learned there is forgotten.
    pub fn port_down(&mut self, port: usize) {
        self.table.retain(|_, (p, _)| *p != Some(port));
    }

    /// Where a frame for `key` goes now.
    pub fn deliver(&mut self, now: u64, key: ClientKey) -> Delivery {
        match self.table.get(&key) {
            Some((_, heard)) if now >= heard + AGING_MS => {
                self.table.remove(&key);
                Delivery::Flooded
            }
            Some((Some(p), _)) => Delivery::Port(*p),
            Some((None, _)) => Delivery::Away,
            None => Delivery::Flooded,
        }
    }

    /// The slave `key` is learned on, if one.
    pub fn port_of(&self, key: ClientKey) -> Option<usize> {
        self.table.get(&key).and_then(|(p, _)| *p)
    }
}
