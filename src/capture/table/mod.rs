//! Per-client receive accounting: a bounded table keyed by the MAC that delivered each frame and
//! the VLAN it came on.
//!
//! Storage is allocated once at construction; `account` never allocates. Lookup is an
//! open-addressing index (linear probing, backward-shift deletion, load factor <= 1/4, or 1/2
//! past 16,384 clients, a keyed hash with secret per-table keys so remote senders cannot aim at
//! one probe chain) over a slot array whose live slots form an intrusive doubly linked LRU list
//! (most recently seen at the head). The list is ordered by the tick (second) each client was
//! last seen: a client moves to the head on its first frame of a tick, not on every frame, so a
//! hit costs no write to its list neighbours. Insert, lookup, touch, evict and remove are O(1)
//! expected; `roll_over` walks the slots in use or used before (at most `capacity`).

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::net::{IpAddr, Ipv4Addr};

use super::ebpf::Delta;
use crate::client::{ClientKey, ServerSet};

const NIL: u32 = u32::MAX;
/// A free slot's `prev` (never a slot number: capacities stay under 2^30), so that a walk of
/// the slot array can tell the live ones.
const FREE: u32 = u32::MAX - 1;

/// Counts ahead whose entries [`ClientTable::account_kernel_counts`] starts loading.
const FEED_AHEAD: usize = 8;

/// Bounded per-client accounting table with LRU eviction. Ticks are seconds and must not go
/// backwards.
#[derive(Debug, Clone)]
pub struct ClientTable {
    slots: Vec<Slot>,
    /// Head of the free list of slots (threaded through `next`), NIL when empty.
    free: u32,
    index: Box<[Bucket]>,
    mask: usize,
    /// Most recently seen.
    head: u32,
    /// Least recently seen.
    tail: u32,
    len: usize,
    capacity: usize,
    idle_ticks: u64,
    evictions: u64,
    expirations: u64,
    last_roll: Option<u64>,
    /// Secret hash keys, drawn per table; the second is odd so the multiply is a bijection.
    keys: (u64, u64),
}

impl Default for ClientTable {
    fn default() -> Self {
        Self::new(Self::DEFAULT_CAPACITY, Self::DEFAULT_IDLE_TICKS)
    }
}

impl ClientTable {
    /// Default number of clients tracked.
    pub const DEFAULT_CAPACITY: usize = 4096;
    /// Default idle timeout, in ticks.
    pub const DEFAULT_IDLE_TICKS: u64 = 60;
    /// Largest capacity accepted (keeps slot numbers and hash tags within 32 bits).
    pub const MAX_CAPACITY: usize = 1 << 30;

    /// A table holding at most `capacity` clients (clamped to 1..=MAX_CAPACITY), expiring entries
    /// unseen for `idle_ticks` ticks at `roll_over` (0: never expire). Allocates everything now.
    pub fn new(capacity: usize, idle_ticks: u64) -> Self {
        let capacity = capacity.clamp(1, Self::MAX_CAPACITY);
        // Load factor <= 1/4: short probe runs, so the loops that walk them end after a
        // bucket or two and the branch that ends them is mostly predicted (this is what a flood
        // of new sources through a full table costs per frame). Large tables keep 1/2: their
        // index would otherwise cost 16 bytes per client.
        let factor = if capacity <= 16_384 { 4 } else { 2 };
        let buckets = (capacity * factor).next_power_of_two();
        ClientTable {
            slots: Vec::with_capacity(capacity),
            free: NIL,
            index: vec![EMPTY; buckets].into_boxed_slice(),
            mask: buckets - 1,
            head: NIL,
            tail: NIL,
            len: 0,
            capacity,
            idle_ticks,
            evictions: 0,
            expirations: 0,
            last_roll: None,
            keys: {
                let r = RandomState::new();
                (r.hash_one(0x5eed_u64), r.hash_one(0xfeed_u64) | 1)
            },
        }
    }

    /// Live entries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when no client is tracked.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Most clients held at once.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Entries evicted (least recently seen first) to make room, since construction.
    pub fn evictions(&self) -> u64 {
        self.evictions
    }

    /// Entries removed by the idle timeout, since construction.
    pub fn expirations(&self) -> u64 {
        self.expirations
    }

    /// The idle timeout in ticks (0: never).
    pub fn idle_ticks(&self) -> u64 {
        self.idle_ticks
    }

    /// A new idle timeout (a reload); applies from the next `roll_over`.
    pub fn set_idle_ticks(&mut self, idle_ticks: u64) {
        self.idle_ticks = idle_ticks;
    }

    /// Counts `bytes` from `client` (source `src_ip`, destination `dst_ip`, either family)
    /// arriving on port `port` at tick `now_tick`, and makes `client` the most recently seen entry
    /// (to the tick: among clients seen in the same tick the order is that of their first frame
    /// in it). `bytes` is one frame's length on the wire, or, on a sampled port, what a kept frame
    /// stands for (its length times the sampling ratio:
    /// [`FrameMeta::bytes`](super::FrameMeta::bytes)). `ours(dst)` tells the server's own
    /// addresses from others; it is asked only when the destination changes. When the table is
    /// full and `client` is new, the least recently seen entry is evicted. Never allocates.
    // Flat arguments: this is the per-frame path.
    #[allow(clippy::too_many_arguments)]
    pub fn account(
        &mut self,
        client: ClientKey,
        src_ip: IpAddr,
        dst_ip: IpAddr,
        port: u16,
        bytes: u64,
        now_tick: u64,
        ours: impl Fn(IpAddr) -> bool,
    ) {
        let stale = self.idle_ticks;
        let (e, _) = self.entry(client, port, bytes, now_tick);
        match src_ip {
            IpAddr::V4(v4) => e.ip = v4,
            IpAddr::V6(v6) => e.ip6 = Some(v6),
        }
        note_dst(e, dst_ip, now_tick, stale, ours);
    }

    /// Counts what the kernel counted for `client` toward `dst_ip` since the last reading
    /// (`frames` frames, `bytes` bytes on the wire) on port `port`, like that many calls of
    /// [`account`](Self::account) at tick `now_tick`. `src_ip` is a source address the kernel
    /// saw for it, if any (the client's own for an on-link client). Returns the port it was on
    /// when it had been counted at `now_tick` already (it is on `port` now).
    #[allow(clippy::too_many_arguments)]
    pub fn account_counted(
        &mut self,
        client: ClientKey,
        src_ip: Option<IpAddr>,
        dst_ip: IpAddr,
        port: u16,
        bytes: u64,
        now_tick: u64,
        ours: impl Fn(IpAddr) -> bool,
    ) -> Option<u16> {
        let stale = self.idle_ticks;
        let (e, before) = self.entry(client, port, bytes, now_tick);
        match src_ip {
            Some(IpAddr::V4(v4)) => e.ip = v4,
            Some(IpAddr::V6(v6)) => e.ip6 = Some(v6),
            None => {}
        }
        note_dst(e, dst_ip, now_tick, stale, ours);
        before
    }

    /// Feeds one second of what the ports counted in the kernel (each count with its port's
    /// index), as if each frame had been captured here, at tick `now_tick`. A client is on the
    /// port its latest frame came in on, and within one reading that order is unknown: a
    /// client counted on more than one port in the second (it was moved, or its frames are
    /// spread) ends on the port of its largest count, whatever the order of `counts`. One
    /// lookup per count; a second pass over `counts` only in a second that had such a client
    /// (sorting every second's counts by client instead cost 4 ms at 65,536 clients).
    pub fn account_kernel_counts<P: Copy + Into<usize>>(
        &mut self,
        counts: &[(P, Delta)],
        now_tick: u64,
        ours: impl Fn(IpAddr) -> bool,
    ) {
        let mut split: Vec<ClientKey> = Vec::new();
        for (i, (port, d)) in counts.iter().enumerate() {
            // The counts come in the kernel's hash order, each client's entry a cache miss
            // somewhere in the table: start loading the index bucket of the count
            // 2 * FEED_AHEAD on and, that bucket in cache by now, the entry of the count
            // FEED_AHEAD on, so the misses
            // overlap instead of following one another.
            if let Some((_, d)) = counts.get(i + 2 * FEED_AHEAD) {
                prefetch(&self.index[self.tag(&d.key.client) as usize & self.mask]);
            }
            if let Some((_, d)) = counts.get(i + FEED_AHEAD) {
                let b = self.index[self.tag(&d.key.client) as usize & self.mask];
                if let Some(slot) = self.slots.get(b.slot as usize) {
                    prefetch_all(slot);
                }
            }
            let port = (*port).into() as u16;
            let before = self.account_counted(
                d.key.client,
                d.src,
                d.key.dst,
                port,
                d.bytes,
                now_tick,
                &ours,
            );
            if before.is_some_and(|p| p != port) {
                split.push(d.key.client);
            }
        }
        if split.is_empty() {
            return;
        }
        split.sort_unstable_by_key(key);
        split.dedup();
        let mut best: Vec<Option<(u64, u16)>> = vec![None; split.len()];
        for (port, d) in counts {
            let k = key(&d.key.client);
            if let Ok(i) = split.binary_search_by_key(&k, key) {
                if best[i].is_none_or(|(b, _)| d.bytes > b) {
                    best[i] = Some((d.bytes, (*port).into() as u16));
                }
            }
        }
        for (client, best) in split.iter().zip(best) {
            if let (Some((_, port)), Some((_, s))) = (best, self.find(client, self.tag(client))) {
                self.slots[s as usize].entry.port = port;
            }
        }
    }

    /// The entry for `client` with one frame counted, inserted (addresses unset) if new.
    fn entry(
        &mut self,
        client: ClientKey,
        port: u16,
        bytes: u64,
        now_tick: u64,
    ) -> (&mut ClientEntry, Option<u16>) {
        // A bulk flow sends runs of frames from one sender: the most recent entry is checked
        // first, which skips the hash and the probe for most frames of a busy port.
        let head = self.head;
        let k = key(&client);
        if head != NIL && key(&self.slots[head as usize].entry.key) == k {
            return self.hit(head, bytes, port, now_tick);
        }
        let tag = self.tag(&client);
        let mask = self.mask;
        let home = tag as usize & mask;
        // One probe serves both the lookup and, on a miss, the insertion: it ends at the first
        // empty bucket of the key's run.
        let mut at = home;
        loop {
            let b = self.index[at];
            if b.slot == NIL {
                break;
            }
            if b.tag == tag && key(&self.slots[b.slot as usize].entry.key) == k {
                return self.hit(b.slot, bytes, port, now_tick);
            }
            at = (at + 1) & mask;
        }
        if self.len == self.capacity {
            let victim = self.tail;
            let vtag = self.tag(&self.slots[victim as usize].entry.key);
            // The eviction empties one bucket; if it lies in the new key's run before `at`, the
            // key belongs there (lookups stop at the first empty bucket), else `at` is still
            // empty (a backward shift never fills an empty bucket).
            let hole = self.remove_slot(vtag, victim);
            if (hole.wrapping_sub(home) & mask) < (at.wrapping_sub(home) & mask) {
                at = hole;
            }
            self.evictions += 1;
        }
        let entry = ClientEntry {
            key: client,
            ip: Ipv4Addr::UNSPECIFIED,
            ip6: None,
            servers: ServerSet::default(),
            port,
            bytes_this_second: bytes,
            rate: 0,
            last_seen: now_tick,
        };
        let s = self.alloc_slot(entry);
        debug_assert_eq!(self.index[at].slot, NIL);
        self.index[at] = Bucket { slot: s, tag };
        self.push_front(s);
        self.len += 1;
        (&mut self.slots[s as usize].entry, None)
    }

    /// Counts a frame for the entry in slot `s`; also the port it was on if it was counted at
    /// `now_tick` already.
    #[inline]
    fn hit(
        &mut self,
        s: u32,
        bytes: u64,
        port: u16,
        now_tick: u64,
    ) -> (&mut ClientEntry, Option<u16>) {
        // The list is kept in order of the tick last seen, not of every frame: an entry
        // already seen this tick stays where it is, so a hit touches only its own slot (not
        // its list neighbours) after its first frame of the second.
        let seen = self.slots[s as usize].entry.last_seen == now_tick;
        if !seen {
            self.touch(s);
        }
        let e = &mut self.slots[s as usize].entry;
        let before = seen.then_some(e.port);
        e.port = port;
        e.bytes_this_second = e.bytes_this_second.saturating_add(bytes);
        e.last_seen = now_tick;
        (e, before)
    }

    /// Closes the accounting interval at `now_tick` (call once a second): each entry's `rate`
    /// becomes the bytes counted since the previous call divided by the ticks elapsed (at least 1),
    /// and its byte counter is reset. Entries unseen for `idle_ticks` or more are removed first.
    /// Walks only live entries; the expiry part stops at the first entry too recent to expire.
    pub fn roll_over(&mut self, now_tick: u64) {
        if self.idle_ticks > 0 {
            // The LRU list is ordered by last_seen (ticks never go backwards), so expired entries
            // are exactly a suffix of it.
            while self.tail != NIL {
                let t = self.tail;
                let e = self.slots[t as usize].entry;
                if now_tick.saturating_sub(e.last_seen) < self.idle_ticks {
                    break;
                }
                self.remove_slot(self.tag(&e.key), t);
                self.expirations += 1;
            }
        }
        let elapsed = match self.last_roll {
            Some(prev) => now_tick.saturating_sub(prev).max(1),
            None => 1,
        };
        self.last_roll = Some(now_tick);
        // In the slots' order, not the list's: where the order clients were last seen in
        // differs from the order their slots were taken in (after churn, or a table filled from
        // captured frames and fed from the kernel's counts), following the list is a cache miss
        // per entry, one after the other, where a walk of the array is a stream. A free slot's entry is rewritten whole when the slot is taken again, so
        // rolling it over too is harmless.
        for slot in &mut self.slots {
            slot.entry.rate = slot.entry.bytes_this_second / elapsed;
            slot.entry.bytes_this_second = 0;
        }
    }

    /// The entry for `client`, if tracked. Does not change the LRU order.
    pub fn get(&self, client: &ClientKey) -> Option<&ClientEntry> {
        let (_, s) = self.find(client, self.tag(client))?;
        Some(&self.slots[s as usize].entry)
    }

    /// Removes and returns the entry for `client`.
    pub fn remove(&mut self, client: &ClientKey) -> Option<ClientEntry> {
        let tag = self.tag(client);
        let (_, s) = self.find(client, tag)?;
        let e = self.slots[s as usize].entry;
        self.remove_slot(tag, s);
        Some(e)
    }

    /// A keyed multiply-xorshift mix: several times cheaper than SipHash on this per-frame path,
    /// and with secret per-table keys a flood cannot aim its sources at one probe chain.
    fn tag(&self, client: &ClientKey) -> u32 {
        let x = client.as_u64();
        let mut h = (x ^ self.keys.0).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        h ^= h >> 29;
        h = h.wrapping_mul(self.keys.1);
        h ^= h >> 32;
        h as u32
    }

    /// Index position and slot number of `client`.
    fn find(&self, client: &ClientKey, tag: u32) -> Option<(usize, u32)> {
        let mut pos = tag as usize & self.mask;
        loop {
            let b = self.index[pos];
            if b.slot == NIL {
                return None;
            }
            if b.tag == tag && self.slots[b.slot as usize].entry.key == *client {
                return Some((pos, b.slot));
            }
            pos = (pos + 1) & self.mask;
        }
    }

    /// Unlinks slot `s` (whose key hashes to `tag`) from the index and the LRU list and frees
    /// it. Its bucket is found by slot number: no key comparison, no other slot read.
    /// Returns the bucket the deletion left empty.
    fn remove_slot(&mut self, tag: u32, s: u32) -> usize {
        let mut pos = tag as usize & self.mask;
        while self.index[pos].slot != s {
            debug_assert!(self.index[pos].slot != NIL, "live slot is indexed");
            pos = (pos + 1) & self.mask;
        }
        let hole = self.index_delete(pos);
        self.unlink(s);
        self.slots[s as usize].prev = FREE;
        self.slots[s as usize].next = self.free;
        self.free = s;
        self.len -= 1;
        hole
    }

    /// Backward-shift deletion: pull later members of the probe run into the hole so that every
    /// key stays reachable from its home bucket without tombstones. Returns the bucket left empty.
    fn index_delete(&mut self, pos: usize) -> usize {
        let mask = self.mask;
        let mut hole = pos;
        let mut j = pos;
        loop {
            j = (j + 1) & mask;
            let b = self.index[j];
            if b.slot == NIL {
                break;
            }
            let home = b.tag as usize & mask;
            // `b` may move to the hole unless its home lies cyclically in (hole, j].
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.index[hole] = b;
                hole = j;
            }
        }
        self.index[hole] = EMPTY;
        hole
    }
}

mod bucket;
mod entry;
mod lru;
mod prefetch;

use bucket::{key, Bucket, EMPTY};

use entry::note_dst;
pub use entry::ClientEntry;
pub use lru::Iter;
use lru::Slot;
use prefetch::{prefetch, prefetch_all};

#[cfg(test)]
mod model_tests;
#[cfg(test)]
mod tests;
