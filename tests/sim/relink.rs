//! The links' events that come between the seconds: a carrier that flaps (down, and up again
//! 0.2 to 3 s later), a slave renamed while up, a slave released from the bond and a new one
//! enslaved a little later; and the check that the engine's ports stay the kernel's (by
//! ifindex: the name, the MAC, the carrier), whatever happened to them.

use rlbd::engine::{PortRef, SendTag};

use super::checks::Check;
use super::driver::Driver;
use super::run::port_set;

/// A link event due at a time of its own.
#[derive(Debug, Clone, Copy)]
pub enum LinkEvent {
    Carrier(usize, bool),
    /// A new slave of this capacity (Mbit/s) is enslaved.
    Enslave(f64),
}

impl Driver {
    /// The link events due before `until`, each at its own millisecond (the engine's deadlines
    /// before it run first).
    pub fn links_due(&mut self, until: u64) {
        while let Some(i) = (0..self.due_links.len())
            .filter(|i| self.due_links[*i].0 < until)
            .min_by_key(|i| self.due_links[*i].0)
        {
            let (at, ev) = self.due_links.remove(i);
            self.run_deadlines(at);
            self.now = self.now.max(at);
            self.link_event(ev);
        }
    }

    fn link_event(&mut self, ev: LinkEvent) {
        let w = &self.world;
        match ev {
            LinkEvent::Carrier(p, false) => {
                let live = w.ports.iter().filter(|p| p.live()).count();
                if w.ports[p].live() && live > 1 {
                    port_set(self, p, false);
                }
            }
            LinkEvent::Carrier(p, true) => {
                if !w.ports[p].up && w.ports[p].enslaved {
                    port_set(self, p, true);
                }
            }
            LinkEvent::Enslave(capacity) => {
                let p = self.world.enslave(self.now, capacity);
                self.stats.enslaved += 1;
                let name = self.world.ports[p].name.clone();
                self.trace.note(self.now, || {
                    format!("{name} enslaved to bond0 ({capacity} Mbit/s)")
                });
                self.flush_world();
                self.ports_agree();
            }
        }
    }

    /// Port `p`'s carrier goes down within the next second and comes back 0.2 to 3 s later.
    pub fn flap(&mut self, p: usize) {
        let rng = &mut self.world.rng;
        let down = self.now + 1 + rng.below(999);
        let up = down + 200 + rng.below(2801);
        self.stats.flaps += 1;
        self.due_links.push((down, LinkEvent::Carrier(p, false)));
        self.due_links.push((up, LinkEvent::Carrier(p, true)));
    }

    /// A slave renamed while up, or one released from the bond and a new one enslaved 5 s to
    /// 2 min later (at the capacity the old one had).
    pub fn relink(&mut self, p: usize) {
        let now = self.now;
        if self.world.rng.chance(0.5) {
            if !self.world.ports[p].live() {
                return;
            }
            let old = self.world.ports[p].name.clone();
            let name = self.world.rename(p);
            self.stats.renames += 1;
            self.trace
                .note(now, || format!("{old} renamed {name} (still up)"));
        } else {
            let later = now + 5_000 + self.world.rng.below(115_000);
            // The first slave from `p` on that the driver lets go without a swap of MACs.
            let n = self.world.ports.len();
            let Some(p) = (0..n)
                .map(|k| (p + k) % n)
                .find(|q| self.world.release(now, *q))
            else {
                return;
            };
            let capacity = self.world.ports[p].capacity_mbps;
            self.stats.releases += 1;
            let name = self.world.ports[p].name.clone();
            self.trace
                .note(now, || format!("{name} released from bond0"));
            self.due_links.push((later, LinkEvent::Enslave(capacity)));
        }
        self.flush_world();
        self.ports_agree();
    }

    /// The engine's ports are the kernel's: every slave (or named port) by its ifindex, with its
    /// name, MAC, carrier and capacity as the kernel last told them, and no other.
    pub fn ports_agree(&mut self) {
        // Lost in an overrun: checked again once the re-dump is in (`resync.rs`).
        if self.down.is_some() || self.nl.losing.is_some() {
            return;
        }
        let ours = self.engine.ports();
        let present = ours.list.iter().filter(|p| p.present);
        for e in present {
            let w = self.world.ports.iter().find(|w| w.ifindex == e.ifindex);
            // Its capacity too: configured by name, else the link's speed (a renamed slave's).
            let same = w.is_some_and(|w| {
                w.enslaved
                    && w.name == e.name
                    && w.mac == e.mac
                    && w.up == e.up
                    && w.capacity_bps() == e.capacity_bps
            });
            if !same {
                let why = format!(
                    "the engine has port {} (ifindex {}, MAC {}, up {}, {} bit/s), the kernel {:?}",
                    e.name, e.ifindex, e.mac, e.up, e.capacity_bps, w
                );
                return self.fail(Check::PortView, why);
            }
        }
        let missing = self.world.ports.iter().find(|w| {
            w.enslaved
                && !ours
                    .list
                    .iter()
                    .any(|e| e.present && e.ifindex == w.ifindex)
        });
        if let Some(w) = missing {
            let why = format!(
                "the kernel's port {} (ifindex {}) is not the engine's",
                w.name, w.ifindex
            );
            self.fail(Check::PortView, why);
        }
    }

    /// No update leaves by a port the engine was told is down or gone: it names that port's
    /// MAC, so a client that took it would send to a dead port (a move decided before a flap
    /// and sent after it, a retry, a re-assertion).
    pub fn dead_target(&mut self, port: &PortRef, tag: &SendTag) {
        if !matches!(tag, SendTag::Update { .. }) {
            return;
        }
        let list = &self.engine.ports().list;
        let known = list.iter().find(|p| p.present && p.ifindex == port.ifindex);
        if known.is_some_and(|p| p.usable()) {
            return;
        }
        let why = format!(
            "an update out of {} (ifindex {}), which the engine knows is {}: {tag:?}",
            port.name,
            port.ifindex,
            if known.is_some() { "down" } else { "gone" }
        );
        self.fail(Check::DeadTarget, why);
    }
}
