//! The TPACKET_V3 receive ring: its geometry ([`RingConfig`]), the kernel's counters
//! ([`RingStats`]) and the walk over the mmap'ed blocks. The mapping itself is made by
//! `setup.rs`; this file owns it from then on and holds the `unsafe` reads of it.

use std::io;
use std::mem;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicU32, Ordering};

use libc::c_void;

use super::filter;

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
    /// The longest a block with frames in it waits before the kernel hands it over. With
    /// `retire_timeout_ms` 0 the kernel derives the timeout from the link speed: one block's
    /// megabits at the link's Gbit/s plus 1 ms, so at most that at 1 Gbit/s, or 8 ms when the
    /// speed is unknown or slower.
    pub(crate) fn retire_bound(&self) -> std::time::Duration {
        let ms = match self.retire_timeout_ms {
            0 => (self.block_size / (128 * 1024) + 1).max(8),
            ms => ms,
        };
        std::time::Duration::from_millis(u64::from(ms))
    }

    pub(crate) fn validate(&self) -> Result<(), String> {
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

/// What the ring says about one frame besides its bytes.
#[derive(Debug, Clone, Copy)]
pub(super) struct RawMeta {
    /// `tp_len`: the frame's length on the wire.
    pub orig_len: u32,
    /// `sll_pkttype`.
    pub pkt_type: u8,
    /// The kernel's timestamp of the frame (`tp_sec`, `tp_nsec`), ns since the Unix epoch.
    pub ts_ns: u64,
    /// The 802.1Q VLAN the driver took out of the frame (`tp_vlan_tci`, valid with
    /// `TP_STATUS_VLAN_VALID`); `u16::MAX` for an offloaded tag of another protocol (802.1ad).
    pub vlan: Option<u16>,
}

/// The mmap'ed receive ring.
pub(super) struct Ring {
    base: NonNull<u8>,
    size: usize,
    block_size: usize,
    block_count: usize,
    /// Next block to read (or the one being read when `cursor` is set).
    block: usize,
    cursor: Option<Cursor>,
}

impl Ring {
    /// Takes ownership of a mapping of `block_count` blocks of `block_size` bytes at `base`
    /// (unmapped on drop).
    ///
    /// # Safety
    /// `base` must be the start of a live `MAP_SHARED` mapping of exactly
    /// `block_size * block_count` bytes of a TPACKET_V3 receive ring with that geometry, owned by
    /// nothing else.
    pub(super) unsafe fn from_mapping(
        base: NonNull<u8>,
        block_size: usize,
        block_count: usize,
    ) -> Ring {
        Ring {
            base,
            size: block_size * block_count,
            block_size,
            block_count,
            block: 0,
            cursor: None,
        }
    }

    pub(super) fn block_count(&self) -> usize {
        self.block_count
    }

    pub(super) fn block_size(&self) -> usize {
        self.block_size
    }

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

    /// True if `walk` would hand over at least one frame (or finish a block) now.
    pub(super) fn pending(&self) -> bool {
        self.cursor.is_some() || self.user_owns(self.block)
    }

    /// Hands up to `max_frames` frames to `f`, oldest first, returning blocks to the kernel as
    /// they are finished; returns how many were handed over. A later call resumes where this one
    /// stopped. `label` names the socket in the log should a block be corrupt.
    pub(super) fn walk(
        &mut self,
        max_frames: usize,
        label: &dyn std::fmt::Display,
        mut f: impl FnMut(RawMeta, &[u8]),
    ) -> usize {
        let mut done = 0;
        while done < max_frames {
            let b = self.block;
            let mut c = match self.cursor {
                Some(c) => c,
                None => {
                    if !self.user_owns(b) {
                        break;
                    }
                    let h = self.block_header(b);
                    Cursor {
                        offset: h.offset_to_first_pkt as usize,
                        left: h.num_pkts,
                    }
                }
            };
            let base = self.block_ptr(b);
            while c.left > 0 && done < max_frames {
                if c.offset.saturating_add(FRAME_HDRS) > self.block_size {
                    log::error!(
                        "{label}: corrupt ring block {b} (frame at {}), skipping it",
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
                if start.saturating_add(len) > self.block_size {
                    log::error!(
                        "{label}: corrupt ring block {b} (frame data at {start}+{len}), skipping it"
                    );
                    c.left = 0;
                    break;
                }
                // SAFETY: `start..start+len` lies inside block `b` (checked above), which user
                // space owns and the kernel does not write until `release` below. The slice
                // lives only for this call of `f` (the callback's argument lifetime is
                // higher-ranked, so it cannot keep it).
                let data = unsafe { std::slice::from_raw_parts(base.add(start), len) };
                let meta = RawMeta {
                    orig_len: hdr.tp_len,
                    pkt_type: sll.sll_pkttype,
                    ts_ns: u64::from(hdr.tp_sec) * 1_000_000_000 + u64::from(hdr.tp_nsec),
                    vlan: offloaded_vlan(hdr.tp_status, hdr.hv1.tp_vlan_tci, hdr.hv1.tp_vlan_tpid),
                };
                f(meta, data);
                done += 1;
                c.left -= 1;
                c.offset += hdr.tp_next_offset as usize;
            }
            if c.left == 0 {
                self.release(b);
                self.block = (b + 1) % self.block_count;
                self.cursor = None;
            } else {
                self.cursor = Some(c);
            }
        }
        done
    }
}

/// The VLAN of a frame whose tag the driver took out, from its ring header.
fn offloaded_vlan(status: u32, tci: u32, tpid: u16) -> Option<u16> {
    if status & libc::TP_STATUS_VLAN_VALID == 0 {
        return None;
    }
    // Kernels before 3.14 report no TPID; their offloaded tags are 802.1Q.
    if status & libc::TP_STATUS_VLAN_TPID_VALID != 0 && tpid != 0x8100 {
        return Some(u16::MAX);
    }
    Some((tci & 0x0fff) as u16)
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: `base`/`size` are exactly what mmap returned; no reference into the mapping
        // survives (`walk` hands out slices only for the duration of its callback).
        let rc = unsafe { libc::munmap(self.base.as_ptr().cast::<c_void>(), self.size) };
        if rc != 0 {
            log::warn!(
                "munmap of capture ring failed: {}",
                io::Error::last_os_error()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{offloaded_vlan, RingConfig};

    #[test]
    fn a_block_waits_at_most_the_timeout_given_or_what_the_kernel_derives() {
        let ms = |block_kib: u32, tov: u32| {
            let c = RingConfig {
                block_size: block_kib * 1024,
                retire_timeout_ms: tov,
                ..RingConfig::default()
            };
            c.retire_bound().as_millis()
        };
        assert_eq!(ms(1024, 20), 20);
        // Derived: 1 MiB is 8 Mbit, 9 ms at 1 Gbit/s, never under the 8 ms default.
        assert_eq!(ms(1024, 0), 9);
        assert_eq!(ms(64 * 1024, 0), 513);
        assert_eq!(ms(64, 0), 8);
    }

    #[test]
    fn offloaded_tags_by_status_and_tpid() {
        let valid = libc::TP_STATUS_VLAN_VALID;
        let tpid = libc::TP_STATUS_VLAN_TPID_VALID;
        assert_eq!(offloaded_vlan(0, 100, 0x8100), None);
        assert_eq!(
            offloaded_vlan(valid, 0x2064, 0),
            Some(100),
            "priority bits dropped"
        );
        assert_eq!(offloaded_vlan(valid | tpid, 100, 0x8100), Some(100));
        assert_eq!(offloaded_vlan(valid | tpid, 100, 0x88a8), Some(u16::MAX));
    }
}
