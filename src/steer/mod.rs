//! Putting moves on the wire: the frames (`arp`, `nd`) and the limits on sending them (`limiter`).

pub mod arp;
pub mod limiter;
pub mod nd;
pub mod watch;

pub use arp::{learning_frame, steering_update};
pub use limiter::Limiter;
pub use nd::neighbor_advertisement;
pub use watch::{at_risk, nd_at_risk, ArpSeen, NdSeen, Risk};
