//! The rtnetlink edge: typed link, neighbour, bridge FDB and address events from the kernel,
//! plus the few sysfs/procfs values the daemon reads at start-up. No policy lives here.
//!
//! Typical use: [`RouteSocket::open`], [`RouteSocket::snapshot`] once, register
//! [`RouteSocket::socket_mut`] with `mio`, then [`RouteSocket::read_batch`] on readiness and
//! [`RouteSocket::request_link`] every second for each port's fresh counters (a dump of every
//! link, [`RouteSocket::request_links`], costs in proportion to the links on the host).

mod addr;
mod event;
mod fdb;
mod link;
mod neigh;
mod rawfd;
mod request;
pub use request::request as rtnl_request;
pub use request::DumpKind;
mod resync;
pub use resync::Mirror;
mod socket;
mod sysfs;

#[cfg(test)]
mod netns_tests;

pub use addr::AddrEntry;
pub use event::decode_datagram;
pub use fdb::{FdbEntry, FdbKey, FdbKind};
pub use link::{counter_delta, BondInfo, BondMode, BridgeInfo, LinkInfo, LinkKind, Mac, VlanInfo};
pub use neigh::NeighEntry;
pub use socket::{NlEvent, RouteSocket, Snapshot};
pub use sysfs::{link_speed_mbps, read_ipv4_conf};
