//! Where a guest goes when its rate is not known: a new guest, one whose port failed, or a
//! pinned one whose port is back.

use super::{ClientKey, GuestAction, Guests};
use crate::policy::model::PortIndex;
use crate::policy::{PortView, Reason};
use crate::steer::Rule;

/// The live port with the fewest guests (`per_port`), then the least utilized, then the lowest
/// index: new guests weigh nothing yet, so by load alone they would all land on one port.
pub fn least_loaded(ports: &[PortView], per_port: &[usize]) -> Option<PortIndex> {
    ports
        .iter()
        .enumerate()
        .filter(|(_, v)| v.up && v.capacity_bps > 0.0)
        .min_by(|(a, va), (b, vb)| {
            let (na, nb) = (per_port.get(*a).copied(), per_port.get(*b).copied());
            na.cmp(&nb)
                .then(va.utilization().total_cmp(&vb.utilization()))
                .then(a.cmp(b))
        })
        .map(|(i, _)| i)
}

impl Guests {
    /// Ports went down: their guests move to live ports at once (not waiting for the second).
    pub fn fail_over(&mut self, now: u64, ports: &[PortView], out: &mut Vec<GuestAction>) {
        if !self.enabled() || self.off.has(Rule::GuestFailover) {
            return;
        }
        let keys: Vec<ClientKey> = self
            .list
            .values()
            .filter(|g| g.port.is_some_and(|p| ports.get(p).is_none_or(|v| !v.up)))
            .map(|g| g.key)
            .collect();
        for key in keys {
            let to = least_loaded(ports, self.guests_per_port(ports.len()).as_slice());
            if let Some(to) = to {
                self.moved(now, key, to, Reason::Failover, out);
            } else if let Some(g) = self.list.get_mut(&key) {
                // No live port: it waits, unpinned, for one to come up.
                g.port = None;
                out.push(GuestAction::Unpin { key });
            }
        }
        self.place_unplaced(now, ports, out);
    }

    /// Guests with no port yet go to the port with the fewest guests (their rates are not known
    /// yet: by count, as the driver's round-robin would), or to the port they are pinned to.
    pub(super) fn place_unplaced(
        &mut self,
        now: u64,
        ports: &[PortView],
        out: &mut Vec<GuestAction>,
    ) {
        let new: Vec<ClientKey> = self
            .list
            .values()
            .filter(|g| g.port.is_none())
            .map(|g| g.key)
            .collect();
        for key in new {
            let per_port = self.guests_per_port(ports.len());
            let pin = self
                .cfg
                .pinned_to(key.mac)
                .and_then(|n| self.names.iter().position(|x| x == n));
            let usable = |p: &PortIndex| ports.get(*p).is_some_and(|v| v.up);
            let before = self.remembered.remove(&key).filter(|r| usable(&r.port));
            let to = pin
                .filter(usable)
                .or(before.map(|r| r.port))
                .or_else(|| least_loaded(ports, &per_port));
            let (Some(to), Some(g)) = (to, self.list.get_mut(&key)) else {
                continue;
            };
            if let Some(r) = before.filter(|r| r.port == to) {
                (g.moved_ms, g.last_move) = (r.moved_ms, r.last_move);
            }
            g.port = Some(to);
            g.last_announce_ms = now;
            self.totals.placed += 1;
            out.push(GuestAction::Pin {
                key,
                port: to,
                reason: None,
            });
        }
    }

    /// A pinned guest that failed over goes back to its port once it is up again.
    pub(super) fn pins_home(&mut self, now: u64, ports: &[PortView], out: &mut Vec<GuestAction>) {
        let home: Vec<(ClientKey, PortIndex)> = self
            .list
            .values()
            .filter(|g| g.pinned)
            .filter_map(|g| {
                let p = self
                    .names
                    .iter()
                    .position(|n| Some(n.as_str()) == self.cfg.pinned_to(g.key.mac))?;
                (ports.get(p).is_some_and(|v| v.up) && g.port != Some(p)).then_some((g.key, p))
            })
            .collect();
        for (key, p) in home {
            self.moved(now, key, p, Reason::Placement, out);
        }
    }
}
