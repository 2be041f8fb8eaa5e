//! The frames the tc programs hand over (ARP and Neighbor Discovery, both directions): a BPF
//! ring buffer (Linux >= 5.8) the daemon maps and reads without a system call, and polls for
//! readiness like a socket. Each record is a header ([`RecordMeta`]) and the frame's first
//! bytes (up to the snap length).
//!
//! The kernel's layout: the consumer position on the first page (the reader's to write), the
//! producer position on the second, then the data area, mapped twice in a row so that a record
//! that wraps reads as one piece. Each record starts with a length word (bit 31: still being
//! written; bit 30: discarded) and a page offset, 8 bytes, and is padded to 8.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use super::sys::{self, Mapped};

const BUSY: u32 = 1 << 31;
const DISCARD: u32 = 1 << 30;
const HDR: usize = 8;
/// The program's own header in front of the frame's bytes.
pub const META: usize = 8;
/// Bytes of data area: a few thousand ARP/ND frames, more than any burst the daemon's loop
/// leaves unread between two wakeups.
pub const SIZE: u32 = 256 * 1024;

/// What a record says about its frame (written by `tc_program.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordMeta {
    /// The frame's length in the kernel (without a tag taken out of it).
    pub len: u32,
    /// The VLAN of a tag taken out of the frame, if one was.
    pub vlan: Option<u16>,
    /// `skb->pkt_type` at ingress, `PACKET_OUTGOING` at egress.
    pub pkt_type: u8,
}

impl RecordMeta {
    /// Decodes the program's header (`len` u32, VLAN u16, packet type u8, tag taken out u8,
    /// in host order).
    pub fn decode(b: &[u8]) -> Option<RecordMeta> {
        let b: &[u8; META] = b.get(..META)?.try_into().ok()?;
        Some(RecordMeta {
            len: u32::from_ne_bytes([b[0], b[1], b[2], b[3]]),
            vlan: (b[7] != 0).then(|| u16::from_ne_bytes([b[4], b[5]]) & 0x0fff),
            pkt_type: b[6],
        })
    }
}

/// A ring buffer map, mapped, and the count of frames it had no room for.
#[derive(Debug)]
pub struct RingBuf {
    lost: OwnedFd,
    // Unmapped before the map's fd is closed (either order would be fine).
    consumer: Mapped,
    producer: Mapped,
    map: OwnedFd,
    mask: u64,
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(p).ok().filter(|p| *p > 0).unwrap_or(4096)
}

impl RingBuf {
    /// Creates a ring buffer of [`SIZE`] bytes named `rlbd_<name>` and maps it.
    pub fn new(name: &str) -> io::Result<RingBuf> {
        let map = sys::map_create(
            sys::BPF_MAP_TYPE_RINGBUF,
            0,
            0,
            SIZE,
            0,
            &format!("rlbd_{name}"),
        )
        .map_err(|e| io::Error::new(e.kind(), format!("creating the frame ring buffer: {e}")))?;
        let lost = sys::map_create(sys::BPF_MAP_TYPE_ARRAY, 4, 8, 1, 0, &format!("rlbd_{name}"))
            .map_err(|e| {
                io::Error::new(e.kind(), format!("creating the lost-frame counter: {e}"))
            })?;
        let page = page_size();
        let size = SIZE as usize;
        let consumer = Mapped::at(map.as_fd(), page, 0, true)?;
        let producer = Mapped::at(map.as_fd(), page + 2 * size, page, false)?;
        Ok(RingBuf {
            lost,
            consumer,
            producer,
            map,
            mask: u64::from(SIZE) - 1,
        })
    }

    /// The map, for the programs and for polling.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.map.as_fd()
    }

    /// The counter of lost frames, for the programs.
    pub fn lost_fd(&self) -> BorrowedFd<'_> {
        self.lost.as_fd()
    }

    /// Frames the programs found no room for since the ring was made.
    pub fn lost(&self) -> io::Result<u64> {
        let mut v = [0u8; 8];
        sys::lookup(self.lost.as_fd(), &0u32.to_ne_bytes(), &mut v)?;
        Ok(u64::from_ne_bytes(v))
    }

    fn data_start() -> usize {
        page_size()
    }

    /// True when a record (finished or not) waits.
    pub fn pending(&self) -> bool {
        self.consumer.load(0) < self.producer.load(0)
    }

    /// Hands up to `max` finished records to `f` (the program's header, the frame's bytes),
    /// oldest first, and returns how many. Stops at a record still being written.
    pub fn drain(&mut self, max: usize, mut f: impl FnMut(RecordMeta, &[u8])) -> usize {
        let mut cons = self.consumer.load(0);
        let prod = self.producer.load(0);
        let mut n = 0;
        while cons < prod && n < max {
            let at = Self::data_start() + (cons & self.mask) as usize;
            let word = self.producer.load(at);
            let len_word = if cfg!(target_endian = "little") {
                word as u32
            } else {
                (word >> 32) as u32
            };
            if len_word & BUSY != 0 {
                break;
            }
            let len = (len_word & !(BUSY | DISCARD)) as usize;
            if len_word & DISCARD == 0 {
                if let Some(rec) = self.producer.bytes(at + HDR, len) {
                    if let Some(meta) = RecordMeta::decode(rec) {
                        // The record holds the snap length; a shorter frame, less of it.
                        let bytes = &rec[META..];
                        f(meta, &bytes[..bytes.len().min(meta.len as usize)]);
                        n += 1;
                    }
                }
            }
            cons += (HDR + len).next_multiple_of(8) as u64;
            // Frees the record for the kernel at once: a long batch must not fill the ring.
            self.consumer.store(0, cons);
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_headers_decode() {
        let mut b = Vec::new();
        b.extend_from_slice(&60u32.to_ne_bytes());
        b.extend_from_slice(&0x2005u16.to_ne_bytes());
        b.extend_from_slice(&[4, 1]);
        let m = RecordMeta::decode(&b).unwrap();
        // The priority bits of the tag are not the VLAN.
        assert_eq!(
            m,
            RecordMeta {
                len: 60,
                vlan: Some(5),
                pkt_type: 4
            }
        );
        b[7] = 0;
        assert_eq!(RecordMeta::decode(&b).unwrap().vlan, None);
        assert_eq!(RecordMeta::decode(&b[..7]), None);
    }
}
