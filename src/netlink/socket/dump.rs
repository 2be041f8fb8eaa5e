//! The dumps' bookkeeping: what the start-up dumps produce, the dump in flight, where a
//! decoded event came from, and how long a dump may take.

use std::time::{Duration, Instant};

use crate::netlink::{
    addr::AddrEntry, fdb::FdbEntry, link::LinkInfo, neigh::NeighEntry, request::Dump,
};

/// Everything the kernel knows at start-up.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub links: Vec<LinkInfo>,
    pub addrs: Vec<AddrEntry>,
    pub neighbours: Vec<NeighEntry>,
    /// The bridges' forwarding databases and the devices' own (`self`) entries.
    pub fdb: Vec<FdbEntry>,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct InFlight {
    pub(super) dump: Dump,
    pub(super) started: Instant,
}

/// Where a decoded event came from: the reply to one of our dumps, or a multicast
/// notification (or anything else not addressed to one of our requests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Origin {
    Dump(u32),
    Other,
}

/// A dump that has produced nothing for this long is considered lost, so that one stuck
/// request cannot block all later ones.
pub(super) const DUMP_STALL: Duration = Duration::from_secs(10);
/// Interrupted dumps re-run in a row before one is used as it is.
pub(super) const MAX_INTR_RETRIES: u32 = 3;
/// How long `snapshot` waits for the kernel to make progress.
pub(super) const SNAPSHOT_WAIT: Duration = Duration::from_secs(5);
