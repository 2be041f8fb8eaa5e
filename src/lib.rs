//! rlbd: receive load balancing for Linux bonds, as a userspace daemon.
//!
//! Data flows one way: `netlink` and `capture` observe the kernel and the wire; `daemon`, the
//! shell, hands what they saw to the `engine` as plain-data inputs and carries out its outputs.
//! The engine is every decision behind one door: the host view (`host`), the client table, the
//! detectors and planner (`policy`), the steering core (`steer`). `engine`, `policy`, `steer` and
//! `host` read no clock and open no socket.

/// An Ethernet MAC address: the one type for it everywhere (prints as `aa:bb:cc:dd:ee:ff`,
/// parses from the same).
pub use pnet_base::MacAddr as Mac;

pub mod capture;
pub mod cli;
pub mod client;
pub mod config;
pub mod daemon;
pub mod demo;
pub mod engine;
pub mod exit;
pub mod guests;
pub mod host;
pub mod logging;
pub mod metrics;
pub mod netlink;
pub mod policy;
pub mod protocol;
pub mod simulate;
pub mod status;
pub mod statusview;
pub mod steer;

#[cfg(test)]
mod test_support;
