//! The simulation's checks, each named: a failure says which one caught it, and a mutation run
//! (a rule switched off or weakened) must be caught by the check that guards that rule.

use rlbd::steer::{Rule, Weakening};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// Every frame rlbd sends is an update of the server's own address from the port it leaves.
    FrameShape,
    /// Every update goes to a client the server's neighbour table has at that address and MAC.
    Confirm,
    /// No frame to a client `[clients]` excludes.
    Excluded,
    /// Updates within the per-client and total budgets, token for token.
    RateLimit,
    /// No move of a client within its hold-down, but one correction; from the wire's times.
    HoldDown,
    /// After a restart with the state file, the moves still in their hold-down are kept.
    StateFile,
    /// A frame of the host that undoes a move is answered by the update again.
    Reassertion,
    /// After a netlink overrun's re-dump, the engine's neighbours and addresses are the kernel's.
    Resync,
    /// No client that sends stays on a dead port the engine knows of (down, released, or
    /// holding the MAC a swap gave it).
    DeadPort,
    /// A port back from a flap (or a failure) takes no moved client for `STABLE_MS` while another
    /// port is up and stable.
    Flap,
    /// No update leaves by (names) a port the engine was told is down or gone.
    DeadTarget,
    /// The engine's ports are the kernel's by ifindex: name (a rename followed), MAC (a swap
    /// followed), carrier; a released slave gone, a new one there.
    PortView,
    /// No client the host's frames put on a port stays on it once dead (plain ports).
    AnsweredFailover,
    /// A port's sampling ratio follows its rate as the world counts it: up at once, down slowly.
    Sampling,
    /// No move decided on a second whose rates the capture rings left incomplete.
    RingDropVeto,
    /// Once settled, no port over its threshold while another has room.
    Balance,
    /// The client table within its size.
    Table,
    /// A foreign claim of the server's address is warned of, never answered.
    ForeignClaim,
    /// No guest output on a host without guests.
    Guests,
    /// Guests (`guest_rules.rs`): two heavy guests on one overloaded slave are split once
    /// settled, if another has room.
    GuestBalance,
    /// A guest leaves a slave for overload only after 2 of 3 seconds over the threshold.
    GuestThreshold,
    /// No guest moved twice within its hold-down but by failover.
    GuestHoldDown,
    /// Every pin announced on its slave in the same batch, from the guest's MAC and VLAN.
    GuestAnnounce,
    /// No guest delivered the same frames twice, nor anywhere but on its slave.
    GuestDelivery,
    /// No guest pinned to a slave the engine knows is down; every guest receiving within 1 s.
    GuestFailover,
    /// A guest that leaves (gone from the FDB, or seen from the switch) unpinned in that batch.
    GuestRelease,
    /// The engine's deadlines move on.
    Deadlines,
    /// The world's own frames parse (a fault of the simulation, not of rlbd).
    World,
}

/// A mutation: a rule switched off, or kept a little short.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutation {
    Off(Rule),
    Weak(Weakening),
}

impl Mutation {
    pub const ALL: [Mutation; 19] = [
        Mutation::Off(Rule::HoldDown),
        Mutation::Off(Rule::StateFile),
        Mutation::Off(Rule::RateLimits),
        Mutation::Off(Rule::ConfirmBeforeSend),
        Mutation::Off(Rule::Reassertion),
        Mutation::Off(Rule::AnsweredFailover),
        Mutation::Off(Rule::RingDropVeto),
        Mutation::Off(Rule::Rebalance),
        Mutation::Weak(Weakening::HoldDownShort),
        Mutation::Weak(Weakening::LimitsDoubled),
        Mutation::Weak(Weakening::ReassertionSkipsVlan),
        Mutation::Weak(Weakening::ReassertionShedWhenBusy),
        Mutation::Weak(Weakening::ConfirmMacOnly),
        Mutation::Weak(Weakening::FailoverForgetsPort0),
        Mutation::Off(Rule::GuestHoldDown),
        Mutation::Off(Rule::GuestAnnounce),
        Mutation::Off(Rule::GuestRelease),
        Mutation::Off(Rule::GuestFailover),
        Mutation::Off(Rule::GuestRebalance),
    ];

    /// The check that guards the rule: the one that must catch this mutation first.
    pub fn catcher(self) -> Check {
        match self {
            Mutation::Off(Rule::HoldDown) | Mutation::Weak(Weakening::HoldDownShort) => {
                Check::HoldDown
            }
            Mutation::Off(Rule::StateFile) => Check::StateFile,
            Mutation::Off(Rule::RateLimits) | Mutation::Weak(Weakening::LimitsDoubled) => {
                Check::RateLimit
            }
            Mutation::Off(Rule::ConfirmBeforeSend) | Mutation::Weak(Weakening::ConfirmMacOnly) => {
                Check::Confirm
            }
            Mutation::Off(Rule::Reassertion)
            | Mutation::Weak(Weakening::ReassertionSkipsVlan)
            | Mutation::Weak(Weakening::ReassertionShedWhenBusy) => Check::Reassertion,
            Mutation::Off(Rule::AnsweredFailover)
            | Mutation::Weak(Weakening::FailoverForgetsPort0) => Check::AnsweredFailover,
            Mutation::Off(Rule::RingDropVeto) => Check::RingDropVeto,
            Mutation::Off(Rule::Rebalance) => Check::Balance,
            Mutation::Off(Rule::GuestHoldDown) => Check::GuestHoldDown,
            Mutation::Off(Rule::GuestAnnounce) => Check::GuestAnnounce,
            Mutation::Off(Rule::GuestRelease) => Check::GuestRelease,
            Mutation::Off(Rule::GuestFailover) => Check::GuestFailover,
            Mutation::Off(Rule::GuestRebalance) => Check::GuestBalance,
        }
    }

    /// `HoldDown` for a rule off, `HoldDownShort` for a weakening (as `RLBD_SIM_RULE_OFF`
    /// takes them).
    pub fn name(self) -> String {
        match self {
            Mutation::Off(r) => format!("{r:?}"),
            Mutation::Weak(w) => format!("{w:?}"),
        }
    }

    pub fn parse(name: &str) -> Option<Mutation> {
        Mutation::ALL.into_iter().find(|m| m.name() == name.trim())
    }

    /// Applies the mutation to a fresh engine.
    pub fn apply(self, engine: &mut rlbd::engine::Engine) {
        match self {
            Mutation::Off(r) => engine.switch_off(r),
            Mutation::Weak(w) => engine.weaken(w),
        }
    }
}
