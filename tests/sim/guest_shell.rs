//! The shell's part for the guests (what `src/daemon/guests.rs` and `edge.rs` do): the guest
//! path on and off, each port's ingress program and promiscuous hold, the pins map, the
//! announcements on the wire, the second's per-slave counts handed in before the clients'; and
//! the world's guest events (a tap's FDB entry, a migrated guest learned on the bond) handed in
//! as netlink. The announcement and the release are checked here, batch by batch.

use rlbd::engine::{Input, Output, PortId, SendTag};
use rlbd::logging::{Fields, MessageId};

use super::checks::Check;
use super::driver::Driver;
use rlbd::simulate::lan::bond::{untag, BOND_IF};
use rlbd::simulate::lan::guest_path::Carried;
use rlbd::simulate::lan::guests::{fdb, GuestEvent};

impl Driver {
    /// A guest output of the engine, carried out as the shell does.
    pub(super) fn guest_output(&mut self, out: Output) {
        let Some(carried) = self.world.carry_out_guest(&out) else {
            let why = format!("a guest output on a host without guests: {out:?}");
            return self.fail(Check::Guests, why);
        };
        match carried {
            // A new engine's path (a restart) starts from nothing, as the daemon's would.
            Carried::Path => self.rules.guests.forget(),
            Carried::Pinned { key, to, from } => {
                if let Some(old) = from {
                    self.rules.guests.from.insert(key, old);
                }
                self.rules.guests.unannounced.push((key, to));
            }
            Carried::NoSlave { key, name } => {
                let why = format!("{key} pinned to {name}, which is no slave");
                self.fail(Check::GuestFailover, why);
            }
            Carried::Unpinned(key) => self.rules.guests.released(key),
            Carried::Port | Carried::Nothing => {}
        }
    }

    /// An announcement rlbd sent (`ok`: the kernel took it) out of world port `wp`: from the
    /// guest's MAC on its VLAN, where it is pinned; the switch learns it there.
    pub(super) fn guest_sent(&mut self, tag: &SendTag, wp: Option<usize>, ok: bool, frame: &[u8]) {
        let SendTag::Announce { guest, .. } = *tag else {
            return;
        };
        let now = self.now;
        let Some(lan) = self.world.guests.as_mut() else {
            return self.fail(Check::Guests, format!("an announcement of {guest}"));
        };
        let (vlan, inner) = untag(frame);
        let from_guest = inner.len() >= 12 && inner[6..12] == guest.mac.octets();
        let pinned = wp.is_some() && lan.pins.get(&guest).copied() == wp;
        if !from_guest || vlan != guest.vlan || !pinned {
            let why = format!(
                "announcement of {guest} out of port {wp:?} (pinned to {:?}): VLAN {vlan}, \
                 from the guest's MAC {from_guest}",
                lan.pins.get(&guest)
            );
            return self.fail(Check::GuestAnnounce, why);
        }
        self.rules
            .guests
            .unannounced
            .retain(|x| (x.0, Some(x.1)) != (guest, wp));
        self.rules.guests.announced += 1;
        if let (true, Some(p)) = (ok, wp) {
            lan.switch.learn(now, guest, Some(p));
        }
    }

    /// A guest's move, from its log record: the threshold and the hold-down checked.
    pub(super) fn guest_log(&mut self, fields: &Fields) {
        let (Some(MessageId::GuestMove), Some(mac), Some(reason)) =
            (fields.id, fields.client_mac, fields.reason)
        else {
            return;
        };
        let key = rlbd::client::ClientKey::new(mac, fields.vlan);
        let hold_ms = self.settings.policy.hold_down * 1000;
        let now = self.now;
        let Some(lan) = self.world.guests.as_mut() else {
            return;
        };
        let to = lan.pins.get(&key).copied();
        if let Err((check, why)) = self.rules.guests.on_move(now, (key, to), reason, hold_ms) {
            self.fail(check, why);
        }
    }

    /// The end of a batch: every pin of it announced; no guest pinned to a port the engine
    /// knows is down or gone.
    pub(super) fn guest_batch_done(&mut self) {
        let Some(lan) = self.world.guests.as_mut() else {
            return;
        };
        if let Some((key, p)) = self.rules.guests.unannounced.first().copied() {
            self.rules.guests.unannounced.clear();
            let why = format!("guest {key} pinned to port {p} and not announced there at once");
            return self.fail(Check::GuestAnnounce, why);
        }
        let list = &self.engine.ports().list;
        for (key, &p) in lan.pins.iter().filter(|_| lan.path) {
            let ifindex = self.world.ports[p].ifindex;
            let known = list.iter().find(|e| e.present && e.ifindex == ifindex);
            if !known.is_some_and(|e| e.usable()) {
                let why = format!(
                    "guest {key} pinned to {} after the batch that told the engine it is {}",
                    self.world.ports[p].name,
                    if known.is_some() { "down" } else { "gone" }
                );
                return self.fail(Check::GuestFailover, why);
            }
        }
    }

    /// Before the second's traffic: the daemon down (the path with it), links that went down
    /// (the switch forgets them), the guests' arrivals and departures handed in.
    pub(super) fn guests_before_traffic(&mut self) {
        let (now, down) = (self.now, self.down.is_some());
        let Some(lan) = self.world.guests.as_mut() else {
            return;
        };
        if down {
            lan.path_off();
        }
        self.world.guests_begin_second(now);
        for ev in self.world.tick_guests(now) {
            self.guest_event(ev);
        }
    }

    /// A tap's entry or a migrated guest's MAC on the bond, handed in: a guest that leaves is
    /// released in that batch.
    fn guest_event(&mut self, ev: GuestEvent) {
        let Some(lan) = self.world.guests.as_ref() else {
            return;
        };
        let (input, key, leaves) = match ev {
            GuestEvent::Tap(i, present) => {
                let g = &lan.guests[i];
                (fdb(g.key, g.tap, !present), g.key, !present)
            }
            GuestEvent::BehindBond(i) => {
                let key = lan.guests[i].key;
                (fdb(key, BOND_IF, false), key, true)
            }
        };
        let pinned = lan.path && lan.pins.contains_key(&key);
        // Never lost in an overrun (the release is checked in this batch), but seen by the
        // reader's mirror, so a re-dump's sweep knows it.
        self.nl.mirror.observe(&input);
        self.input(Input::Netlink(&[input]));
        self.guest_released(leaves && pinned && self.down.is_none(), key);
    }

    fn guest_released(&mut self, expected: bool, key: rlbd::client::ClientKey) {
        let Some(lan) = self.world.guests.as_mut() else {
            return;
        };
        if !expected {
            return;
        }
        self.rules.guests.released += 1;
        if lan.pins.contains_key(&key) {
            let why = format!("guest {key} left the host and is still pinned after that batch");
            self.fail(Check::GuestRelease, why);
        }
    }

    /// After the second's traffic: the guests' counts handed in (before the clients', as the
    /// daemon does), a migrated guest's RARP among them; then the guests transmit, and the
    /// rules of the second are checked.
    pub(super) fn guests_after_traffic(&mut self) {
        if self.world.guests.is_none() {
            return;
        }
        let map = &self.map;
        let (counts, migrated) = self
            .world
            .guest_counts(|p| map.get(p).copied().flatten().map(PortId::new));
        if !counts.is_empty() {
            self.input(Input::GuestCounts(&counts));
        }
        for key in migrated {
            self.guest_released(self.down.is_none(), key);
        }
        self.world.guests_transmit(self.now);
        let threshold = self.rules.balance.threshold;
        let watching = self.down.is_none() && self.now >= self.restarted_at + 2000;
        let p = &self.settings.policy;
        let policy = (threshold, p.min_gain, p.hold_down * 1000);
        let (now, calm) = (self.now, self.rules.balance.calm_since);
        if self.world.guests.is_none() {
            return;
        }
        let rules = &mut self.rules.guests;
        rules.record(&self.world, threshold);
        let result = rules
            .after_second(now, &self.world, watching)
            .and_then(|()| rules.balance(now, &self.world, calm, policy));
        if let Err((check, why)) = result {
            self.fail(check, why);
        }
    }
}

impl Driver {
    /// The guests' figures for the run's summary ("" without guests).
    pub fn guest_summary(&self) -> String {
        let Some(lan) = &self.world.guests else {
            return String::new();
        };
        let r = &self.rules.guests;
        format!(
            "guests: {} slots, {} arrivals, {} vanished, {} migrated; moves {} balancing ({} \
             overload), {} failover; announcements {}, releases {} checked; ",
            lan.guests.len(),
            lan.arrivals,
            lan.vanished,
            lan.migrated,
            r.balancing_moves,
            r.overload_moves,
            r.failover_moves,
            r.announced,
            r.released
        )
    }
}
