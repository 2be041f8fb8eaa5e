//! The steering core: which clients rlbd moved and where, the sends that put and keep them
//! there, and the limits on those sends. Pure, in the style of ntpd-rs's protocol crate: every
//! method takes an event and the time (milliseconds on the daemon's monotonic clock) and pushes
//! [`Action`]s — send this frame on this port, log this — that the event loop carries out.
//!
//! The rules it keeps, whatever the events:
//! - a frame only ever goes to a client the kernel's neighbour table confirms at that moment, and
//!   only ever claims one of the server's own addresses (both asked of the [`HostView`] at send
//!   time, not at move time);
//! - updates are rate-limited per client and in total ([`Limiter`]);
//! - a client is not moved for overload again within the hold-down;
//! - a client rlbd moved onto a port that fails is moved to a live port in the same step, one
//!   that has been up a while if there is one ([`STABLE_MS`]); a port that just came back is
//!   no target of a chosen move either, so a flapping port does not pull clients to and fro;
//! - a move whose every frame the kernel refused was not made: the client is where it was, and
//!   the move may be tried again after a growing delay ([`Steerer::on_send_result`]);
//! - one frame seen several times (a broadcast on every port, a client's ARP retries) is answered
//!   with one re-assertion.
//!
//! [`HostView`]: crate::host::HostView

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use log::Level;

use super::answered::Answered;
use crate::client::ClientKey;
use crate::host::Claim;
use crate::logging::Fields;
use crate::policy::hold_down::HoldDown;
use crate::policy::limits::{Admit, Limiter};
use crate::policy::{Ceiling, PolicyConfig, PortView, Reason};
use crate::Mac;

pub use crate::policy::model::PortIndex;
pub use types::{
    Action, ClientSnap, Counters, Ctx, LogKind, Moved, PortInfo, Rule, RulesOff, SendOutcome,
    SteerConfig, Weakening,
};

/// Queued sends per client at most; past it a re-assertion storm is shed, not buffered.
const MAX_PENDING_PER_CLIENT: usize = 8;

/// A port that came back less than this long ago is a target only when no other port is up:
/// a link that flaps would otherwise take clients on and drop them again.
pub const STABLE_MS: u64 = 5000;

pub struct Steerer {
    cfg: SteerConfig,
    moved: HashMap<ClientKey, Moved>,
    /// (due, client): a client's entry is live while its `pending` holds that due time.
    timers: BinaryHeap<Reverse<(u64, ClientKey)>>,
    limiter: Limiter,
    counters: Counters,
    next_move_id: u64,
    refused: HashMap<ClientKey, outcome::Refused>,
    /// Per port, when the core saw it come up (0: up when first seen); `None` while down.
    up_since: Vec<Option<u64>>,
    /// Ports that came back unseen (a flap only the carrier count told) before the core first
    /// noted the ports: applied when it does.
    back_unseen: Vec<(PortIndex, u64)>,
    /// Where the host's own frames told clients rlbd did not move to send.
    answered: Answered,
    /// The next free turn for a move's first frame held back by the total rate limit.
    next_turn_ms: u64,
    /// Moved clients whose port's MAC changed since they last heard it (balance-alb swapped
    /// MACs), or whose update (a move's first, or the re-assertion of an undone move) the total
    /// rate limit cut short after some claims: their next update waits its turn instead of being
    /// shed (a failover spends that budget at once). Each with the first of its claims not yet
    /// told; a host frame that undoes the move, or a new move, makes it every claim again.
    unheard: HashMap<ClientKey, usize>,
    /// MACs ports gave up that no port held yet, with when: balance-alb's swap can reach us in
    /// two batches, the port that takes the MAC in the second (`follow_port_macs`).
    macs_untaken: Vec<(PortIndex, Mac, u64)>,
    /// Ports whose old MAC another port took lately, within `SWAP_WINDOW_MS` (the port that
    /// gave it up, the one that holds it, when): a client counted on the first before then
    /// sends to the second. One a port, the latest.
    macs_moved: Vec<(PortIndex, PortIndex, u64)>,
    /// Clients a failover could not move off a dead port (the host view could not claim them
    /// yet: no confirmed neighbour entry), with that port and when, for `UNPLACED_MS`: a
    /// neighbour entry of theirs confirmed since retries them (`retry_unplaced`).
    unplaced: HashMap<ClientKey, (PortIndex, u64)>,
    /// The once-a-second rebalance's buffers, kept so that a second allocates nothing.
    scratch: Scratch,
    /// Where a full port reads, learned: `saturated` and `max_fill` follow it.
    saturation: Ceiling,
    /// The `saturated` in force the log last told.
    saturation_said: f64,
}

/// The rebalance's clients and ports as the planner sees them, and the ports it moved clients
/// off.
#[derive(Debug, Default)]
struct Scratch {
    clients: Vec<crate::policy::ClientView>,
    ports: Vec<crate::policy::PortView>,
    made: Vec<PortIndex>,
}

fn log(out: &mut Vec<Action>, level: Level, msg: String) {
    out.push(Action::Log(level, LogKind::Steer, msg, Fields::default()));
}

impl Steerer {
    pub fn new(cfg: SteerConfig) -> Self {
        let limiter = Limiter::new(cfg.per_client_per_sec, cfg.total_per_sec, cfg.max_moved);
        Steerer {
            moved: HashMap::new(),
            timers: BinaryHeap::new(),
            limiter,
            counters: Counters::default(),
            next_move_id: 1,
            refused: HashMap::new(),
            up_since: Vec::new(),
            back_unseen: Vec::new(),
            answered: Answered::new(cfg.max_moved),
            next_turn_ms: 0,
            unheard: HashMap::new(),
            macs_untaken: Vec::new(),
            macs_moved: Vec::new(),
            unplaced: HashMap::new(),
            scratch: Scratch::default(),
            saturation: Ceiling::default(),
            saturation_said: cfg.policy.saturated,
            cfg,
        }
    }

    pub fn config(&self) -> &SteerConfig {
        &self.cfg
    }

    /// The policy the planner uses: the configured one with `saturated` and `max_fill` raised
    /// to where full ports are seen to read (`policy::ceiling`).
    pub fn policy_in_force(&self) -> PolicyConfig {
        self.saturation.tune(&self.cfg.policy)
    }

    /// Where a full port reads, as a utilization, once a port has read `saturated` or more.
    pub fn saturation_ceiling(&self) -> Option<f64> {
        self.saturation.level()
    }

    /// Learns from this second's ports where a full one reads, and returns the policy in force
    /// after it; says when that moves the `saturated` in force by half a percent or more.
    fn learn_saturation(&mut self, ports: &[PortView], out: &mut Vec<Action>) -> PolicyConfig {
        self.saturation.observe(&self.cfg.policy, ports);
        let tuned = self.policy_in_force();
        let Some(level) = self.saturation.level() else {
            return tuned;
        };
        if (tuned.saturated - self.saturation_said).abs() >= 0.005 {
            self.saturation_said = tuned.saturated;
            let msg = format!(
                "full ports read {:.1}% of their capacity: a port counts as saturated from \
                 {:.1}%, and a move off one may fill its target up to {:.1}%",
                level * 100.0,
                tuned.saturated * 100.0,
                tuned.max_fill * 100.0
            );
            log(out, Level::Info, msg);
        }
        tuned
    }

    /// New settings (a reload); moves and counters are kept.
    pub fn reconfigure(&mut self, cfg: SteerConfig) {
        if (cfg.per_client_per_sec, cfg.total_per_sec, cfg.max_moved)
            != (
                self.cfg.per_client_per_sec,
                self.cfg.total_per_sec,
                self.cfg.max_moved,
            )
        {
            self.limiter = Limiter::new(cfg.per_client_per_sec, cfg.total_per_sec, cfg.max_moved);
        }
        self.answered.set_bound(cfg.max_moved);
        self.cfg = cfg;
        self.drop_excluded();
    }

    pub fn counters(&self) -> Counters {
        self.counters
    }

    pub fn moved(&self, client: &ClientKey) -> Option<&Moved> {
        self.moved.get(client)
    }

    pub fn moved_iter(&self) -> impl Iterator<Item = (&ClientKey, &Moved)> {
        self.moved.iter()
    }

    pub fn moved_count(&self) -> usize {
        self.moved.len()
    }

    /// Moved less than the hold-down ago, or its last move refused whole a short while ago:
    /// stays where it is, except for failover.
    pub fn held(&self, client: &ClientKey, now: u64) -> bool {
        self.record(client).held(now)
    }

    /// The port `client`'s last move took it off and why it moved, while the hold-down (not a
    /// refused move) holds it: the planner may correct such a move once (`Reason::Settle`),
    /// never back to that port.
    pub fn last_move(&self, client: &ClientKey, now: u64) -> Option<(PortIndex, Reason)> {
        self.record(client).last_move(now)
    }

    /// Whole seconds (rounded: decisions come a second apart, give or take a few ms) since rlbd
    /// moved `client`, if it did: the planner makes no overload move while a move of the last
    /// second still blurs the figures (`policy::SETTLE_SECS`).
    pub fn since_move_secs(&self, client: &ClientKey, now: u64) -> Option<u64> {
        self.record(client).since_move_secs(now)
    }

    /// What the core holds of `client` (its move, its refusal), looked up once: the
    /// rebalance asks four questions of every client every second.
    pub(super) fn record(&self, client: &ClientKey) -> Record<'_> {
        Record {
            moved: self.moved.get(client),
            refused: self.refused.get(client),
            hold: HoldDown::from_ms(self.hold_ms()),
            hold_kept: !self.cfg.rules_off.has(Rule::HoldDown),
        }
    }

    /// The hold-down, ms (a second short when weakened, to prove the simulation sees it).
    fn hold_ms(&self) -> u64 {
        let ms = self.cfg.policy.hold_down.saturating_mul(1000);
        if self.cfg.rules_off.weakened(Weakening::HoldDownShort) {
            return ms.saturating_sub(1000);
        }
        ms
    }
}

mod moves;

mod sending;

mod outcome;

#[cfg(test)]
mod fixture;

#[cfg(test)]
pub(crate) mod tests;

#[cfg(test)]
mod refused_tests;

#[cfg(test)]
mod failover_tests;

#[cfg(test)]
mod flap_tests;

#[cfg(test)]
mod answered_tests;

#[cfg(test)]
mod forget_tests;

#[cfg(test)]
mod pins_tests;

#[cfg(test)]
mod beside_tests;

#[cfg(test)]
mod mac_change_tests;

#[cfg(test)]
mod bound_tests;
#[cfg(test)]
mod reannounce_tests;

#[cfg(test)]
mod props;

#[cfg(test)]
mod props_harness;

#[cfg(test)]
mod props_ops;

mod durable;
mod lines;
mod pins;
mod ports;
mod records;
mod types;
mod watching;
pub use durable::{DurableMove, SteerState};
pub(crate) use records::forget_oldest;
use records::Record;
