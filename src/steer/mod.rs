//! Steering: the pure core that decides whom to send what and when (`core`), the frames (`arp`,
//! `nd`), the limits on sending them (`limiter`) and what puts a moved client at risk (`watch`).

pub mod answered;
pub mod arp;
pub mod core;
pub mod explain;
pub mod foreign;
pub mod limiter;
pub mod nd;
pub mod watch;

pub use self::core::{
    Action, ClientSnap, Counters, Ctx, DurableMove, LogKind, Moved, PortId, PortInfo, Rule,
    RulesOff, SendOutcome, SteerConfig, SteerState, Steerer, Weakening,
};
pub use arp::{guest_announcement, learning_frame, steering_update, tagged};
pub use limiter::Limiter;
pub use nd::neighbor_advertisement;
pub use watch::{at_risk, nd_at_risk, ArpSeen, NdSeen, Risk};
