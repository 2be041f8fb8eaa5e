//! The checks of rlbd's moves that run once a second from the wire's side: an undone move told
//! again, and every move in a state file soon after it.

use std::net::IpAddr;

use super::checks::Check;
use super::driver::Driver;
use super::moves::Excuse;

impl Driver {
    /// Each move a host frame undid is told again, or excused (a client too faint for its
    /// port's sampling too: the engine may have forgotten its move as idle); one that found the
    /// shared budget spent waits its turn, and is told within a turn per move held.
    pub fn reasserted(&mut self) {
        let now = self.now;
        self.rules.moves.watch(now, &self.world);
        let faint = self.faint_clients();
        // A client too faint for its port's sampling may look idle to the engine, which then
        // forgets its move: for the state file's check too, that second counts as idle.
        self.rules.moves.seen_idle(now, &faint);
        let (world, rules) = (&self.world, &mut self.rules);
        let (limits, excluded) = (&rules.limits, &rules.excluded);
        let (refusing, restarted) = (self.refusing_at, self.restarted_at);
        let excused = |(mac, vlan): (rlbd::Mac, u16), since: u64| {
            let cl = world
                .clients
                .iter()
                .find(|c| c.mac == mac && c.vlan == vlan);
            let confirmed = cl.is_some_and(|c| {
                let ip = c.ip6.map_or(IpAddr::V4(c.ip), IpAddr::V6);
                world.confirms_at(ip, mac)
            });
            let excluded = cl.is_some_and(|c| c.ip6.is_none() && excluded.contains(&c.ip));
            let since = since.saturating_sub(1000);
            if !confirmed
                || excluded
                || faint.contains(&(mac, vlan))
                || limits.client_tight_since(mac, since, now)
                || refusing.is_some_and(|t| t + 1000 >= since)
                || restarted + 1000 >= since
            {
                Excuse::Yes
            } else if limits.all_tight_since(since, now) {
                Excuse::Turn
            } else {
                Excuse::No
            }
        };
        let bounds = (2000, rules.hold_down_ms, limits.spacing_ms());
        if let Err(e) = rules.moves.check_reasserted(now, world, bounds, excused) {
            self.fail(Check::Reassertion, e);
        }
    }

    /// A move the wire saw is in a state file handed out within two seconds: a daemon killed
    /// after that keeps it.
    pub fn state_file_follows(&mut self) {
        let moved = self.rules.moves.last_change;
        let written = self.state_written_at.is_some_and(|w| w >= moved);
        if moved > 0 && self.now >= moved + 2000 && !written {
            let why = format!(
                "the move at {moved} ms is in no state file (last written at {:?} ms)",
                self.state_written_at
            );
            self.fail(Check::StateFile, why);
        }
    }
}
