//! Putting moves on the wire: the frames (`arp`) and the limits on sending them (`limiter`).

pub mod arp;
pub mod limiter;
pub mod watch;

pub use arp::{learning_frame, steering_update};
pub use limiter::Limiter;
pub use watch::{at_risk, ArpSeen, Risk};
