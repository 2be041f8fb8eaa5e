//! The steering core's plain data: what it asks the loop to do, what it is told of the ports
//! and clients, its settings, the rules it keeps, and its record of a move.

use std::net::IpAddr;

use log::Level;

use crate::client::ClientKey;
use crate::host::{Claim, HostView, Talk};
use crate::logging::Fields;
use crate::policy::{PolicyConfig, Reason};
use crate::Mac;

use super::PortIndex;

/// What the event loop does for the core.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Send `frame` out of `port`: an update telling `client` to use that port. Its outcome,
    /// once known (sent, or refused for good), goes back with [`Steerer::on_send_result`]
    /// under `move_id`.
    ///
    /// [`Steerer::on_send_result`]: super::Steerer::on_send_result
    Send {
        port: PortIndex,
        client: ClientKey,
        claim: Claim,
        frame: Vec<u8>,
        move_id: u64,
    },
    /// Write a line to the log; the kind tells a move's line from the rest, the fields say
    /// what it is about as data (the journal's fields).
    Log(Level, LogKind, String, Fields),
}

/// What a log line of the core is about (the engine's typed topic comes from it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogKind {
    /// A client moved (or, in a dry run, would have been).
    Move,
    /// Anything else the core says: re-assertions, holds, refusals, claims.
    Steer,
}

/// The core's view of one port (kept by the caller, rebuilt only when the ports change).
#[derive(Debug, Clone, PartialEq)]
pub struct PortInfo {
    pub name: String,
    pub mac: Mac,
    pub usable: bool,
}

/// What every decision may look at: the kernel's view of the server, and the ports.
#[derive(Clone, Copy)]
pub struct Ctx<'a> {
    pub host: &'a HostView,
    pub ports: &'a [PortInfo],
    /// Since when the host view may be stale: the kernel dropped netlink notifications and
    /// the re-dump is not all in. What the view confirms is not known then: sends wait.
    pub resync_since: Option<u64>,
}

impl Ctx<'_> {
    pub(super) fn port_name(&self, p: PortIndex) -> &str {
        self.ports.get(p).map_or("?", |i| &i.name)
    }
}

/// One client as the daemon measured it this second.
#[derive(Debug, Clone, Copy)]
pub struct ClientSnap {
    pub key: ClientKey,
    /// The port its latest frames arrived on.
    pub port: PortIndex,
    pub rate_bps: f64,
    /// Whole seconds since it was last counted on `port` (0: in the second just closed;
    /// `u64::MAX`: never, as for a client known only from a move or an answer).
    pub quiet_secs: u64,
    pub talk: Talk,
}

/// The core's settings: the policy's, and how updates are sent.
#[derive(Debug, Clone, PartialEq)]
pub struct SteerConfig {
    pub policy: PolicyConfig,
    /// Times each update is sent (the first at once), `repeat_interval_ms` apart.
    pub repeats: u32,
    pub repeat_interval_ms: u64,
    /// Delay of a re-assertion, so it lands after the kernel's frame that it corrects.
    pub reassert_delay_ms: u64,
    pub per_client_per_sec: u32,
    pub total_per_sec: u32,
    /// A move is forgotten once its client has been out of the client table this long.
    pub idle_ms: u64,
    /// Decide and log, send nothing.
    pub dry_run: bool,
    /// Moves remembered at most (the client table's size); the oldest is forgotten first.
    pub max_moved: usize,
    /// Also fail over the clients the host's own ARP and ND frames placed on a port, not only
    /// those counted there: on plain ports, where nobody else would (see [`answered`]).
    ///
    /// [`answered`]: crate::steer::answered
    pub follow_answers: bool,
    /// The clients `[clients]` excludes or pins.
    pub clients: crate::config::ClientRules,
    /// Rules switched off: only ever by a test proving that it catches their absence.
    pub rules_off: RulesOff,
}

/// A rule the steering core and the engine keep. Each can be switched off, only to prove that
/// the simulation (`tests/sim`) catches its absence; the daemon never switches one off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// No overload move of a client within its hold-down.
    HoldDown,
    /// Updates within the per-client and total rate limits.
    RateLimits,
    /// A frame only to a client the kernel's neighbour table confirms.
    ConfirmBeforeSend,
    /// Plain ports: the clients the host's own frames placed on a failed port are moved too.
    AnsweredFailover,
    /// A frame that undoes a move is answered with the update again.
    Reassertion,
    /// A restart takes the state file over.
    StateFile,
    /// No move decided on a second whose client rates the capture rings left incomplete.
    RingDropVeto,
    /// A port over its threshold sheds clients to a port with room (the point of rlbd).
    Rebalance,
    /// No balancing move of a guest within its hold-down (the guests table's own).
    GuestHoldDown,
    /// A guest pinned to a port is announced there at once (its learning frame).
    GuestAnnounce,
    /// A guest whose MAC shows on the switch's side (it left the host) is released.
    GuestRelease,
    /// A guest on a port that goes down is pinned to a live one at once.
    GuestFailover,
    /// A port over its threshold sheds guests to a port with room.
    GuestRebalance,
}

/// A rule kept, but a little short: each only to prove that the simulation catches a rule
/// that is nearly right, not only one that is gone. The daemon never weakens one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Weakening {
    /// The hold-down one second short (29 s of 30).
    HoldDownShort,
    /// The rate limits let twice their budget through.
    LimitsDoubled,
    /// No re-assertion for a client on a VLAN.
    ReassertionSkipsVlan,
    /// A re-assertion that finds the shared budget spent is shed rather than wait its turn.
    ReassertionShedWhenBusy,
    /// Confirm-before-send asks whether the kernel knows the client's MAC, at any address.
    ConfirmMacOnly,
    /// The failover forgets the clients the host answered on the port of index 0 (on plain
    /// ports, where the host's own probes leave).
    FailoverForgetsPort0,
}

/// The rules switched off or weakened (none, outside the simulation's mutation runs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RulesOff(u32);

impl RulesOff {
    pub fn with(self, rule: Rule) -> RulesOff {
        RulesOff(self.0 | 1 << rule as u32)
    }
    pub fn has(self, rule: Rule) -> bool {
        self.0 & 1 << rule as u32 != 0
    }
    pub fn with_weakened(self, w: Weakening) -> RulesOff {
        RulesOff(self.0 | 1 << (16 + w as u32))
    }
    pub fn weakened(self, w: Weakening) -> bool {
        self.0 & 1 << (16 + w as u32) != 0
    }
}

/// What became of an update frame, as the event loop reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendOutcome {
    /// The kernel took it.
    Sent,
    /// Refused, and not to be tried again (the port is down or gone, or the retries ran out).
    Refused,
}

/// A client rlbd moved, and keeps where it put it.
#[derive(Debug, Clone, PartialEq)]
pub struct Moved {
    pub port: PortIndex,
    /// The port this move took it off: it is not sent back there within the hold-down.
    pub left: PortIndex,
    /// The addresses claimed toward it, checked against the host view at every send.
    pub claims: Vec<Claim>,
    pub at_ms: u64,
    pub reason: Reason,
    pub reasserts: u64,
    /// Due times of its queued sends.
    pub(super) pending: Vec<u64>,
    /// This move's number: outcomes of an earlier move's frames are not this one's.
    pub(super) move_id: u64,
    /// Frames of this move handed out, and refused for good; whether one went out.
    pub(super) issued: u32,
    pub(super) refused: u32,
    pub(super) confirmed: bool,
    /// What rlbd had put the client on before this move, while the move is not confirmed:
    /// where the client still is if every frame of the move is refused.
    pub(super) prior: Option<Box<Moved>>,
    /// A frame of the host's that told the client another port's MAC (that MAC, when), and no
    /// update of rlbd's handed out since: while its re-assertion waits (or its budget keeps it
    /// back) the client sends to whichever port holds that MAC. A MAC, not a port: balance-alb
    /// swaps MACs on failover, and its announcement may be read before the swap is.
    pub(super) undone: Option<(Mac, u64)>,
    /// The turn of the shared budget its next frame holds, while it waits for one: a client
    /// keeps its place in the queue, however many frames undo its move meanwhile.
    pub(super) turn: Option<u64>,
}

impl Moved {
    /// The client's address for people: its IPv4 one if it has one.
    pub fn client_ip(&self) -> Option<IpAddr> {
        self.claims.first().map(Claim::client)
    }
}

/// Counters since start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    pub moves_overload: u64,
    pub moves_failover: u64,
    pub moves_placement: u64,
    pub moves_room: u64,
    pub moves_settle: u64,
    pub reasserts: u64,
    pub sent: u64,
    pub suppressed: u64,
    /// A move's first frame held back by the total rate limit, to go in its turn.
    pub deferred: u64,
    /// Moves not made: the kernel refused every frame of them.
    pub moves_refused: u64,
}

#[cfg(test)]
mod rules_off_tests {
    use super::{Rule, RulesOff, Weakening};

    /// Every rule switched off and every weakening are bits of their own: the guests' rules
    /// (the ninth and on) do not switch a weakening on, nor the reverse.
    #[test]
    fn every_rule_and_weakening_has_a_bit_of_its_own() {
        let rules = [
            Rule::HoldDown,
            Rule::Rebalance,
            Rule::GuestHoldDown,
            Rule::GuestAnnounce,
            Rule::GuestRelease,
            Rule::GuestFailover,
            Rule::GuestRebalance,
        ];
        let weak = [
            Weakening::HoldDownShort,
            Weakening::LimitsDoubled,
            Weakening::ReassertionSkipsVlan,
            Weakening::ReassertionShedWhenBusy,
            Weakening::ConfirmMacOnly,
            Weakening::FailoverForgetsPort0,
        ];
        for r in rules {
            let off = RulesOff::default().with(r);
            assert!(off.has(r));
            assert!(weak.iter().all(|w| !off.weakened(*w)), "{r:?}");
            assert!(rules.iter().filter(|x| off.has(**x)).count() == 1, "{r:?}");
        }
        for w in weak {
            let off = RulesOff::default().with_weakened(w);
            assert!(
                off.weakened(w) && rules.iter().all(|r| !off.has(*r)),
                "{w:?}"
            );
        }
    }
}
