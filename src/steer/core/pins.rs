//! The clients `[clients]` names: an excluded one is never moved and never sent an update (it
//! is still counted and shown); a pinned one is put on its port, kept there like any move
//! (re-asserted), failed over when that port goes down, and brought back once it is up and
//! stable again. Neither is ever offered to the planner: their load is fixed where it is.

use std::net::IpAddr;

use log::Level;

use super::{log, Action, ClientSnap, Ctx, Moved, PortIndex, Steerer};
use crate::client::ClientKey;
use crate::config::{ClientMark, MarkRef};
use crate::host::{Claim, Talk};
use crate::policy::model::utilization;
use crate::policy::{Move, PortView, Reason};

/// The addresses a client uses, as its table entry knows them (no allocation: asked of every
/// client every second).
fn talk_addrs(t: &Talk) -> impl Iterator<Item = IpAddr> + Clone {
    let v4 = t.v4.map(IpAddr::from);
    v4.into_iter().chain(t.v6.map(IpAddr::from))
}

impl Steerer {
    /// How `[clients]` treats a client with `key` using `addrs` (for `rlbd status`).
    pub fn client_mark(&self, key: &ClientKey, addrs: &[IpAddr]) -> Option<ClientMark> {
        if self.cfg.clients.is_empty() {
            return None;
        }
        self.cfg.clients.mark(key.mac, addrs)
    }

    /// How `[clients]` treats the client `talk` describes.
    pub(super) fn mark(&self, key: &ClientKey, talk: &Talk) -> Option<MarkRef<'_>> {
        if self.cfg.clients.is_empty() {
            return None;
        }
        self.cfg.clients.mark_ref(key.mac, talk_addrs(talk))
    }

    pub(super) fn is_excluded(&self, key: &ClientKey, talk: &Talk) -> bool {
        self.mark(key, talk) == Some(MarkRef::Excluded)
    }

    /// Whether the client of move `m` is excluded now (a reload may have excluded it since).
    pub(super) fn move_excluded(&self, key: &ClientKey, m: &Moved) -> bool {
        let addrs = m.claims.iter().map(Claim::client);
        !self.cfg.clients.is_empty()
            && self.cfg.clients.mark_ref(key.mac, addrs) == Some(MarkRef::Excluded)
    }

    /// Forgets the moves of clients the configuration now excludes: nothing more is sent to
    /// them, and the kernel places them again. Returns how many were forgotten.
    pub(super) fn drop_excluded(&mut self) -> usize {
        if self.cfg.clients.is_empty() {
            return 0;
        }
        let rules = &self.cfg.clients;
        let before = self.moved.len();
        self.moved.retain(|k, m| {
            let addrs = m.claims.iter().map(Claim::client);
            rules.mark_ref(k.mac, addrs) != Some(MarkRef::Excluded)
        });
        before - self.moved.len()
    }

    /// Forgets the move of a client excluded by an address its move did not claim (moved
    /// while it used only another one): from now on it is sent nothing.
    fn forget_excluded(&mut self, c: &ClientSnap, out: &mut Vec<Action>) {
        if self.moved.remove(&c.key).is_some() {
            let text = format!("{}: excluded in [clients]; its move is forgotten", c.key);
            log(out, Level::Info, text);
        }
    }

    /// The port named `name`, if the daemon has it.
    fn port_named(ctx: &Ctx, name: &str) -> Option<PortIndex> {
        ctx.ports.iter().position(|p| p.name == name)
    }

    /// Puts each pinned client of `clients` on its port when that port may take clients (in
    /// `targets`, the planner's view of `ports`, a port just back up has no capacity yet), and
    /// re-asserts one whose frames still arrive elsewhere well after its move.
    pub(super) fn place_pinned(
        &mut self,
        now: u64,
        ports: &[PortView],
        targets: &[PortView],
        clients: &[ClientSnap],
        ctx: &Ctx,
        out: &mut Vec<Action>,
    ) {
        if self.cfg.clients.is_empty() {
            return;
        }
        for (i, c) in clients.iter().enumerate() {
            let name = match self.mark(&c.key, &c.talk) {
                Some(MarkRef::Pinned(name)) => name.to_string(),
                Some(MarkRef::Excluded) => {
                    self.forget_excluded(c, out);
                    continue;
                }
                None => continue,
            };
            let Some(to) = Self::port_named(ctx, &name) else {
                continue;
            };
            let ready = targets
                .get(to)
                .is_some_and(|p| p.up && p.capacity_bps > 0.0)
                && ctx.ports[to].usable;
            let r = self.record(&c.key);
            if !ready || r.refused_now(now) {
                continue;
            }
            match r.moved {
                Some(m) if m.port == to => {
                    if self.sent_there_since_move(c, m, now) {
                        let why = format!(
                            "pinned to {name}, its frames arrive on {}",
                            ctx.port_name(c.port)
                        );
                        self.reassert(now, c.key, &why, ctx, out);
                    }
                }
                moved => {
                    let from = Self::current_port(c, moved, ports);
                    let mv = pin_move(i, from, to, c.rate_bps, ports);
                    let why = if from == to {
                        format!("pinned to {name} in [clients]: kept there from now on")
                    } else {
                        format!("pinned to {name} in [clients]")
                    };
                    if !self.apply_move(now, c.key, &c.talk, &mv, &why, ctx, out) {
                        let text = format!("{} pinned to {name}: not placed this second", c.key);
                        log(out, Level::Debug, text);
                    }
                }
            }
        }
    }
}

/// The move that puts a pinned client on `to`; its figures only feed the log line.
fn pin_move(client: usize, from: PortIndex, to: PortIndex, rate: f64, ports: &[PortView]) -> Move {
    let util = |p: PortIndex, delta: f64| {
        ports.get(p).map_or((0.0, 0.0), |v| {
            let before = utilization(v.rx_bps, v.capacity_bps);
            (before, utilization(v.rx_bps + delta, v.capacity_bps))
        })
    };
    let (from_util, to_util) = if from == to {
        (util(from, 0.0), util(to, 0.0))
    } else {
        (util(from, -rate), util(to, rate))
    };
    Move {
        client,
        from,
        to,
        rate_bps: rate,
        reason: Reason::Placement,
        from_util,
        to_util,
        exchange: false,
        gathers: false,
    }
}
