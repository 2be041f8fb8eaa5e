//! The decision core: overload detection and move planning.
//!
//! Pure code on plain data: no sockets, no clock, no `unsafe`. The daemon feeds it one snapshot a
//! second; `rlbd simulate` feeds it a scenario; the tests feed it whatever they like. Everything
//! here is deterministic: the same input gives the same output.
#![forbid(unsafe_code)]

pub mod ceiling;
pub mod config;
pub mod detector;
mod exchange;
pub mod model;
mod packing;
pub mod planner;
mod settle;

pub use ceiling::Ceiling;
pub use config::{ConfigError, PolicyConfig};
pub use detector::Detector;
pub use model::{sampling_resolution_bps, ClientView, Move, PortView, Reason, MIN_KEPT};
pub use planner::{place, place_new, plan, SETTLE_SECS};
