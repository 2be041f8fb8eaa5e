//! `CaptureSocket`: an AF_PACKET socket on one interface with a TPACKET_V3 receive ring and the
//! capture filter from `filter.rs`. All `unsafe` code of the capture module lives in this file.
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
//! Frames sent with [`CaptureSocket::send`] are not captured by the same socket (the kernel skips
//! the sending socket when it copies outgoing frames to taps); other sockets on the interface see
//! them as `PACKET_OUTGOING`.

use std::cell::Cell;
use std::ffi::CString;
use std::io;
use std::mem;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicU32, Ordering};

use libc::{c_int, c_void, sock_filter, socklen_t};
use mio::unix::SourceFd;
use mio::{event, Interest, Registry, Token};

use super::filter;
use super::frame::Mac;

/// `sll_pkttype` values (from `<linux/if_packet.h>`).
pub const PACKET_HOST: u8 = libc::PACKET_HOST;
pub const PACKET_BROADCAST: u8 = libc::PACKET_BROADCAST;
pub const PACKET_MULTICAST: u8 = libc::PACKET_MULTICAST;
pub const PACKET_OTHERHOST: u8 = libc::PACKET_OTHERHOST;
pub const PACKET_OUTGOING: u8 = libc::PACKET_OUTGOING;

/// What the ring says about one captured frame besides its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameMeta {
    /// The real length of the frame on the wire (`tp_len`); the bytes handed over are at most the
    /// snap length.
    pub orig_len: u32,
    /// `sll_pkttype`: [`PACKET_HOST`], [`PACKET_BROADCAST`], [`PACKET_MULTICAST`],
    /// [`PACKET_OTHERHOST`] or [`PACKET_OUTGOING`] (sent by this host).
    pub pkt_type: u8,
}

impl FrameMeta {
    /// True for frames this host sent.
    pub fn is_outgoing(&self) -> bool {
        self.pkt_type == PACKET_OUTGOING
    }
}

/// Ring geometry and capture parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingConfig {
    /// Bytes per block; a multiple of the page size. Frames are packed into blocks.
    pub block_size: u32,
    /// Blocks in the ring (ring memory = block_size * block_count, at most 4 GiB - 1).
    pub block_count: u32,
    /// Nominal frame slot size: a multiple of 16, at least the TPACKET_V3 header plus the snap
    /// length, at most `block_size`. TPACKET_V3 packs frames by their real size; the kernel only
    /// uses this to validate the request.
    pub frame_size: u32,
    /// A block that is not full is handed to user space after this many milliseconds (0: the
    /// kernel's default, derived from the link speed).
    pub retire_timeout_ms: u32,
    /// Bytes of each frame copied into the ring.
    pub snap_len: u32,
}

impl Default for RingConfig {
    fn default() -> Self {
        RingConfig {
            block_size: 1 << 20,
            block_count: 8,
            frame_size: 256,
            retire_timeout_ms: 20,
            snap_len: filter::DEFAULT_SNAP_LEN,
        }
    }
}

impl RingConfig {
    fn validate(&self) -> Result<(), String> {
        // SAFETY: sysconf has no memory-safety preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        let page = u32::try_from(page).unwrap_or(4096).max(1);
        let min_frame = (libc::TPACKET3_HDRLEN as u32 + 16 + self.snap_len + 15) & !15;
        if self.block_size == 0 || self.block_size % page != 0 {
            return Err(format!(
                "block size {} is not a positive multiple of the page size {page}",
                self.block_size
            ));
        }
        if self.block_count == 0 {
            return Err("block count must be > 0".into());
        }
        if u64::from(self.block_size) * u64::from(self.block_count) > u64::from(u32::MAX) {
            return Err("ring larger than 4 GiB".into());
        }
        if self.snap_len == 0 {
            return Err("snap length must be > 0".into());
        }
        if self.frame_size % 16 != 0
            || self.frame_size < min_frame
            || self.frame_size > self.block_size
        {
            return Err(format!(
                "frame size {} must be a multiple of 16 in {min_frame}..={}",
                self.frame_size, self.block_size
            ));
        }
        Ok(())
    }
}

/// Kernel ring counters, accumulated since the socket was opened (the kernel resets its counters
/// on every read).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RingStats {
    /// Frames that passed the filter, including the dropped ones.
    pub packets: u64,
    /// Frames that passed the filter but found no room in the ring.
    pub drops: u64,
    /// Times the ring was found full (the kernel froze the queue until a block came back).
    pub freeze_q_cnt: u64,
}

/// Byte offset of `tpacket_hdr_v1` (`hdr.bh1`) inside `tpacket_block_desc`: after `version` and
/// `offset_to_priv`, 8-aligned. `block_status` is its first field.
const BLOCK_HDR_OFF: usize = mem::offset_of!(libc::tpacket_block_desc, hdr);
/// Offset of the `sockaddr_ll` that follows each `tpacket3_hdr`.
const SLL_OFF: usize = (mem::size_of::<libc::tpacket3_hdr>() + libc::TPACKET_ALIGNMENT - 1)
    & !(libc::TPACKET_ALIGNMENT - 1);
const FRAME_HDRS: usize = SLL_OFF + mem::size_of::<libc::sockaddr_ll>();

const _: () = assert!(BLOCK_HDR_OFF == 8);
const _: () = assert!(mem::offset_of!(libc::tpacket_hdr_v1, block_status) == 0);

/// Position inside the block currently being read.
#[derive(Debug, Clone, Copy)]
struct Cursor {
    offset: usize,
    left: u32,
}

/// The mmap'ed receive ring.
struct Ring {
    base: NonNull<u8>,
    size: usize,
    block_size: usize,
    block_count: usize,
    /// Next block to read (or the one being read when `cursor` is set).
    block: usize,
    cursor: Option<Cursor>,
}

impl Ring {
    fn block_ptr(&self, i: usize) -> *mut u8 {
        debug_assert!(i < self.block_count);
        self.base.as_ptr().wrapping_add(i * self.block_size)
    }

    fn status(&self, i: usize) -> &AtomicU32 {
        // SAFETY: block `i` lies inside the live mapping (i < block_count; the mapping is only
        // removed in Drop, which needs `&mut self`, so it outlives the returned reference).
        // `block_status` is a u32 at offset 8 of a page-aligned block, so the pointer is valid and
        // 4-aligned. The kernel reads and writes it concurrently, so it is only ever accessed
        // through this atomic.
        unsafe { AtomicU32::from_ptr(self.block_ptr(i).add(BLOCK_HDR_OFF).cast::<u32>()) }
    }

    fn user_owns(&self, i: usize) -> bool {
        // Acquire pairs with the kernel's smp_wmb before it sets TP_STATUS_USER: everything it
        // wrote into the block is visible after this load.
        self.status(i).load(Ordering::Acquire) & libc::TP_STATUS_USER != 0
    }

    /// Hands block `i` back to the kernel. Release: our reads of the block happen before it.
    fn release(&self, i: usize) {
        self.status(i)
            .store(libc::TP_STATUS_KERNEL, Ordering::Release);
    }

    /// Reads the block header; only while user space owns block `i`.
    fn block_header(&self, i: usize) -> libc::tpacket_hdr_v1 {
        debug_assert!(self.user_owns(i));
        // SAFETY: the header lies inside block `i` of the live mapping; user space owns the block
        // (TP_STATUS_USER was observed with Acquire), so the kernel does not write it now.
        // read_unaligned has no alignment requirement.
        unsafe {
            ptr::read_unaligned(
                self.block_ptr(i)
                    .add(BLOCK_HDR_OFF)
                    .cast::<libc::tpacket_hdr_v1>(),
            )
        }
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: `base`/`size` are exactly what mmap returned; no reference into the mapping
        // survives (`drain` hands out slices only for the duration of its callback).
        let rc = unsafe { libc::munmap(self.base.as_ptr().cast::<c_void>(), self.size) };
        if rc != 0 {
            log::warn!(
                "munmap of capture ring failed: {}",
                io::Error::last_os_error()
            );
        }
    }
}

/// An AF_PACKET capture socket on one interface. See the module documentation.
pub struct CaptureSocket {
    // Field order: `ring` is unmapped before `fd` is closed (either order would be fine).
    ring: Ring,
    fd: OwnedFd,
    name: String,
    ifindex: u32,
    snap_len: u32,
    totals: Cell<RingStats>,
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
            .field("blocks", &self.ring.block_count)
            .field("block_size", &self.ring.block_size)
            .finish()
    }
}

fn with_ctx(name: &str, ifindex: u32, what: &str, e: io::Error) -> io::Error {
    io::Error::new(
        e.kind(),
        format!("{what} on {name} (ifindex {ifindex}): {e}"),
    )
}

fn check(rc: c_int) -> io::Result<()> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn setsockopt<T>(fd: &OwnedFd, level: c_int, opt: c_int, val: &T) -> io::Result<()> {
    // SAFETY: `val` is a live, initialized T for the whole call and the length passed is exactly
    // its size; the kernel only reads (copies) it.
    check(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            opt,
            (val as *const T).cast::<c_void>(),
            mem::size_of::<T>() as socklen_t,
        )
    })
}

fn attach_filter(fd: &OwnedFd, prog: &[sock_filter]) -> io::Result<()> {
    let len = u16::try_from(prog.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "BPF program too long"))?;
    let fprog = libc::sock_fprog {
        len,
        // The kernel copies the program and never writes through this pointer.
        filter: prog.as_ptr().cast_mut(),
    };
    setsockopt(fd, libc::SOL_SOCKET, libc::SO_ATTACH_FILTER, &fprog)
}

impl CaptureSocket {
    /// Opens a capture socket on interface `name` / `ifindex` passing IPv4 frames addressed to
    /// one of `macs` and all ARP frames (see [`filter::program`]). `name` is used in error
    /// messages only.
    pub fn open(name: &str, ifindex: u32, macs: &[Mac], config: &RingConfig) -> io::Result<Self> {
        let ctx = |what: &str, e: io::Error| with_ctx(name, ifindex, what, e);
        config.validate().map_err(|m| {
            ctx(
                "ring config",
                io::Error::new(io::ErrorKind::InvalidInput, m),
            )
        })?;
        let prog = filter::program(macs, config.snap_len).map_err(|e| ctx("capture filter", e))?;
        let sll_ifindex = c_int::try_from(ifindex)
            .ok()
            .filter(|i| *i > 0)
            .ok_or_else(|| ctx("bind", io::Error::from(io::ErrorKind::InvalidInput)))?;

        // SAFETY: plain socket(2) call with constant arguments; no pointers involved.
        let raw = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            )
        };
        if raw < 0 {
            return Err(ctx("socket(AF_PACKET)", io::Error::last_os_error()));
        }
        // SAFETY: `raw` is a freshly created descriptor that nothing else owns or closes.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };

        attach_filter(&fd, &filter::drop_all())
            .map_err(|e| ctx("SO_ATTACH_FILTER (drop all)", e))?;
        let version = libc::tpacket_versions::TPACKET_V3 as c_int;
        setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_VERSION, &version)
            .map_err(|e| ctx("PACKET_VERSION=TPACKET_V3", e))?;
        let req = libc::tpacket_req3 {
            tp_block_size: config.block_size,
            tp_block_nr: config.block_count,
            tp_frame_size: config.frame_size,
            tp_frame_nr: (config.block_size / config.frame_size) * config.block_count,
            tp_retire_blk_tov: config.retire_timeout_ms,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_RX_RING, &req)
            .map_err(|e| ctx("PACKET_RX_RING", e))?;
        let size = config.block_size as usize * config.block_count as usize;
        // SAFETY: maps the ring the kernel just allocated for this socket (PACKET_RX_RING succeeded
        // with exactly `size` bytes) at an address of the kernel's choosing; no existing memory is
        // affected.
        let base = unsafe {
            libc::mmap(
                ptr::null_mut(),
                size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(ctx("mmap of the receive ring", io::Error::last_os_error()));
        }
        let ring = Ring {
            base: NonNull::new(base.cast::<u8>()).expect("mmap returned a null mapping"),
            size,
            block_size: config.block_size as usize,
            block_count: config.block_count as usize,
            block: 0,
            cursor: None,
        };
        let sock = CaptureSocket {
            ring,
            fd,
            name: name.to_owned(),
            ifindex,
            snap_len: config.snap_len,
            totals: Cell::new(RingStats::default()),
        };

        let sll = libc::sockaddr_ll {
            sll_family: libc::AF_PACKET as u16,
            sll_protocol: (libc::ETH_P_ALL as u16).to_be(),
            sll_ifindex,
            sll_hatype: 0,
            sll_pkttype: 0,
            sll_halen: 0,
            sll_addr: [0; 8],
        };
        // SAFETY: `sll` is a valid sockaddr_ll and the length passed is exactly its size.
        check(unsafe {
            libc::bind(
                sock.fd.as_raw_fd(),
                (&sll as *const libc::sockaddr_ll).cast::<libc::sockaddr>(),
                mem::size_of::<libc::sockaddr_ll>() as socklen_t,
            )
        })
        .map_err(|e| ctx("bind", e))?;
        attach_filter(&sock.fd, &prog).map_err(|e| ctx("SO_ATTACH_FILTER", e))?;
        Ok(sock)
    }

    /// Like [`open`](Self::open), looking the interface index up by name.
    pub fn open_by_name(name: &str, macs: &[Mac], config: &RingConfig) -> io::Result<Self> {
        let c = CString::new(name).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("interface name {name:?} contains a NUL byte"),
            )
        })?;
        // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
        let ifindex = unsafe { libc::if_nametoindex(c.as_ptr()) };
        if ifindex == 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(
                e.kind(),
                format!("if_nametoindex({name}): {e}"),
            ));
        }
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

    /// Replaces the set of destination MACs for which IPv4 frames are passed. The kernel swaps
    /// the program atomically; frames already in the ring stay there.
    pub fn set_macs(&self, macs: &[Mac]) -> io::Result<()> {
        let ctx = |what: &str, e: io::Error| with_ctx(&self.name, self.ifindex, what, e);
        let prog = filter::program(macs, self.snap_len).map_err(|e| ctx("capture filter", e))?;
        attach_filter(&self.fd, &prog).map_err(|e| ctx("SO_ATTACH_FILTER", e))
    }

    /// Hands up to `max_frames` captured frames to `f` (metadata, captured bytes), oldest first,
    /// returning blocks to the kernel as they are finished, and returns how many were handed
    /// over. A later call resumes where this one stopped.
    pub fn drain(&mut self, max_frames: usize, mut f: impl FnMut(FrameMeta, &[u8])) -> usize {
        let ring = &mut self.ring;
        let mut done = 0;
        while done < max_frames {
            let b = ring.block;
            let mut c = match ring.cursor {
                Some(c) => c,
                None => {
                    if !ring.user_owns(b) {
                        break;
                    }
                    let h = ring.block_header(b);
                    Cursor {
                        offset: h.offset_to_first_pkt as usize,
                        left: h.num_pkts,
                    }
                }
            };
            let base = ring.block_ptr(b);
            while c.left > 0 && done < max_frames {
                if c.offset.saturating_add(FRAME_HDRS) > ring.block_size {
                    log::error!(
                        "{} (ifindex {}): corrupt ring block {b} (frame at {}), skipping it",
                        self.name,
                        self.ifindex,
                        c.offset
                    );
                    c.left = 0;
                    break;
                }
                // SAFETY: both headers lie inside block `b` (checked just above) of the live
                // mapping, which user space owns until `release`; read_unaligned has no alignment
                // requirement and the types are plain integers (any bit pattern is valid).
                let (hdr, sll) = unsafe {
                    let p = base.add(c.offset);
                    (
                        ptr::read_unaligned(p.cast::<libc::tpacket3_hdr>()),
                        ptr::read_unaligned(p.add(SLL_OFF).cast::<libc::sockaddr_ll>()),
                    )
                };
                let start = c.offset + hdr.tp_mac as usize;
                let len = hdr.tp_snaplen as usize;
                if start.saturating_add(len) > ring.block_size {
                    log::error!(
                        "{} (ifindex {}): corrupt ring block {b} (frame data at {start}+{len}), \
                         skipping it",
                        self.name,
                        self.ifindex
                    );
                    c.left = 0;
                    break;
                }
                // SAFETY: `start..start+len` lies inside block `b` (checked above), which user
                // space owns and the kernel does not write until `release` below. The slice
                // lives only for this call of `f` (the callback's argument lifetime is
                // higher-ranked, so it cannot keep it).
                let data = unsafe { std::slice::from_raw_parts(base.add(start), len) };
                f(
                    FrameMeta {
                        orig_len: hdr.tp_len,
                        pkt_type: sll.sll_pkttype,
                    },
                    data,
                );
                done += 1;
                c.left -= 1;
                c.offset += hdr.tp_next_offset as usize;
            }
            if c.left == 0 {
                ring.release(b);
                ring.block = (b + 1) % ring.block_count;
                ring.cursor = None;
            } else {
                ring.cursor = Some(c);
            }
        }
        done
    }

    /// True if `drain` would hand over at least one frame (or finish a block) now.
    pub fn pending(&self) -> bool {
        self.ring.cursor.is_some() || self.ring.user_owns(self.ring.block)
    }

    /// Kernel ring statistics, accumulated since open.
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
        Ok(t)
    }

    /// Sends one complete Ethernet frame (no FCS) out of this interface. Nonblocking: a full
    /// transmit queue fails with `WouldBlock`/`ENOBUFS`.
    pub fn send(&self, frame: &[u8]) -> io::Result<()> {
        // SAFETY: `frame` is a readable buffer of `frame.len()` bytes for the whole call.
        let n = unsafe {
            libc::send(
                self.fd.as_raw_fd(),
                frame.as_ptr().cast::<c_void>(),
                frame.len(),
                0,
            )
        };
        if n < 0 {
            return Err(with_ctx(
                &self.name,
                self.ifindex,
                "send",
                io::Error::last_os_error(),
            ));
        }
        if n as usize != frame.len() {
            return Err(with_ctx(
                &self.name,
                self.ifindex,
                "send",
                io::Error::new(
                    io::ErrorKind::WriteZero,
                    format!("short send: {n} of {} bytes", frame.len()),
                ),
            ));
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
        SourceFd(&self.fd.as_raw_fd()).register(registry, token, interests)
    }

    fn reregister(
        &mut self,
        registry: &Registry,
        token: Token,
        interests: Interest,
    ) -> io::Result<()> {
        SourceFd(&self.fd.as_raw_fd()).reregister(registry, token, interests)
    }

    fn deregister(&mut self, registry: &Registry) -> io::Result<()> {
        SourceFd(&self.fd.as_raw_fd()).deregister(registry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::frame::tests::{arp_frame, ipv4_frame};
    use crate::capture::frame::{parse, Frame};
    use std::net::Ipv4Addr;
    use std::process::Command;
    use std::time::{Duration, Instant};

    #[test]
    fn config_validation() {
        assert!(RingConfig::default().validate().is_ok());
        let bad = [
            RingConfig {
                block_size: 1000,
                ..RingConfig::default()
            },
            RingConfig {
                block_count: 0,
                ..RingConfig::default()
            },
            RingConfig {
                frame_size: 250,
                ..RingConfig::default()
            },
            RingConfig {
                frame_size: 64,
                ..RingConfig::default()
            },
            RingConfig {
                snap_len: 0,
                ..RingConfig::default()
            },
            RingConfig {
                block_count: 8192,
                ..RingConfig::default()
            },
        ];
        for c in bad {
            assert!(c.validate().is_err(), "{c:?}");
        }
        // Errors name the interface, and a bad config fails before any socket is made.
        let e = CaptureSocket::open("eth9", 9, &[], &bad[0]).unwrap_err();
        assert!(e.to_string().contains("eth9 (ifindex 9)"), "{e}");
        let e = CaptureSocket::open("eth9", 0, &[], &RingConfig::default()).unwrap_err();
        assert!(e.to_string().contains("eth9 (ifindex 0)"), "{e}");
        let e = CaptureSocket::open_by_name("rlbd-no-such-if0", &[], &RingConfig::default())
            .unwrap_err();
        assert!(e.to_string().contains("rlbd-no-such-if0"), "{e}");
    }

    // Test addresses: 198.18.0.0/15 only; locally administered MACs.
    const CAP_MAC: Mac = Mac(0x02, 0x52, 0x4c, 0x42, 0x00, 0x01);
    const PEER_MAC: Mac = Mac(0x02, 0x52, 0x4c, 0x42, 0x00, 0x02);
    const CLIENT: Mac = Mac(0x02, 0x52, 0x4c, 0x42, 0x00, 0x09);
    const OTHER: Mac = Mac(0x02, 0x52, 0x4c, 0x42, 0x00, 0x77);
    const SERVER_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
    const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 9);
    const OTHER_IP: Ipv4Addr = Ipv4Addr::new(198, 19, 0, 7);

    type Captured = Vec<(FrameMeta, Vec<u8>)>;

    fn ip(args: &str) -> Result<(), String> {
        let out = Command::new("ip")
            .args(args.split_whitespace())
            .output()
            .map_err(|e| format!("cannot run `ip {args}`: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "`ip {args}` failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }

    fn small_ring() -> RingConfig {
        RingConfig {
            block_size: 1 << 16,
            block_count: 4,
            retire_timeout_ms: 10,
            ..RingConfig::default()
        }
    }

    /// Drains `sock` (in chunks of `chunk`) until `want` frames arrived or `timeout` passed, then
    /// keeps listening for `linger` to catch anything unexpected.
    fn collect(
        sock: &mut CaptureSocket,
        want: usize,
        chunk: usize,
        timeout: Duration,
        linger: Duration,
    ) -> Captured {
        let mut poll = mio::Poll::new().unwrap();
        poll.registry()
            .register(sock, Token(7), Interest::READABLE)
            .unwrap();
        let mut events = mio::Events::with_capacity(4);
        let mut got: Captured = Vec::new();
        let start = Instant::now();
        let mut deadline = start + timeout;
        let mut lingering = false;
        loop {
            loop {
                let n = sock.drain(chunk, |m, d| got.push((m, d.to_vec())));
                assert!(n <= chunk);
                if n < chunk {
                    break;
                }
            }
            if got.len() >= want && !lingering {
                lingering = true;
                deadline = Instant::now() + linger;
            }
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            // Short waits: readiness is edge-triggered and only signalled per retired block.
            let wait = (deadline - now).min(Duration::from_millis(25));
            poll.poll(&mut events, Some(wait)).unwrap();
        }
        poll.registry().deregister(sock).unwrap();
        got
    }

    fn ours(got: &Captured) -> Vec<(FrameMeta, Option<Frame>, usize)> {
        got.iter()
            .filter(|(_, d)| {
                d.len() >= 12 && (d[6..12] == CLIENT.octets() || d[6..12] == CAP_MAC.octets())
            })
            .map(|(m, d)| (*m, parse(d), d.len()))
            .collect()
    }

    fn live() -> Result<(), String> {
        // SAFETY: unshare only moves this (test-spawned) thread into a new network namespace.
        if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
            return Err(format!(
                "unshare(CLONE_NEWNET): {}",
                io::Error::last_os_error()
            ));
        }
        ip("link set lo up")?;
        // No IPv6 here: the new links' own Neighbor Discovery (DAD, router solicitations) would
        // pass the filter, which this test wants quiet. (Sysctls under /proc/sys/net follow the
        // opening thread's namespace.)
        for key in ["all", "default"] {
            std::fs::write(format!("/proc/sys/net/ipv6/conf/{key}/disable_ipv6"), "1")
                .map_err(|e| format!("disable_ipv6: {e}"))?;
        }
        ip("link add cap0 address 02:52:4c:42:00:01 type veth peer name peer0 address 02:52:4c:42:00:02")?;
        ip("link set cap0 up")?;
        ip("link set peer0 up")?;
        let cfg = small_ring();
        let mut cap = CaptureSocket::open_by_name("cap0", &[CAP_MAC], &cfg).unwrap();
        let mut peer = CaptureSocket::open_by_name("peer0", &[PEER_MAC], &cfg).unwrap();
        // A second socket on cap0 that passes ARP only: it sees what `cap` sends as OUTGOING.
        let mut cap_arp = CaptureSocket::open_by_name("cap0", &[], &cfg).unwrap();
        assert_eq!(cap.name(), "cap0");
        assert!(cap.ifindex() > 0);
        assert!(!cap.pending());

        // 1. From the peer: IPv4 to the listed MAC, IPv4 to another MAC, an IPv6 frame (not
        // Neighbor Discovery) to another MAC, and a broadcast ARP request. Only the first and the
        // last may arrive.
        let to_us = ipv4_frame(CLIENT, CAP_MAC, CLIENT_IP, SERVER_IP, false, 300);
        let to_other = ipv4_frame(CLIENT, OTHER, CLIENT_IP, OTHER_IP, false, 300);
        let mut v6 = to_other.clone();
        v6[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
        let req = arp_frame(
            CLIENT,
            Mac::broadcast(),
            1,
            CLIENT,
            CLIENT_IP,
            Mac::zero(),
            SERVER_IP,
            false,
        );
        for f in [&to_us, &to_other, &v6, &req] {
            peer.send(f).unwrap();
        }
        let got = collect(
            &mut cap,
            2,
            usize::MAX,
            Duration::from_secs(3),
            Duration::from_millis(100),
        );
        let mine = ours(&got);
        assert_eq!(mine.len(), 2, "{mine:?}");
        let (m, f, caplen) = &mine[0];
        assert_eq!(m.orig_len, 300);
        assert_eq!(*caplen, 96, "truncated to the snap length");
        assert_eq!(m.pkt_type, PACKET_HOST);
        assert!(!m.is_outgoing());
        assert_eq!(
            *f,
            Some(Frame::Ipv4 {
                src_mac: CLIENT,
                dst_mac: CAP_MAC,
                src_ip: CLIENT_IP,
                dst_ip: SERVER_IP
            })
        );
        let (m, f, caplen) = &mine[1];
        assert_eq!((m.orig_len, *caplen), (60, 60));
        assert_eq!(m.pkt_type, PACKET_BROADCAST);
        assert!(matches!(
            f,
            Some(Frame::Arp {
                op: 1,
                tpa: SERVER_IP,
                ..
            })
        ));
        // Nothing else got through the filter either (IPv6 router solicitations etc.).
        for (m, d) in &got {
            match parse(d) {
                Some(Frame::Arp { .. }) => {}
                Some(Frame::Ipv4 { dst_mac, .. }) | Some(Frame::Ipv6 { dst_mac, .. }) => {
                    assert_eq!(dst_mac, CAP_MAC)
                }
                // Neighbor Discovery passes in any direction, like ARP.
                Some(Frame::Nd { .. }) => {}
                None => panic!("unexpected frame {m:?} {d:02x?}"),
            }
        }
        // The sender never sees its own frames; the ARP-only socket on cap0 saw the request.
        let peer_got = collect(
            &mut peer,
            0,
            usize::MAX,
            Duration::ZERO,
            Duration::from_millis(50),
        );
        assert!(ours(&peer_got).is_empty(), "{peer_got:?}");
        let arp_got = collect(
            &mut cap_arp,
            1,
            usize::MAX,
            Duration::from_secs(3),
            Duration::from_millis(50),
        );
        let mine = ours(&arp_got);
        assert_eq!(mine.len(), 1, "{mine:?}");
        assert!(matches!(mine[0].1, Some(Frame::Arp { .. })));

        // 2. A reply sent by `cap` on cap0: the peer sees it as HOST, the other cap0 socket as
        // OUTGOING, and `cap` itself not at all.
        let reply = arp_frame(
            CAP_MAC, PEER_MAC, 2, CAP_MAC, SERVER_IP, CLIENT, CLIENT_IP, false,
        );
        cap.send(&reply).unwrap();
        let at_peer = collect(
            &mut peer,
            1,
            usize::MAX,
            Duration::from_secs(3),
            Duration::from_millis(50),
        );
        let at_peer = ours(&at_peer);
        assert_eq!(at_peer.len(), 1, "{at_peer:?}");
        assert_eq!(at_peer[0].0.pkt_type, PACKET_HOST);
        assert!(matches!(at_peer[0].1, Some(Frame::Arp { op: 2, .. })));
        let outgoing = ours(&collect(
            &mut cap_arp,
            1,
            usize::MAX,
            Duration::from_secs(3),
            Duration::from_millis(50),
        ));
        assert_eq!(outgoing.len(), 1, "{outgoing:?}");
        assert!(outgoing[0].0.is_outgoing());
        assert_eq!(outgoing[0].0.orig_len, 60);
        let own = ours(&collect(
            &mut cap,
            0,
            usize::MAX,
            Duration::ZERO,
            Duration::from_millis(50),
        ));
        assert!(own.is_empty(), "{own:?}");

        // 3. Swap the MAC set: now only IPv4 to OTHER passes (seen as OTHERHOST).
        cap.set_macs(&[OTHER]).unwrap();
        peer.send(&to_us).unwrap();
        peer.send(&to_other).unwrap();
        let mine = ours(&collect(
            &mut cap,
            1,
            usize::MAX,
            Duration::from_secs(3),
            Duration::from_millis(100),
        ));
        assert_eq!(mine.len(), 1, "{mine:?}");
        assert_eq!(mine[0].0.pkt_type, PACKET_OTHERHOST);
        assert!(matches!(
            mine[0].1,
            Some(Frame::Ipv4 { dst_mac: OTHER, .. })
        ));
        cap.set_macs(&[CAP_MAC, OTHER]).unwrap();

        // 4. Bounded drains resume where they stopped.
        for i in 0..7u8 {
            let mut f = ipv4_frame(
                CLIENT,
                CAP_MAC,
                CLIENT_IP,
                SERVER_IP,
                false,
                100 + usize::from(i),
            );
            f[40] = i;
            peer.send(&f).unwrap();
        }
        let got = collect(
            &mut cap,
            7,
            2,
            Duration::from_secs(3),
            Duration::from_millis(50),
        );
        let lens: Vec<u32> = ours(&got).iter().map(|(m, _, _)| m.orig_len).collect();
        assert_eq!(lens, (100..107).collect::<Vec<u32>>());
        let mut n = 0;
        assert_eq!(cap.drain(0, |_, _| n += 1), 0);
        assert_eq!(n, 0);

        // 5. Statistics accumulate across reads (the kernel resets them on each read).
        let s1 = cap.stats().unwrap();
        // 2 (step 1) + 1 (step 3) + 7 (step 4) of ours, plus any noise that passed the filter.
        assert!(s1.packets >= 10, "{s1:?}");
        assert_eq!(s1.drops, 0);
        let s2 = cap.stats().unwrap();
        assert!(s2.packets >= s1.packets);

        // 6. Overflow a tiny ring (2 one-page blocks): the excess is counted as drops, what was
        // kept is intact, and the ring works again once drained.
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u32;
        let tiny_cfg = RingConfig {
            block_size: page,
            block_count: 2,
            ..small_ring()
        };
        let mut tiny = CaptureSocket::open_by_name("cap0", &[CAP_MAC], &tiny_cfg).unwrap();
        for i in 0..200usize {
            peer.send(&ipv4_frame(
                CLIENT,
                CAP_MAC,
                CLIENT_IP,
                SERVER_IP,
                false,
                200 + i,
            ))
            .unwrap();
        }
        std::thread::sleep(Duration::from_millis(50));
        let st = tiny.stats().unwrap();
        assert!(st.packets >= 200, "{st:?}");
        assert!(st.drops > 0, "{st:?}");
        let kept = ours(&collect(
            &mut tiny,
            usize::MAX,
            usize::MAX,
            Duration::from_millis(100),
            Duration::ZERO,
        ));
        eprintln!("tiny ring overflow: {st:?}, kept {}", kept.len());
        assert!(!kept.is_empty());
        assert_eq!(kept.len() as u64, st.packets - st.drops, "{st:?}");
        // Oldest first, strictly in order, and without gaps inside what was kept.
        let lens: Vec<u32> = kept.iter().map(|(m, _, _)| m.orig_len).collect();
        assert!(lens.windows(2).all(|w| w[1] == w[0] + 1), "{lens:?}");
        assert_eq!(lens[0], 200);
        peer.send(&to_us).unwrap();
        let after = ours(&collect(
            &mut tiny,
            1,
            usize::MAX,
            Duration::from_secs(3),
            Duration::ZERO,
        ));
        assert_eq!(after.len(), 1, "{after:?}");
        assert_eq!(after[0].0.orig_len, 300);
        let st2 = tiny.stats().unwrap();
        assert_eq!(st2.drops, st.drops, "{st2:?}");
        assert!(
            st2.packets > st.packets,
            "accumulated: {st2:?} after {st:?}"
        );
        Ok(())
    }

    /// Root only: a veth pair in a private network namespace, frames sent from one end and
    /// captured on the other.
    #[test]
    fn live_veth_capture() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("live_veth_capture: skipped, needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN)");
            return;
        }
        // A thread of its own: the namespace change must not leak into other tests' threads.
        match std::thread::spawn(live).join() {
            Ok(Ok(())) => {}
            Ok(Err(reason)) => eprintln!("live_veth_capture: skipped: {reason}"),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
}
