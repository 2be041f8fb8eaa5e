//! Putting moves on the wire: the frames (`arp`) and the limits on sending them (`limiter`).

pub mod arp;
pub mod limiter;

pub use arp::{learning_frame, steering_update};
pub use limiter::Limiter;
