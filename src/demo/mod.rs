//! `rlbd demo`: a namespace lab with real Linux clients and the traffic they send, built by the
//! shipped binary so a new user sees rlbd move a client with one command. Only what the demo
//! runs lives here; the test tooling built on it (flooder, packing lab, `rlbd-lab`) is the
//! workspace's `rlbd-lab` crate, never packaged.

pub mod chart;
pub mod netns;
mod phases;
pub mod sample;
pub mod scenario;
pub mod traffic;

pub use phases::run;
