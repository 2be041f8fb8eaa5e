//! The counting map's layout and the pure work on what is read from it: decoding keys, summing
//! the per-CPU values, and turning the cumulative counters into per-second deltas.
//!
//! Key (24 bytes): source MAC (6), VLAN (u16, host order), destination address (16; IPv4 as
//! `::ffff:a.b.c.d`). Value (32 bytes per CPU): frames (u64), bytes on the wire (u64), and the
//! source address of the frame that created the entry (16, zero when unknown).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};

use crate::client::ClientKey;
use crate::Mac;

pub const KEY_SIZE: usize = 24;
pub const VALUE_SIZE: usize = 32;

pub type RawKey = [u8; KEY_SIZE];

/// What one map entry is about: a client and one destination it sends to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryKey {
    pub client: ClientKey,
    pub dst: IpAddr,
}

pub(super) fn addr(b: &[u8; 16]) -> IpAddr {
    let v6 = Ipv6Addr::from(*b);
    match v6.to_ipv4_mapped() {
        Some(v4) => IpAddr::V4(v4),
        None => IpAddr::V6(v6),
    }
}

/// Decodes a key. Every 24-byte key decodes (the kernel wrote it; a VLAN above 4095 cannot
/// come from the program and is kept as it is).
pub fn decode_key(k: &RawKey) -> EntryKey {
    let mac = Mac::from([k[0], k[1], k[2], k[3], k[4], k[5]]);
    let vlan = u16::from_ne_bytes([k[6], k[7]]);
    let mut d = [0u8; 16];
    d.copy_from_slice(&k[8..24]);
    EntryKey {
        client: ClientKey::new(mac, vlan),
        dst: addr(&d),
    }
}

/// Encodes a key (for tests and for the program's tests).
pub fn encode_key(e: &EntryKey) -> RawKey {
    let mut k = [0u8; KEY_SIZE];
    k[..6].copy_from_slice(&e.client.mac.octets());
    k[6..8].copy_from_slice(&e.client.vlan.to_ne_bytes());
    let d = match e.dst {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => v6,
    };
    k[8..].copy_from_slice(&d.octets());
    k
}

/// One entry's counters summed over the CPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Totals {
    pub frames: u64,
    pub bytes: u64,
    /// The source address the entry was created with, if known.
    pub src: Option<IpAddr>,
}

/// Sums the per-CPU values of one entry (`values`: one `VALUE_SIZE` record per CPU; a short
/// trailing record is ignored). Sums saturate: a counter cannot wrap in a lifetime, but odd
/// kernel answers must not panic.
pub fn sum_values(values: &[u8]) -> Totals {
    let mut t = Totals::default();
    for v in values.chunks_exact(VALUE_SIZE) {
        let u = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&v[i..i + 8]);
            u64::from_ne_bytes(b)
        };
        t.frames = t.frames.saturating_add(u(0));
        t.bytes = t.bytes.saturating_add(u(8));
        if t.src.is_none() {
            let mut s = [0u8; 16];
            s.copy_from_slice(&v[16..32]);
            let a = addr(&s);
            if !a.is_unspecified() {
                t.src = Some(a);
            }
        }
    }
    t
}

/// The counts of one entry since the previous reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delta {
    pub key: EntryKey,
    pub frames: u64,
    pub bytes: u64,
    pub src: Option<IpAddr>,
}

/// Turns cumulative counters into per-reading deltas. An entry the kernel evicted (LRU) and
/// created again starts from zero: a counter lower than last time is taken as all new. An
/// entry missing from a reading is forgotten.
#[derive(Debug, Default)]
pub struct Deltas {
    /// Each entry's counters at the reading that last saw it, and that reading's number.
    seen: HashMap<RawKey, Seen, KeyedHash>,
    reading: u64,
}

#[derive(Debug, Clone, Copy)]
struct Seen {
    frames: u64,
    bytes: u64,
    reading: u64,
}

/// A keyed multiply-xorshift hash of a map key: several times cheaper than SipHash for the
/// once-a-second walk of up to 131,072 keys, and with secret per-process keys the senders
/// (who choose MACs and addresses) cannot aim at one probe chain.
#[derive(Debug, Clone, Copy)]
pub struct KeyedHash(u64, u64);

impl Default for KeyedHash {
    fn default() -> Self {
        use std::hash::BuildHasher;
        let r = std::collections::hash_map::RandomState::new();
        KeyedHash(r.hash_one(0x6b65_7931_u64), r.hash_one(0x6b65_7932_u64) | 1)
    }
}

impl std::hash::BuildHasher for KeyedHash {
    type Hasher = KeyHasher;
    fn build_hasher(&self) -> KeyHasher {
        KeyHasher {
            h: self.0,
            k: self.1,
        }
    }
}

pub struct KeyHasher {
    h: u64,
    k: u64,
}

impl std::hash::Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        for c in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..c.len()].copy_from_slice(c);
            let x = u64::from_le_bytes(b);
            self.h = (self.h ^ x).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            self.h ^= self.h >> 29;
            self.h = self.h.wrapping_mul(self.k);
        }
    }

    fn finish(&self) -> u64 {
        self.h ^ (self.h >> 32)
    }
}

impl Deltas {
    pub fn new() -> Deltas {
        Deltas::default()
    }

    /// Entries remembered from the last complete reading.
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }

    /// One entry of the reading in progress: its delta, if it counted anything since the last
    /// reading. A key given twice in one reading (a map walk that restarted) counts once.
    pub fn entry(&mut self, k: &RawKey, t: Totals) -> Option<Delta> {
        let now = self.reading + 1;
        let (frames, bytes) = match self.seen.get_mut(k) {
            Some(s) if s.reading == now => return None,
            Some(s) => {
                let d = if t.frames >= s.frames && t.bytes >= s.bytes {
                    (t.frames - s.frames, t.bytes - s.bytes)
                } else {
                    (t.frames, t.bytes)
                };
                *s = Seen {
                    frames: t.frames,
                    bytes: t.bytes,
                    reading: now,
                };
                d
            }
            None => {
                self.seen.insert(
                    *k,
                    Seen {
                        frames: t.frames,
                        bytes: t.bytes,
                        reading: now,
                    },
                );
                (t.frames, t.bytes)
            }
        };
        (frames > 0).then(|| Delta {
            key: decode_key(k),
            frames,
            bytes,
            src: t.src,
        })
    }

    /// Ends the reading: what it saw becomes the base of the next one, what it did not see is
    /// forgotten.
    pub fn finish(&mut self) {
        self.reading += 1;
        let now = self.reading;
        self.seen.retain(|_, s| s.reading == now);
    }

    /// Ends a reading that failed halfway: the deltas it gave stand (their entries' new
    /// counters become the base), and the entries it did not reach are kept, not forgotten, so
    /// the next reading counts them from where they were.
    pub fn finish_partial(&mut self) {
        self.reading += 1;
    }
}

/// The number of possible CPUs from `/sys/devices/system/cpu/possible` ("0-3", "0,2-5"): the
/// number of per-CPU values the kernel returns for each entry.
pub fn possible_cpus(text: &str) -> Option<usize> {
    let mut n = 0usize;
    for part in text.trim().split(',') {
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (a.parse::<usize>().ok()?, b.parse::<usize>().ok()?),
            None => {
                let a = part.parse::<usize>().ok()?;
                (a, a)
            }
        };
        if hi < lo {
            return None;
        }
        n = n.checked_add(hi - lo + 1)?;
    }
    (n > 0 && n <= 1 << 16).then_some(n)
}

#[cfg(test)]
mod tests;
