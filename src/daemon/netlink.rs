//! The netlink reader: the rtnetlink socket, read in bounded batches, and the requests the
//! engine asks for (a port's counters, a re-dump after the kernel dropped notifications).

use log::warn;

use crate::netlink::{NlEvent, RouteSocket};

/// Netlink messages handed to the engine per wakeup at most.
const NETLINK_BATCH: usize = 256;

pub struct NetlinkReader {
    pub sock: RouteSocket,
    /// Messages may be waiting (edge-triggered readiness, bounded batches).
    pub ready: bool,
    errors: u32,
    /// The last batch read (reused).
    events: Vec<NlEvent>,
}

impl NetlinkReader {
    pub fn new(sock: RouteSocket) -> Self {
        NetlinkReader {
            sock,
            ready: true,
            errors: 0,
            events: Vec::new(),
        }
    }

    /// Reads one batch; what was read is in [`events`](Self::events) until the next read.
    pub fn read(&mut self) -> &[NlEvent] {
        self.events.clear();
        match self.sock.read_batch(NETLINK_BATCH, &mut self.events) {
            Ok(more) => {
                self.ready = more;
                self.errors = 0;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => self.ready = false,
            Err(e) => {
                warn!("netlink: {e}");
                // More may be queued behind a failed dump, but an error that repeats must not
                // spin the loop: after a few, wait for the socket to report readiness again.
                self.errors += 1;
                self.ready = self.errors < 8;
            }
        }
        &self.events
    }

    pub fn events(&self) -> &[NlEvent] {
        &self.events
    }

    pub fn request_counters(&mut self, ifindex: u32) {
        if let Err(e) = self.sock.request_link(ifindex) {
            warn!("cannot request link counters: {e}");
        }
    }

    /// The bridges' tables and the devices' own address lists again: a container's macvlan
    /// coming or going is not notified (`guests::MACVLAN_DUMP_SECS`).
    pub fn request_fdb(&mut self) {
        if let Err(e) = self.sock.request_fdb() {
            warn!("netlink: FDB dump: {e}");
        }
    }

    pub fn redump(&mut self) {
        for r in [
            RouteSocket::request_links,
            RouteSocket::request_addresses,
            RouteSocket::request_neighbours,
            RouteSocket::request_fdb,
        ] {
            if let Err(e) = r(&mut self.sock) {
                warn!("netlink re-dump: {e}");
            }
        }
    }
}
