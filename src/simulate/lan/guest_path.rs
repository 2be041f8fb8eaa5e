//! The daemon's guest path as the LAN sees it: the engine's guest outputs carried out as the
//! shell carries them out (`src/daemon/guests.rs`), for both shells that drive this LAN
//! (`rlbd simulate`'s and the month's), each of which adds its own bookkeeping.

use crate::client::ClientKey;
use crate::engine::Output;

use super::World;

/// What carrying out a guest output changed on the LAN ([`World::carry_out_guest`]).
#[derive(Debug, PartialEq)]
pub enum Carried {
    /// The guest path went on or off; a new path starts from nothing.
    Path,
    /// A slave is held promiscuous.
    Port,
    /// Guest `key` is pinned to world port `to`, and was to `from` before.
    Pinned {
        key: ClientKey,
        to: usize,
        from: Option<usize>,
    },
    /// The engine pinned guest `key` to port `name`, which is no slave of the LAN.
    NoSlave { key: ClientKey, name: String },
    /// Guest `key`'s pin is gone.
    Unpinned(ClientKey),
    /// Not a guest output.
    Nothing,
}

impl World {
    /// A guest output of the engine, carried out on the LAN as the daemon's shell does
    /// (`src/daemon/guests.rs`): the path on or off, a slave held promiscuous, a pin set or
    /// removed. `None` on a LAN without guests.
    pub fn carry_out_guest(&mut self, out: &Output) -> Option<Carried> {
        let ports = &self.ports;
        let lan = self.guests.as_mut()?;
        Some(match out {
            Output::GuestPath { on, .. } => {
                lan.path_off();
                lan.path = *on;
                Carried::Path
            }
            Output::GuestPort { port } => {
                lan.promisc.insert(port.ifindex);
                Carried::Port
            }
            Output::PinGuest { key, port } => {
                match ports.iter().position(|w| w.ifindex == port.ifindex) {
                    Some(to) => {
                        let from = lan.pins.insert(*key, to);
                        Carried::Pinned {
                            key: *key,
                            to,
                            from,
                        }
                    }
                    None => Carried::NoSlave {
                        key: *key,
                        name: port.name.to_string(),
                    },
                }
            }
            Output::UnpinGuest { key } => {
                lan.pins.remove(key);
                Carried::Unpinned(*key)
            }
            _ => Carried::Nothing,
        })
    }
}
