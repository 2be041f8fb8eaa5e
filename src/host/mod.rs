//! rlbd's model of the server: the kernel's links, addresses and neighbours (`view`) and the
//! ports it steers among (`ports`). Pure: updated from netlink events, asked by the steering
//! core; the daemon owns the sockets.
#![forbid(unsafe_code)]

pub mod ports;
pub mod stack;
pub mod view;

#[cfg(test)]
pub mod testing;

pub use ports::{Change, Port, PortTable};
pub use view::{Applied, Claim, HostView, Talk, Unclaimable};
