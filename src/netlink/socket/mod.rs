//! The rtnetlink socket: dump requests, single-link requests, multicast subscriptions and
//! nonblocking decoding.

use std::collections::VecDeque;
use std::fmt;
use std::io;
use std::os::fd::AsRawFd;
use std::time::Instant;

use log::{debug, warn};
use netlink_packet_core::{NLMSG_DONE, NLMSG_ERROR, NLMSG_NOOP, NLMSG_OVERRUN, NLM_F_DUMP_INTR};
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};

mod dump;
mod rx;

pub use super::event::NlEvent;
use super::event::{error_code, next_message, route_event, MsgHead};
use super::rawfd::{grow_receive_buffer, wait_readable};
use super::request::{dump_request, link_request, single_answer, Dump, DumpKind};
use super::resync::Mirror;
pub use dump::Snapshot;
use dump::{InFlight, Origin, DUMP_STALL, MAX_INTR_RETRIES, SNAPSHOT_WAIT};
use rx::{receive, RX_BUF_INITIAL};

fn context(what: impl fmt::Display) -> impl FnOnce(io::Error) -> io::Error {
    move |e| io::Error::new(e.kind(), format!("{what}: {e}"))
}

/// An rtnetlink socket subscribed to link, neighbour (bridge FDB included) and address changes.
///
/// The kernel runs one dump per socket at a time (a second request fails with EBUSY), so
/// requests made while a dump is in progress are queued and sent when it completes.
pub struct RouteSocket {
    socket: Socket,
    port: u32,
    next_seq: u32,
    rx: Vec<u8>,
    /// Parse position within the datagram in `rx`.
    rx_pos: usize,
    in_flight: Option<InFlight>,
    queued: VecDeque<Dump>,
    /// Single-link requests not yet answered: (sequence number, ifindex, sent at), oldest
    /// first, so that an error answer can name the link.
    singles: VecDeque<(u32, u32, Instant)>,
    /// Notifications that arrived while `snapshot` was waiting for its dumps; handed out by
    /// the next `read_batch` so that nothing between snapshot and event loop is lost.
    pending: VecDeque<NlEvent>,
    /// What has been reported, so that a dump can also report what is gone.
    mirror: Mirror,
    /// The dump in flight was interrupted by a change (NLM_F_DUMP_INTR): it may have missed
    /// entries, so it must not be used to remove any.
    dump_intr: bool,
    /// Interrupted dumps re-run in a row; capped so a table that never stops changing cannot
    /// keep the socket dumping.
    intr_retries: u32,
    /// Times the kernel reported lost notifications (ENOBUFS, NLMSG_OVERRUN, truncation).
    overruns: u64,
}

impl fmt::Debug for RouteSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RouteSocket")
            .field("fd", &self.socket.as_raw_fd())
            .field("port", &self.port)
            .field("in_flight", &self.in_flight)
            .field("queued", &self.queued)
            .field("pending", &self.pending.len())
            .finish()
    }
}

impl RouteSocket {
    /// Opens a nonblocking socket subscribed to RTNLGRP_LINK, RTNLGRP_NEIGH (which carries the
    /// bridge FDB's changes too), RTNLGRP_IPV4_IFADDR and RTNLGRP_IPV6_IFADDR.
    pub fn open() -> io::Result<Self> {
        let mut socket =
            Socket::new(NETLINK_ROUTE).map_err(context("creating NETLINK_ROUTE socket"))?;
        let addr = socket
            .bind_auto()
            .map_err(context("binding rtnetlink socket"))?;
        socket
            .set_non_blocking(true)
            .map_err(context("making rtnetlink socket nonblocking"))?;
        for (group, name) in [
            (libc::RTNLGRP_LINK, "RTNLGRP_LINK"),
            (libc::RTNLGRP_NEIGH, "RTNLGRP_NEIGH"),
            (libc::RTNLGRP_IPV4_IFADDR, "RTNLGRP_IPV4_IFADDR"),
            (libc::RTNLGRP_IPV6_IFADDR, "RTNLGRP_IPV6_IFADDR"),
        ] {
            socket
                .add_membership(group)
                .map_err(context(format_args!("joining {name}")))?;
        }
        grow_receive_buffer(&socket);
        Ok(RouteSocket {
            socket,
            port: addr.port_number(),
            next_seq: 1,
            rx: Vec::with_capacity(RX_BUF_INITIAL),
            rx_pos: 0,
            in_flight: None,
            queued: VecDeque::new(),
            singles: VecDeque::new(),
            pending: VecDeque::new(),
            mirror: Mirror::default(),
            dump_intr: false,
            intr_retries: 0,
            overruns: 0,
        })
    }

    /// Times the kernel reported lost notifications since the socket was opened (each one
    /// reported as an [`NlEvent::Overrun`], after which the caller re-dumps).
    pub fn overruns(&self) -> u64 {
        self.overruns
    }

    /// For registration with `mio` (READABLE). The registration is edge-triggered: keep
    /// calling [`read_batch`](Self::read_batch) while it returns `Ok(true)`.
    pub fn socket_mut(&mut self) -> &mut Socket {
        &mut self.socket
    }

    /// Requests a dump of all links, each with its IFLA_STATS64 counters. Its cost grows with
    /// the number of links on the host: for the counters of a few known links use
    /// [`request_link`](Self::request_link).
    pub fn request_links(&mut self) -> io::Result<()> {
        self.request(DumpKind::Links, true).map(drop)
    }

    /// Requests link `index` alone (RTM_GETLINK for one index, not a dump): the answer is one
    /// `Link` event with fresh counters. Not queued behind a dump (the kernel answers it at
    /// once, whatever dump is running), so it costs the same on a host with thousands of links
    /// as with two. A link that no longer exists is logged (its removal is notified anyway).
    pub fn request_link(&mut self, index: u32) -> io::Result<()> {
        let seq = self.take_seq();
        let bytes = link_request(index, seq);
        let kernel = SocketAddr::new(0, 0);
        self.socket
            .send_to(&bytes, &kernel, 0)
            .map_err(context(format_args!(
                "sending RTM_GETLINK for ifindex {index}"
            )))?;
        // Requests the kernel answered are removed by their answers; what is left this long is
        // forgotten (an answer lost with an overrun).
        while self
            .singles
            .front()
            .is_some_and(|(_, _, at)| at.elapsed() > DUMP_STALL)
        {
            self.singles.pop_front();
        }
        self.singles.push_back((seq, index, Instant::now()));
        Ok(())
    }

    /// Requests a dump of the IPv4 (ARP) and IPv6 neighbour tables. The dump arrives as `Neigh` events
    /// followed by `DumpDone`, interleaved with any notifications.
    pub fn request_neighbours(&mut self) -> io::Result<()> {
        self.request(DumpKind::Neighbours, true).map(drop)
    }

    /// Requests a dump of the bridge forwarding databases (RTM_GETNEIGH, AF_BRIDGE): every
    /// bridge's entries and every device's own (`self`) ones, as `Fdb` events followed by one
    /// `DumpDone`, interleaved with any notifications. A separate dump from
    /// [`request_neighbours`](Self::request_neighbours), which never lists them.
    pub fn request_fdb(&mut self) -> io::Result<()> {
        self.request(DumpKind::Fdb, true).map(drop)
    }

    /// Requests a dump of all IPv4 and IPv6 addresses.
    pub fn request_addresses(&mut self) -> io::Result<()> {
        self.request(DumpKind::Addresses, true).map(drop)
    }

    /// Decodes at most `max_msgs` netlink messages from what the kernel has queued and appends
    /// the resulting events to `out`.
    ///
    /// Returns `Ok(true)` when it stopped at `max_msgs` (more may be waiting: call again, the
    /// readiness edge will not repeat), `Ok(false)` once the socket is drained.
    ///
    /// An `Err` leaves the socket usable: it reports a failed dump (with the request named) or
    /// an unexpected socket error, and events decoded before it are already in `out`.
    pub fn read_batch(&mut self, max_msgs: usize, out: &mut Vec<NlEvent>) -> io::Result<bool> {
        let mut budget = max_msgs;
        while budget > 0 {
            let Some(event) = self.pending.pop_front() else {
                break;
            };
            out.push(event);
            budget -= 1;
        }
        self.pump(budget, &mut |_, event| out.push(event))
    }

    /// Blocking: dumps links, addresses, neighbours and the bridge FDB and returns them.
    /// Notifications that arrive meanwhile are kept for the next
    /// [`read_batch`](Self::read_batch), so a caller that applies them after the snapshot
    /// misses nothing.
    pub fn snapshot(&mut self) -> io::Result<Snapshot> {
        let mut wanted = Vec::with_capacity(4);
        for kind in [
            DumpKind::Links,
            DumpKind::Addresses,
            DumpKind::Neighbours,
            DumpKind::Fdb,
        ] {
            wanted.push(self.request(kind, false)?);
        }
        let mut snapshot = Snapshot::default();
        let mut aside = Vec::new();
        let mut last_progress = Instant::now();
        loop {
            let mut received = 0usize;
            let result = self.pump(256, &mut |origin, event| {
                received += 1;
                match (origin, event) {
                    (Origin::Dump(seq), event) if wanted.contains(&seq) => match event {
                        NlEvent::DumpDone => wanted.retain(|&s| s != seq),
                        NlEvent::Link(link) => snapshot.links.push(link),
                        NlEvent::Addr(addr) => snapshot.addrs.push(addr),
                        NlEvent::Neigh(neigh) => snapshot.neighbours.push(neigh),
                        NlEvent::Fdb(entry) => snapshot.fdb.push(entry),
                        other => debug!("unexpected event in a dump reply: {other:?}"),
                    },
                    (_, event) => aside.push(event),
                }
            });
            let more = match result {
                Ok(more) => more,
                Err(e) => {
                    self.pending.extend(aside);
                    return Err(context("start-up snapshot")(e));
                }
            };
            if wanted.is_empty() {
                break;
            }
            if received > 0 {
                last_progress = Instant::now();
            }
            if more {
                continue;
            }
            let Some(left) = SNAPSHOT_WAIT.checked_sub(last_progress.elapsed()) else {
                self.pending.extend(aside);
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "start-up snapshot: no reply from the kernel within {SNAPSHOT_WAIT:?} \
                         (waiting for {:?})",
                        self.in_flight.map(|f| f.dump.kind)
                    ),
                ));
            };
            wait_readable(&self.socket, left).map_err(context("start-up snapshot"))?;
        }
        self.pending.extend(aside);
        Ok(snapshot)
    }

    /// Queues (or sends, if nothing is in flight) a dump request and returns its sequence
    /// number. With `coalesce`, a request of the same kind that is still waiting in the queue
    /// (not yet sent) stands for this one: its reply will be just as fresh.
    fn request(&mut self, kind: DumpKind, coalesce: bool) -> io::Result<u32> {
        if coalesce {
            if let Some(queued) = self.queued.iter().find(|d| d.kind == kind) {
                return Ok(queued.seq);
            }
        }
        if let Some(flight) = self.in_flight {
            if flight.started.elapsed() > DUMP_STALL {
                warn!(
                    "{} dump (seq {}) got no reply for {:?}; abandoning it",
                    flight.dump.kind, flight.dump.seq, DUMP_STALL
                );
                self.mirror.abort(flight.dump.kind);
                self.in_flight = None;
            }
        }
        let seq = self.take_seq();
        self.queued.push_back(Dump { kind, seq });
        self.send_next()?;
        Ok(seq)
    }

    fn take_seq(&mut self) -> u32 {
        let seq = self.next_seq;
        // 0 is what notifications carry; never use it for a request.
        self.next_seq = self.next_seq.wrapping_add(1).max(1);
        seq
    }

    /// Sends the next queued dump if none is in flight. A request the kernel refuses to take
    /// is dropped from the queue so that the ones behind it still run.
    fn send_next(&mut self) -> io::Result<()> {
        if self.in_flight.is_some() {
            return Ok(());
        }
        let Some(dump) = self.queued.pop_front() else {
            return Ok(());
        };
        let bytes = dump_request(dump);
        let kernel = SocketAddr::new(0, 0);
        match self.socket.send_to(&bytes, &kernel, 0) {
            Ok(_) => {
                self.mirror.begin(dump.kind);
                self.dump_intr = false;
                self.in_flight = Some(InFlight {
                    dump,
                    started: Instant::now(),
                });
                Ok(())
            }
            Err(e) => Err(context(format_args!("sending {} dump request", dump.kind))(
                e,
            )),
        }
    }

    /// The decoding loop shared by `read_batch` and `snapshot`.
    fn pump(&mut self, max_msgs: usize, sink: &mut dyn FnMut(Origin, NlEvent)) -> io::Result<bool> {
        let mut done = 0;
        while done < max_msgs {
            if self.rx_pos >= self.rx.len() {
                self.rx_pos = 0;
                match receive(&self.socket, &mut self.rx) {
                    Ok(true) => {}
                    Ok(false) => return Ok(false),
                    Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                        debug!("rtnetlink receive buffer overrun; notifications were lost");
                        self.overruns += 1;
                        sink(Origin::Other, NlEvent::Overrun);
                        done += 1;
                        continue;
                    }
                    Err(e) => return Err(context("reading rtnetlink socket")(e)),
                }
            }
            done += 1;
            self.decode_one(sink)?;
        }
        Ok(true)
    }

    /// Decodes the netlink message at `rx_pos` and advances past it.
    fn decode_one(&mut self, sink: &mut dyn FnMut(Origin, NlEvent)) -> io::Result<()> {
        let rest = &self.rx[self.rx_pos..];
        let (head, payload, advance) = match next_message(rest) {
            Ok(m) => m,
            Err(e) => {
                debug!(
                    "dropping {} undecodable bytes from rtnetlink: {e}",
                    rest.len()
                );
                self.rx_pos = self.rx.len();
                return Ok(());
            }
        };
        let MsgHead {
            msg_type,
            flags,
            seq,
            port,
        } = head;
        self.rx_pos += advance.max(1);

        let ours = self
            .in_flight
            .filter(|f| f.dump.seq == seq && port == self.port)
            .map(|f| f.dump);
        let origin = match ours {
            Some(dump) => Origin::Dump(dump.seq),
            None => Origin::Other,
        };
        if ours.is_some() && flags & NLM_F_DUMP_INTR != 0 && !self.dump_intr {
            // The table changed during the dump; the notifications for that change are on
            // their way, but entries the dump skipped may be missing, so it removes nothing.
            debug!("rtnetlink dump seq {seq} was interrupted by a change");
            self.dump_intr = true;
        }

        let code = error_code(payload);
        if port == self.port && single_answer(&mut self.singles, seq, msg_type, code) {
            return Ok(());
        }
        let event = match msg_type {
            NLMSG_NOOP => None,
            NLMSG_OVERRUN => {
                self.overruns += 1;
                Some(NlEvent::Overrun)
            }
            NLMSG_DONE => match ours {
                Some(dump) => return self.dump_done(dump, origin, sink),
                None => {
                    debug!("NLMSG_DONE for unknown request seq {seq} port {port}");
                    None
                }
            },
            NLMSG_ERROR => {
                let code = error_code(payload);
                match ours {
                    Some(dump) if code != 0 => return Err(self.dump_failed(dump, code)),
                    _ => {
                        debug!("NLMSG_ERROR {code} for seq {seq} port {port} ignored");
                        None
                    }
                }
            }
            other => route_event(other, payload),
        };
        if let Some(event) = event {
            self.mirror.observe(&event);
            sink(origin, event);
        }
        Ok(())
    }

    /// The end of our dump: an interrupted one is asked again (a few times), a whole one tells
    /// what went while notifications were lost; then the next queued request goes out.
    fn dump_done(
        &mut self,
        dump: Dump,
        origin: Origin,
        sink: &mut dyn FnMut(Origin, NlEvent),
    ) -> io::Result<()> {
        self.in_flight = None;
        if self.dump_intr && self.intr_retries < MAX_INTR_RETRIES {
            self.mirror.abort(dump.kind);
            self.intr_retries += 1;
            let seq = self.take_seq();
            self.queued.push_back(Dump {
                kind: dump.kind,
                seq,
            });
        } else {
            self.intr_retries = 0;
            for gone in self.mirror.finish(dump.kind) {
                debug!("gone while notifications were lost: {gone:?}");
                sink(Origin::Other, gone);
            }
        }
        sink(origin, NlEvent::DumpDone);
        self.send_next()
    }

    /// Ends the dump in flight, which the kernel refused with `code`, and sends the next one.
    fn dump_failed(&mut self, dump: Dump, code: i32) -> io::Error {
        self.in_flight = None;
        self.mirror.abort(dump.kind);
        let err = io::Error::from_raw_os_error(code.saturating_neg());
        // Keep the queue moving before reporting; a send error is secondary.
        if let Err(e) = self.send_next() {
            warn!("{e}");
        }
        context(format_args!("{} dump (seq {}) failed", dump.kind, dump.seq))(err)
    }
}
