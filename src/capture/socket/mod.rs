//! `CaptureSocket`: an AF_PACKET socket on one interface with a TPACKET_V3 receive ring
//! (`ring.rs`) and the capture filter from `filter.rs`. All `unsafe` code of the capture module
//! lives in this file, `setup.rs` (the system calls of the open sequence) and `ring.rs`.
//!
//! Open sequence (no unfiltered frame can ever be queued):
//! 1. `socket(AF_PACKET, SOCK_RAW, 0)`: protocol 0 receives nothing until bound;
//! 2. attach a drop-all filter;
//! 3. `PACKET_VERSION = TPACKET_V3`, `PACKET_RX_RING`, `mmap`;
//! 4. `bind` to (ETH_P_ALL, ifindex): from here frames are seen, and all dropped;
//! 5. attach the real filter (`SO_ATTACH_FILTER` swaps the program atomically).
//!
//! Readiness: with TPACKET_V3 the kernel wakes the socket when it retires a block (full, or after
//! the retire timeout). mio is edge-triggered, so after a readiness event call `drain` until it
//! returns less than `max_frames` (or `pending()` is false); otherwise the frames left in the ring
//! produce no new event until the next block is retired.
//!
//! Sampling: [`CaptureSocket::set_sampling`] swaps in a filter that keeps one IPv4/IPv6 frame in
//! N (see `filter.rs`). Frames already in the ring were kept under the previous ratio; each frame
//! handed out carries the ratio it was kept under ([`FrameMeta::weight`]), told apart by the
//! kernel's timestamp of the frame against the moment of the swap.
//!
//! Frames sent with [`CaptureSocket::send`] are not captured by the same socket (the kernel skips
//! the sending socket when it copies outgoing frames to taps); other sockets on the interface see
//! them as `PACKET_OUTGOING`.

use std::cell::{Cell, RefCell};
use std::ffi::CString;
use std::io;
use std::mem;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use libc::{c_int, c_void, socklen_t};
use mio::unix::SourceFd;
use mio::{event, Interest, Registry, Token};

use super::ebpf::KernelCounter;
use super::filter;
use super::frame::Mac;
use super::ring::{RawMeta, Ring};
pub use super::ring::{RingConfig, RingStats};
use super::setup::{self, attach_filter, bind_all, check, map_ring, quiet_socket, with_ctx};

mod meta;
pub use meta::FrameMeta;
use meta::{Weights, SWITCH_GRACE};

/// `sll_pkttype` values (from `<linux/if_packet.h>`).
pub const PACKET_HOST: u8 = libc::PACKET_HOST;
pub const PACKET_BROADCAST: u8 = libc::PACKET_BROADCAST;
pub const PACKET_MULTICAST: u8 = libc::PACKET_MULTICAST;
pub const PACKET_OTHERHOST: u8 = libc::PACKET_OTHERHOST;
pub const PACKET_OUTGOING: u8 = libc::PACKET_OUTGOING;

/// An AF_PACKET capture socket on one interface. See the module documentation.
pub struct CaptureSocket {
    // Field order: `ring` is unmapped before `fd` is closed (either order would be fine).
    /// `None` once given back at the tc hooks ([`release_drained_ring`](Self::release_drained_ring)).
    ring: Option<Ring>,
    fd: OwnedFd,
    name: String,
    ifindex: u32,
    snap_len: u32,
    totals: Cell<RingStats>,
    /// The filter's MAC set, kept to rebuild the program when the sampling ratio changes.
    macs: RefCell<Vec<Mac>>,
    weights: Cell<Weights>,
    /// Counting in the kernel: the eBPF program (at the tc hook, or in place of the classic
    /// filter) and its map.
    counter: Option<KernelCounter>,
    /// Why the program is not at the tc hook, when it counts on the socket.
    tc_error: Option<String>,
    /// At the tc hooks: tcx links where the kernel has them (else `cls_bpf` filters).
    tc_links: bool,
    /// How long a block with frames in it can wait to be handed over (the retire timeout).
    retire: Duration,
    /// At the tc hooks, from when the ring holds nothing it has not handed over: it is given
    /// back once read to the end after that.
    ring_free_at: Option<Instant>,
}

// SAFETY: the ring mapping is owned exclusively by this value (nothing else holds pointers into
// it), and neither it nor the fd is tied to the thread that created them, so moving the whole
// socket to another thread is sound. (`Cell` keeps it `!Sync`.)
unsafe impl Send for CaptureSocket {}

impl std::fmt::Debug for CaptureSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaptureSocket")
            .field("name", &self.name)
            .field("ifindex", &self.ifindex)
            .field("fd", &self.fd.as_raw_fd())
            .field("blocks", &self.ring.as_ref().map_or(0, Ring::block_count))
            .field(
                "block_size",
                &self.ring.as_ref().map_or(0, Ring::block_size),
            )
            .field("sampling", &self.weights.get().now)
            .finish()
    }
}

fn realtime_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

impl CaptureSocket {
    /// Opens a capture socket on interface `name` / `ifindex` passing IPv4 and IPv6 frames
    /// addressed to one of `macs`, all ARP frames and all Neighbor Solicitations and
    /// Advertisements (see [`filter::program`]), counting exactly (sampling ratio 1). `name` is
    /// used in error messages only.
    pub fn open(name: &str, ifindex: u32, macs: &[Mac], config: &RingConfig) -> io::Result<Self> {
        let ctx = |(what, e): (&str, io::Error)| with_ctx(name, ifindex, what, e);
        config.validate().map_err(|m| {
            ctx((
                "ring config",
                io::Error::new(io::ErrorKind::InvalidInput, m),
            ))
        })?;
        let prog =
            filter::program(macs, config.snap_len).map_err(|e| ctx(("capture filter", e)))?;
        let sll_ifindex = c_int::try_from(ifindex)
            .ok()
            .filter(|i| *i > 0)
            .ok_or_else(|| ctx(("bind", io::Error::from(io::ErrorKind::InvalidInput))))?;
        let fd = quiet_socket().map_err(ctx)?;
        let ring = map_ring(&fd, config).map_err(ctx)?;
        bind_all(&fd, sll_ifindex).map_err(|e| ctx(("bind", e)))?;
        attach_filter(&fd, &prog).map_err(|e| ctx(("SO_ATTACH_FILTER", e)))?;
        Ok(CaptureSocket {
            ring: Some(ring),
            fd,
            name: name.to_owned(),
            ifindex,
            snap_len: config.snap_len,
            totals: Cell::new(RingStats::default()),
            macs: RefCell::new(macs.to_vec()),
            weights: Cell::new(Weights::EXACT),
            counter: None,
            tc_error: None,
            tc_links: true,
            retire: config.retire_bound(),
            ring_free_at: None,
        })
    }

    /// Like [`open`](Self::open), looking the interface index up by name.
    pub fn open_by_name(name: &str, macs: &[Mac], config: &RingConfig) -> io::Result<Self> {
        let ifindex = if_index(name)?;
        Self::open(name, ifindex, macs, config)
    }

    /// The interface name given at open.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The interface index bound to.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// Bytes of each frame copied into the ring.
    pub fn snap_len(&self) -> u32 {
        self.snap_len
    }

    /// The sampling ratio in force: one IPv4/IPv6 frame in this many is kept (1: exact).
    pub fn sampling(&self) -> u32 {
        match &self.counter {
            Some(c) => c.sampling(),
            None => self.weights.get().now,
        }
    }

    /// Replaces the set of destination MACs for which IPv4 and IPv6 frames are passed, keeping
    /// the sampling ratio. The kernel swaps the program atomically; frames already in the ring
    /// stay there. While counting in the kernel the set is only kept (that program tells the
    /// port's own frames by their packet type; see [`count_in_kernel`](Self::count_in_kernel)).
    pub fn set_macs(&self, macs: &[Mac]) -> io::Result<()> {
        if self.counter.is_none() {
            self.attach(macs, self.sampling())?;
        }
        *self.macs.borrow_mut() = macs.to_vec();
        Ok(())
    }

    /// Keeps one IPv4/IPv6 frame in `one_in` from now on (a power of two up to
    /// [`filter::MAX_SAMPLING`]; 1 counts exactly). ARP and Neighbor Discovery are always kept.
    /// The kernel swaps the program atomically; frames already in the ring keep the weight of the
    /// ratio they were kept under. On error the previous ratio stays in force. Counting in the
    /// kernel at the tc hooks, the program's ratio changes (it scales what it counts itself);
    /// in a socket filter only 1 is accepted.
    pub fn set_sampling(&self, one_in: u32) -> io::Result<()> {
        if let Some(c) = &self.counter {
            return c.set_sampling(one_in);
        }
        let w = self.weights.get();
        if one_in == w.now {
            return Ok(());
        }
        let macs = self.macs.borrow().clone();
        self.attach(&macs, one_in)?;
        self.weights.set(Weights {
            now: one_in,
            before: w.now,
            switched_at_ns: realtime_ns(),
            until: Some(Instant::now() + SWITCH_GRACE),
        });
        Ok(())
    }

    fn attach(&self, macs: &[Mac], one_in: u32) -> io::Result<()> {
        let ctx = |what: &str, e: io::Error| with_ctx(&self.name, self.ifindex, what, e);
        let prog = filter::sampled_program(macs, self.snap_len, one_in)
            .map_err(|e| ctx("capture filter", e))?;
        attach_filter(&self.fd, &prog).map_err(|e| ctx("SO_ATTACH_FILTER", e))
    }

    /// Hands up to `max_frames` captured frames to `f` (metadata, captured bytes), oldest first,
    /// returning blocks to the kernel as they are finished, and returns how many were handed
    /// over. A later call resumes where this one stopped.
    pub fn drain(&mut self, max_frames: usize, mut f: impl FnMut(FrameMeta, &[u8])) -> usize {
        let mut w = self.weights.get();
        // One clock read per call, not per frame.
        let grace = w.until.is_some_and(|t| Instant::now() < t);
        if !grace && w.until.is_some() {
            w.until = None;
            self.weights.set(w);
        }
        let label = format_args!("{} (ifindex {})", self.name, self.ifindex);
        let n = self.ring.as_mut().map_or(0, |ring| {
            ring.walk(max_frames, &label, |m: RawMeta, data| {
                f(
                    FrameMeta {
                        orig_len: m.orig_len,
                        pkt_type: m.pkt_type,
                        weight: w.of(grace, m.ts_ns),
                        vlan: m.vlan,
                    },
                    data,
                )
            })
        });
        self.release_drained_ring();
        // At the tc hooks ARP and ND come from the ring buffer (the ring holds at most frames
        // captured before the switch).
        let Some(rb) = self.counter.as_mut().and_then(|c| c.ring()) else {
            return n;
        };
        n + rb.drain(max_frames.saturating_sub(n), |m, data| {
            let meta = FrameMeta {
                orig_len: m.len,
                pkt_type: m.pkt_type,
                weight: 1,
                vlan: m.vlan,
            };
            f(meta, data)
        })
    }

    /// True if `drain` would hand over at least one frame (or finish a block) now.
    pub fn pending(&self) -> bool {
        self.pending_in_ring() || self.counter.as_ref().is_some_and(|c| c.ring_pending())
    }

    /// Bytes of receive ring mapped for this socket: 0 once given back at the tc hooks.
    pub fn ring_bytes(&self) -> usize {
        self.ring
            .as_ref()
            .map_or(0, |r| r.block_count() * r.block_size())
    }

    /// At the tc hooks nothing new enters the receive ring (the socket left the tap), and its
    /// memory (8 MiB a port by default, pinned in the kernel, and a retire timer firing every
    /// few milliseconds) is wasted: it goes back to the kernel once the frames it held at the
    /// switch are read. A block still being filled then is handed over only by the retire
    /// timer, hence the wait before; frames still waiting keep the ring until `drain` reads
    /// them.
    pub(super) fn release_drained_ring(&mut self) {
        // The clock is read only while a ring waits to go.
        let Some(at) = self.ring_free_at else { return };
        if Instant::now() < at || self.pending_in_ring() {
            return;
        }
        self.ring_free_at = None;
        // Unmapped first: the kernel keeps a ring while any of it is mapped.
        self.ring = None;
        match setup::free_ring(&self.fd) {
            Ok(()) => log::debug!("port {}: capture ring given back", self.name),
            Err(e) => log::warn!(
                "port {} (ifindex {}): giving the unused capture ring back: {e}",
                self.name,
                self.ifindex
            ),
        }
    }

    fn pending_in_ring(&self) -> bool {
        self.ring.as_ref().is_some_and(Ring::pending)
    }

    /// The descriptors readiness comes on: the socket's, and at the tc hooks the ring
    /// buffer's.
    fn ready_fds(&self) -> [Option<RawFd>; 2] {
        [
            Some(self.fd.as_raw_fd()),
            self.counter.as_ref().and_then(|c| c.ring_fd()),
        ]
    }

    /// Kernel ring statistics, accumulated since open; at the tc hooks the BPF ring buffer's
    /// losses count as drops.
    pub fn stats(&self) -> io::Result<RingStats> {
        let mut st = libc::tpacket_stats_v3 {
            tp_packets: 0,
            tp_drops: 0,
            tp_freeze_q_cnt: 0,
        };
        let mut len = mem::size_of::<libc::tpacket_stats_v3>() as socklen_t;
        // SAFETY: `st` is a writable tpacket_stats_v3 and `len` holds its exact size; the kernel
        // writes at most `len` bytes into it and updates `len`.
        check(unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                (&mut st as *mut libc::tpacket_stats_v3).cast::<c_void>(),
                &mut len,
            )
        })
        .map_err(|e| with_ctx(&self.name, self.ifindex, "PACKET_STATISTICS", e))?;
        let mut t = self.totals.get();
        t.packets += u64::from(st.tp_packets);
        t.drops += u64::from(st.tp_drops);
        t.freeze_q_cnt += u64::from(st.tp_freeze_q_cnt);
        self.totals.set(t);
        // At the tc hooks ARP and ND come through the BPF ring buffer instead: its losses are
        // this port's ring drops too.
        if let Some(lost) = self.counter.as_ref().and_then(|c| c.ring_lost()) {
            t.drops += lost;
        }
        Ok(t)
    }

    /// Sends one complete Ethernet frame (no FCS) out of this interface. Nonblocking: a full
    /// transmit queue fails with `WouldBlock`/`ENOBUFS`.
    pub fn send(&self, frame: &[u8]) -> io::Result<()> {
        let ctx = |e: io::Error| with_ctx(&self.name, self.ifindex, "send", e);
        // The frame's own EtherType as the protocol: the socket may be bound to one that
        // never arrives (counting at tc), and the stack below should see the frame for what
        // it is.
        let to = setup::link_addr(self.ifindex, frame);
        // SAFETY: `frame` is a readable buffer of `frame.len()` bytes and `to` a valid
        // sockaddr_ll of the length passed, both for the whole call.
        let n = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                frame.as_ptr().cast::<c_void>(),
                frame.len(),
                0,
                (&to as *const libc::sockaddr_ll).cast::<libc::sockaddr>(),
                mem::size_of::<libc::sockaddr_ll>() as socklen_t,
            )
        };
        if n < 0 {
            // The bare OS error: callers decide on its errno (retry ENOBUFS, not ENETDOWN) and
            // name the port themselves.
            return Err(io::Error::last_os_error());
        }
        if n as usize != frame.len() {
            return Err(ctx(io::Error::new(
                io::ErrorKind::WriteZero,
                format!("short send: {n} of {} bytes", frame.len()),
            )));
        }
        Ok(())
    }
}

impl AsRawFd for CaptureSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl AsFd for CaptureSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl event::Source for CaptureSocket {
    fn register(
        &mut self,
        registry: &Registry,
        token: Token,
        interests: Interest,
    ) -> io::Result<()> {
        for fd in self.ready_fds().into_iter().flatten() {
            SourceFd(&fd).register(registry, token, interests)?;
        }
        Ok(())
    }

    fn reregister(
        &mut self,
        registry: &Registry,
        token: Token,
        interests: Interest,
    ) -> io::Result<()> {
        for fd in self.ready_fds().into_iter().flatten() {
            SourceFd(&fd).reregister(registry, token, interests)?;
        }
        Ok(())
    }

    fn deregister(&mut self, registry: &Registry) -> io::Result<()> {
        for fd in self.ready_fds().into_iter().flatten() {
            SourceFd(&fd).deregister(registry)?;
        }
        Ok(())
    }
}

mod counting;

/// The index of the interface named `name` (in this process's network namespace).
pub fn if_index(name: &str) -> io::Result<u32> {
    let c = CString::new(name).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("interface name {name:?} contains a NUL byte"),
        )
    })?;
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
    match unsafe { libc::if_nametoindex(c.as_ptr()) } {
        0 => {
            let e = io::Error::last_os_error();
            Err(io::Error::new(e.kind(), format!("interface {name}: {e}")))
        }
        i => Ok(i),
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod ebpf_tests;

#[cfg(test)]
mod tc_tests;
