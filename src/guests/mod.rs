//! Guests behind the bond: the VMs and containers of a hypervisor host, on a bridge whose port is
//! the bond, each with a MAC of its own. balance-alb does nothing for them (their frames leave
//! through the active slave, or with a slave's MAC written over theirs, so the switch learns every
//! guest on one slave and sends every byte for every guest there: docs/labs.md). rlbd places each
//! guest (its MAC on its VLAN) on a slave: its frames leave through that slave unchanged (the
//! bond's egress program redirects them), so the switch learns it there, and its received bytes
//! are counted per slave and balanced by the same planner, with the same rules, as clients.
//!
//! Pure: the engine hands in the bridge's FDB, the second's counts and the ports; the table
//! answers with [`GuestAction`]s (pin, unpin, announce, log). Times are the engine's ms.

mod config;
mod facts;
mod macvlan;
mod pins;
mod place;
mod status;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use log::Level;

use crate::client::ClientKey;
use crate::policy::hold_down::{since_move_secs, HoldDown};
use crate::policy::model::PortIndex;
use crate::policy::{self, ClientView, PolicyConfig, PortView, Reason};
use crate::steer::{Rule, RulesOff};
pub use config::{parse_mac, GuestsConfig};
pub use facts::{FdbFact, GuestAction, GuestCount};
pub use macvlan::{macvlan_fact, MACVLAN_DUMP_SECS};
pub use pins::GuestPin;
pub use status::{GuestMove, GuestStatus, GuestTotals};

/// A guest that has sent nothing for this long is announced again where it is pinned, so a
/// switch whose table aged it out (300 s is usual) learns it before it floods its frames.
pub const ANNOUNCE_IDLE_MS: u64 = 60_000;

/// One guest.
#[derive(Debug, Clone, PartialEq)]
pub struct Guest {
    pub key: ClientKey,
    /// The bridge port it sits behind, and the bridge.
    pub bridge_port: u32,
    pub bridge: u32,
    /// The slave it is pinned to (`None`: no port could take it yet).
    pub port: Option<PortIndex>,
    /// Received and transmitted, bit/s, in the last second.
    pub rx_bps: f64,
    pub tx_bps: f64,
    /// When rlbd last moved it, and from where and why.
    pub moved_ms: Option<u64>,
    pub last_move: Option<(PortIndex, Reason)>,
    pub moves: u64,
    /// Pinned by the configuration (`[guests] pin`): never moved by the balancing rules.
    pub pinned: bool,
    /// On a macvlan of `bridge` (the bond or a VLAN over it), not behind a bridge port.
    pub macvlan: bool,
    last_tx_ms: u64,
    last_announce_ms: u64,
}

/// The guests table: see the module's documentation.
#[derive(Debug, Default)]
pub struct Guests {
    cfg: GuestsConfig,
    hold_down: HoldDown,
    /// The bond's ifindex, and the bridges over it whose guests are balanced (ifindex, name).
    bond: Option<u32>,
    bridges: Vec<(u32, String)>,
    /// The ports' names, by index (pins name their port).
    names: Vec<String>,
    /// Why guests are not balanced on this host although enabled (balance-tlb).
    refused: Option<String>,
    /// Why the guest path could not be set up, if it could not (until a reload).
    failed: Option<String>,
    list: BTreeMap<ClientKey, Guest>,
    /// Pins an earlier daemon left (the state file), for guests not learned yet.
    remembered: BTreeMap<ClientKey, GuestPin>,
    pub totals: GuestTotals,
    /// Rules switched off (only ever by the simulation's mutation runs).
    off: RulesOff,
}

impl Guests {
    pub fn new(cfg: GuestsConfig, hold_down_secs: u64) -> Guests {
        Guests {
            cfg,
            hold_down: HoldDown::from_secs(hold_down_secs),
            ..Guests::default()
        }
    }

    /// Switches one of the guests' rules off: only to prove that the simulation catches its
    /// absence. Behind the `rule-switches` feature, which the shipped binary does not enable.
    #[cfg(any(test, feature = "rule-switches"))]
    pub fn switch_off(&mut self, rule: Rule) {
        self.off = self.off.with(rule);
    }

    pub fn enabled(&self) -> bool {
        self.cfg.enabled && self.refused.is_none() && self.failed.is_none()
    }

    pub fn config(&self) -> &GuestsConfig {
        &self.cfg
    }

    /// Why guests are not balanced although `[guests] enabled` is set.
    pub fn refused(&self) -> Option<&str> {
        self.refused.as_deref()
    }

    /// New settings (a reload): guests now excluded are released, pins applied at the next
    /// second.
    pub fn reconfigure(
        &mut self,
        cfg: GuestsConfig,
        hold_down_secs: u64,
        out: &mut Vec<GuestAction>,
    ) {
        self.hold_down = HoldDown::from_secs(hold_down_secs);
        if cfg != self.cfg {
            self.failed = None;
        }
        self.cfg = cfg;
        if !self.cfg.enabled {
            self.release_all("guests switched off", out);
            return;
        }
        let gone: Vec<ClientKey> = self
            .list
            .keys()
            .filter(|k| self.cfg.excludes(k.mac))
            .copied()
            .collect();
        for key in gone {
            self.release(key, "excluded by the configuration", out);
        }
        for g in self.list.values_mut() {
            g.pinned = self.cfg.pinned_to(g.key.mac).is_some();
        }
    }

    /// The guest path could not be set up (`why`): every guest released, none balanced until
    /// the configuration is reloaded.
    pub fn give_up(&mut self, why: String, out: &mut Vec<GuestAction>) {
        self.failed = Some(why);
        self.release_all("the guest path failed", out);
    }

    /// The bond and the bridges over it, from the links; `tlb`: the bond is in balance-tlb,
    /// whose inactive slaves drop every unicast frame (guests cannot be received there).
    pub fn set_topology(
        &mut self,
        (bond, bridges, names): (Option<u32>, Vec<(u32, String)>, Vec<String>),
        tlb: bool,
        out: &mut Vec<GuestAction>,
    ) {
        self.names = names;
        self.refused = (self.cfg.enabled && tlb).then(|| {
            "the bond is in balance-tlb, whose inactive slaves drop unicast frames: guests \
             cannot be received on them (use balance-alb, or set [guests] enabled = false)"
                .to_string()
        });
        self.bond = bond;
        self.bridges = bridges
            .into_iter()
            .filter(|(_, name)| self.cfg.covers_bridge(name))
            .collect();
        let gone: Vec<ClientKey> = self
            .list
            .values()
            .filter(|g| {
                !self.enabled() || !(g.macvlan || self.bridges.iter().any(|b| b.0 == g.bridge))
            })
            .map(|g| g.key)
            .collect();
        for key in gone {
            self.release(key, "its bridge is no longer over the bond", out);
        }
    }

    /// An FDB entry: a guest appears, moves between bridge ports, leaves (its entry gone, or
    /// its MAC now behind the bond: on the switch's side).
    pub fn on_fdb(
        &mut self,
        now: u64,
        f: &FdbFact,
        ports: &[PortView],
        out: &mut Vec<GuestAction>,
    ) {
        if !self.enabled() {
            return;
        }
        if f.macvlan {
            return self.on_macvlan(now, f, ports, out);
        }
        if !self.bridges.iter().any(|b| b.0 == f.bridge) {
            return;
        }
        if Some(f.bridge_port) == self.bond {
            let off = self.off.has(Rule::GuestRelease);
            if !f.removed && self.list.contains_key(&f.key) && !off {
                self.release(
                    f.key,
                    "its MAC is now behind the bond (it left the host)",
                    out,
                );
            }
            return;
        }
        if !f.learned || self.cfg.excludes(f.key.mac) {
            return;
        }
        if f.removed {
            if self
                .list
                .get(&f.key)
                .is_some_and(|g| g.bridge_port == f.bridge_port)
            {
                self.release(f.key, "it left the bridge", out);
            }
            return;
        }
        if let Some(g) = self.list.get_mut(&f.key) {
            g.bridge_port = f.bridge_port;
            return;
        }
        self.learn(now, f, ports, out);
    }

    /// A guest not known yet: listed, and placed.
    fn learn(&mut self, now: u64, f: &FdbFact, ports: &[PortView], out: &mut Vec<GuestAction>) {
        let pinned = self.cfg.pinned_to(f.key.mac).is_some();
        self.list.insert(
            f.key,
            Guest {
                key: f.key,
                bridge_port: f.bridge_port,
                bridge: f.bridge,
                port: None,
                rx_bps: 0.0,
                tx_bps: 0.0,
                moved_ms: None,
                last_move: None,
                moves: 0,
                pinned,
                macvlan: f.macvlan,
                last_tx_ms: now,
                last_announce_ms: now,
            },
        );
        self.place_unplaced(now, ports, out);
    }

    /// A second's counts: every guest's rates (0 for one not counted); a guest seen from the
    /// switch on its own port is released.
    pub fn on_counts(&mut self, now: u64, counts: &[GuestCount], out: &mut Vec<GuestAction>) {
        for g in self.list.values_mut() {
            g.rx_bps = 0.0;
            g.tx_bps = 0.0;
        }
        let mut away = Vec::new();
        for c in counts {
            let Some(g) = self.list.get_mut(&c.key) else {
                continue;
            };
            g.rx_bps += c.rx_bytes as f64 * 8.0;
            g.tx_bps += c.tx_bytes as f64 * 8.0;
            if c.tx_bytes > 0 {
                g.last_tx_ms = now;
            }
            let releasing = !self.off.has(Rule::GuestRelease);
            if c.seen_from_switch > 0 && Some(c.port.index()) == g.port && releasing {
                away.push(c.key);
            }
        }
        for key in away {
            self.release(
                key,
                "its MAC arrived from the switch on its own port (it left the host)",
                out,
            );
        }
    }

    /// The second's balancing: guests on a port that is down go at once; pinned guests go back
    /// to their port; the rest as the planner decides, by the clients' rules (K of W over the
    /// threshold, hold-down, settle, room, exchange, the largest flow left alone).
    /// `hosts`: the host's own clients as the clients' planner weighed them, flows on the same
    /// ports that this planner may not move: they count among a port's flows (who is largest,
    /// how many may leave), so a guest beside a larger host client is not "the one flow" left
    /// alone; and a client moved a moment ago still shows partly on the port it left, so no
    /// guest moves on that second's figures.
    pub fn rebalance(
        &mut self,
        now: u64,
        cfg: &PolicyConfig,
        (ports, hosts): (&[PortView], &[ClientView]),
        out: &mut Vec<GuestAction>,
    ) {
        if !self.enabled() {
            return;
        }
        self.place_unplaced(now, ports, out);
        let keys: Vec<ClientKey> = self
            .list
            .values()
            .filter(|g| g.port.is_some_and(|p| p < ports.len()))
            .map(|g| g.key)
            .collect();
        let mut views: Vec<ClientView> =
            keys.iter().map(|k| self.view(&self.list[k], now)).collect();
        views.extend(hosts.iter().map(ClientView::fixed));
        let plan = if self.off.has(Rule::GuestRebalance) {
            Vec::new()
        } else {
            policy::plan(cfg, ports, &views)
        };
        for m in plan {
            // Only guests move here: a host client's place is the clients' planner's.
            if let Some(&key) = keys.get(m.client) {
                self.moved(now, key, m.to, m.reason, out);
            }
        }
        self.pins_home(now, ports, out);
        self.announce_idle(now, out);
    }

    pub fn iter(&self) -> impl Iterator<Item = &Guest> {
        self.list.values()
    }

    pub fn len(&self) -> usize {
        self.list.len()
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// How many guests are pinned to each port.
    pub fn guests_per_port(&self, ports: usize) -> Vec<usize> {
        let mut n = vec![0; ports];
        for p in self.list.values().filter_map(|g| g.port) {
            if let Some(c) = n.get_mut(p) {
                *c += 1;
            }
        }
        n
    }

    /// Every guest's received bit/s by the port it is pinned to (what the planner weighs).
    pub fn rx_per_port(&self, ports: usize) -> Vec<f64> {
        let mut r = vec![0.0; ports];
        for g in self.list.values() {
            if let Some(x) = g.port.and_then(|p| r.get_mut(p)) {
                *x += g.rx_bps;
            }
        }
        r
    }

    /// The placed guests as the clients' planner weighs them: fixed flows on their ports.
    pub fn flows(&self, now: u64) -> Vec<ClientView> {
        let placed = self.list.values().filter(|g| g.port.is_some());
        placed.map(|g| self.view(g, now).fixed()).collect()
    }

    /// The planner's view of `g`: a pinned guest is held (its load is fixed).
    fn view(&self, g: &Guest, now: u64) -> ClientView {
        let held = !self.off.has(Rule::GuestHoldDown)
            && g.moved_ms.is_some_and(|m| self.hold_down.holds(m, now));
        ClientView {
            port: g.port.unwrap_or(usize::MAX),
            rate_bps: g.rx_bps,
            held: held || g.pinned,
            // A guest pinned by the configuration stays on its port.
            fixed: g.pinned,
            since_move: g.moved_ms.map(|m| since_move_secs(m, now)),
            last_move: g.last_move.filter(|_| held),
        }
    }

    fn moved(
        &mut self,
        now: u64,
        key: ClientKey,
        to: PortIndex,
        reason: Reason,
        out: &mut Vec<GuestAction>,
    ) {
        let Some(g) = self.list.get_mut(&key) else {
            return;
        };
        let from = g.port;
        if from == Some(to) {
            return;
        }
        g.port = Some(to);
        g.moved_ms = Some(now);
        g.last_move = from.map(|f| (f, reason));
        g.moves += 1;
        g.last_announce_ms = now;
        let t = &mut self.totals;
        *match reason {
            Reason::Overload => &mut t.overload,
            Reason::Failover => &mut t.failover,
            Reason::Room => &mut t.room,
            Reason::Settle => &mut t.settle,
            Reason::Placement => &mut t.placed,
        } += 1;
        out.push(GuestAction::Pin {
            key,
            port: to,
            reason: Some(reason),
        });
    }

    fn announce_idle(&mut self, now: u64, out: &mut Vec<GuestAction>) {
        for g in self.list.values_mut() {
            let quiet = now.saturating_sub(g.last_tx_ms.max(g.last_announce_ms));
            if let (Some(port), true) = (g.port, quiet >= ANNOUNCE_IDLE_MS) {
                g.last_announce_ms = now;
                out.push(GuestAction::Announce { key: g.key, port });
            }
        }
    }

    fn release(&mut self, key: ClientKey, why: &str, out: &mut Vec<GuestAction>) {
        if self.list.remove(&key).is_some() {
            self.totals.released += 1;
            out.push(GuestAction::Unpin { key });
            out.push(GuestAction::Log(
                Level::Info,
                format!("guest {key} released: {why}"),
            ));
        }
    }

    fn release_all(&mut self, why: &str, out: &mut Vec<GuestAction>) {
        let keys: Vec<ClientKey> = self.list.keys().copied().collect();
        for key in keys {
            self.release(key, why, out);
        }
    }
}
