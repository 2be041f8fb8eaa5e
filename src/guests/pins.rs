//! The guests' pins across a restart: what the state file keeps of each placed guest, and an
//! earlier daemon's pins taken over.

use super::{GuestAction, Guests};
use crate::client::ClientKey;
use crate::policy::model::PortIndex;
use crate::policy::{PortView, Reason};

/// Where a guest is pinned and its last move, as the state file keeps them across a restart.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GuestPin {
    pub key: ClientKey,
    pub port: PortIndex,
    pub moved_ms: Option<u64>,
    pub last_move: Option<(PortIndex, Reason)>,
}

impl Guests {
    /// Every placed guest's pin and last move, for the state file.
    pub fn export(&self) -> Vec<GuestPin> {
        self.list
            .values()
            .filter_map(|g| {
                Some(GuestPin {
                    key: g.key,
                    port: g.port?,
                    moved_ms: g.moved_ms,
                    last_move: g.last_move,
                })
            })
            .collect()
    }

    /// An earlier daemon's pins (a restart): a guest already learned goes back to its port
    /// (its hold-down kept), one not learned yet will when it is.
    pub fn import(&mut self, pins: Vec<GuestPin>, ports: &[PortView], out: &mut Vec<GuestAction>) {
        for pin in pins {
            let Some(g) = self.list.get_mut(&pin.key) else {
                self.remembered.insert(pin.key, pin);
                continue;
            };
            if !ports.get(pin.port).is_some_and(|v| v.up) {
                continue;
            }
            (g.moved_ms, g.last_move) = (pin.moved_ms, pin.last_move);
            if g.port != Some(pin.port) {
                g.port = Some(pin.port);
                out.push(GuestAction::Pin {
                    key: pin.key,
                    port: pin.port,
                    reason: None,
                });
            }
        }
    }
}
