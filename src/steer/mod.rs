//! Steering: the pure core that carries out the rules' decisions (`core`: whom to send what and
//! when, the moves and their records) and the frames (`arp`, `nd`). The rules themselves, the
//! limits on sending and what puts a moved client at risk among them, are `policy`'s.

pub mod answered;
pub mod arp;
pub mod core;
pub mod explain;
pub mod foreign;
pub mod nd;

pub use self::core::{
    Action, ClientSnap, Counters, Ctx, DurableMove, LogKind, Moved, PortIndex, PortInfo, Rule,
    RulesOff, SendOutcome, SteerConfig, SteerState, Steerer, Weakening,
};
pub use arp::{guest_announcement, learning_frame, steering_update, tagged};
pub use nd::neighbor_advertisement;
