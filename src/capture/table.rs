//! Per-client receive accounting: a bounded table keyed by the MAC that delivered each frame.
//!
//! Storage is allocated once at construction; `account` never allocates. Lookup is an
//! open-addressing index (linear probing, backward-shift deletion, load factor <= 1/2, randomly
//! keyed SipHash so remote senders cannot aim at one probe chain) over a slot array whose live
//! slots form an intrusive doubly linked LRU list (most recently seen at the head). Insert, lookup,
//! touch, evict and remove are O(1) expected; `roll_over` touches only live entries.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::net::{Ipv4Addr, Ipv6Addr};

use super::frame::Mac;

/// One client: an on-link neighbour that delivers frames to the server (routed traffic counts
/// toward the gateway's MAC).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientEntry {
    /// The sender's MAC (the table key).
    pub mac: Mac,
    /// The IPv4 source of its latest IPv4 frame (for an on-link client, its own address);
    /// unspecified (0.0.0.0) while it has sent IPv6 only.
    pub ip: Ipv4Addr,
    /// The IPv4 destination of its latest IPv4 frame (the server address it talks to).
    pub server_ip: Ipv4Addr,
    /// The IPv6 source of its latest IPv6 frame, if it sent any: a dual-stack client is one
    /// client (one MAC), accounted for both families.
    pub ip6: Option<Ipv6Addr>,
    /// The IPv6 destination of its latest IPv6 frame.
    pub server_ip6: Option<Ipv6Addr>,
    /// Index of the port (slave) its latest frame arrived on.
    pub port: u16,
    /// Bytes (frame lengths on the wire) since the last `roll_over`.
    pub bytes_this_second: u64,
    /// Bytes per tick over the interval that the last `roll_over` closed (bytes/s for 1 s ticks).
    pub rate: u64,
    /// Tick of its latest frame.
    pub last_seen: u64,
}

const NIL: u32 = u32::MAX;

#[derive(Debug, Clone, Copy)]
struct Slot {
    entry: ClientEntry,
    prev: u32,
    next: u32,
}

/// A bucket of the open-addressing index: slot number (NIL when empty) and the low 32 bits of the
/// key's hash (its home bucket, and a cheap pre-check before touching the slot).
#[derive(Debug, Clone, Copy)]
struct Bucket {
    slot: u32,
    tag: u32,
}

const EMPTY: Bucket = Bucket { slot: NIL, tag: 0 };

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
        let buckets = (capacity * 2).next_power_of_two();
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

    /// Counts one frame of `len` bytes from `mac` (source IPv4 `src_ip`, destination `dst_ip`)
    /// arriving on port `port` at tick `now_tick`, and makes `mac` the most recently seen entry.
    /// When the table is full and `mac` is new, the least recently seen entry is evicted.
    pub fn account(
        &mut self,
        mac: Mac,
        src_ip: Ipv4Addr,
        dst_ip: Ipv4Addr,
        port: u16,
        len: u32,
        now_tick: u64,
    ) {
        let e = self.entry(mac, port, len, now_tick);
        e.ip = src_ip;
        e.server_ip = dst_ip;
    }

    /// [`account`](Self::account) for an IPv6 frame: the same client (keyed by MAC), its IPv6
    /// source and destination recorded beside the IPv4 ones. Never allocates either.
    pub fn account_v6(
        &mut self,
        mac: Mac,
        src_ip: Ipv6Addr,
        dst_ip: Ipv6Addr,
        port: u16,
        len: u32,
        now_tick: u64,
    ) {
        let e = self.entry(mac, port, len, now_tick);
        e.ip6 = Some(src_ip);
        e.server_ip6 = Some(dst_ip);
    }

    /// The entry for `mac` with one frame counted, inserted (addresses unset) if new.
    fn entry(&mut self, mac: Mac, port: u16, len: u32, now_tick: u64) -> &mut ClientEntry {
        // A bulk flow sends runs of frames from one sender: the most recent entry is checked
        // first, which skips the hash and the probe for most frames of a busy port.
        let head = self.head;
        let hit = if head != NIL && self.slots[head as usize].entry.mac == mac {
            Some(head)
        } else {
            self.find(&mac, self.tag(&mac)).map(|(_, s)| s)
        };
        if let Some(s) = hit {
            self.touch(s);
            let e = &mut self.slots[s as usize].entry;
            e.port = port;
            e.bytes_this_second = e.bytes_this_second.saturating_add(u64::from(len));
            e.last_seen = now_tick;
            return e;
        }
        let tag = self.tag(&mac);
        if self.len == self.capacity {
            let victim = self.tail;
            let vmac = self.slots[victim as usize].entry.mac;
            self.remove_slot(&vmac, victim);
            self.evictions += 1;
        }
        let entry = ClientEntry {
            mac,
            ip: Ipv4Addr::UNSPECIFIED,
            server_ip: Ipv4Addr::UNSPECIFIED,
            ip6: None,
            server_ip6: None,
            port,
            bytes_this_second: u64::from(len),
            rate: 0,
            last_seen: now_tick,
        };
        let s = self.alloc_slot(entry);
        let mut pos = tag as usize & self.mask;
        while self.index[pos].slot != NIL {
            pos = (pos + 1) & self.mask;
        }
        self.index[pos] = Bucket { slot: s, tag };
        self.push_front(s);
        self.len += 1;
        &mut self.slots[s as usize].entry
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
                self.remove_slot(&e.mac, t);
                self.expirations += 1;
            }
        }
        let elapsed = match self.last_roll {
            Some(prev) => now_tick.saturating_sub(prev).max(1),
            None => 1,
        };
        self.last_roll = Some(now_tick);
        let mut s = self.head;
        while s != NIL {
            let slot = &mut self.slots[s as usize];
            slot.entry.rate = slot.entry.bytes_this_second / elapsed;
            slot.entry.bytes_this_second = 0;
            s = slot.next;
        }
    }

    /// The entry for `mac`, if tracked. Does not change the LRU order.
    pub fn get(&self, mac: &Mac) -> Option<&ClientEntry> {
        let (_, s) = self.find(mac, self.tag(mac))?;
        Some(&self.slots[s as usize].entry)
    }

    /// Removes and returns the entry for `mac`.
    pub fn remove(&mut self, mac: &Mac) -> Option<ClientEntry> {
        let (_, s) = self.find(mac, self.tag(mac))?;
        let e = self.slots[s as usize].entry;
        self.remove_slot(mac, s);
        Some(e)
    }

    /// Live entries, most recently seen first.
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            table: self,
            cur: self.head,
            left: self.len,
        }
    }

    /// A keyed multiply-xorshift mix: several times cheaper than SipHash on this per-frame path,
    /// and with secret per-table keys a flood cannot aim its sources at one probe chain.
    fn tag(&self, mac: &Mac) -> u32 {
        let m = mac.octets();
        let x = u64::from_be_bytes([0, 0, m[0], m[1], m[2], m[3], m[4], m[5]]);
        let mut h = (x ^ self.keys.0).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        h ^= h >> 29;
        h = h.wrapping_mul(self.keys.1);
        h ^= h >> 32;
        h as u32
    }

    /// Index position and slot number of `mac`.
    fn find(&self, mac: &Mac, tag: u32) -> Option<(usize, u32)> {
        let mut pos = tag as usize & self.mask;
        loop {
            let b = self.index[pos];
            if b.slot == NIL {
                return None;
            }
            if b.tag == tag && self.slots[b.slot as usize].entry.mac == *mac {
                return Some((pos, b.slot));
            }
            pos = (pos + 1) & self.mask;
        }
    }

    /// Unlinks slot `s` (holding `mac`) from the index and the LRU list and frees it.
    fn remove_slot(&mut self, mac: &Mac, s: u32) {
        let tag = self.tag(mac);
        let (pos, found) = self.find(mac, tag).expect("live slot is indexed");
        debug_assert_eq!(found, s);
        self.index_delete(pos);
        self.unlink(s);
        self.slots[s as usize].next = self.free;
        self.free = s;
        self.len -= 1;
    }

    /// Backward-shift deletion: pull later members of the probe run into the hole so that every
    /// key stays reachable from its home bucket without tombstones.
    fn index_delete(&mut self, pos: usize) {
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
    }

    fn alloc_slot(&mut self, entry: ClientEntry) -> u32 {
        let slot = Slot {
            entry,
            prev: NIL,
            next: NIL,
        };
        if self.free != NIL {
            let s = self.free;
            self.free = self.slots[s as usize].next;
            self.slots[s as usize] = slot;
            s
        } else {
            // Never reallocates: `slots` was created with `capacity` room and len <= capacity.
            debug_assert!(self.slots.len() < self.slots.capacity());
            self.slots.push(slot);
            (self.slots.len() - 1) as u32
        }
    }

    fn unlink(&mut self, s: u32) {
        let Slot { prev, next, .. } = self.slots[s as usize];
        if prev != NIL {
            self.slots[prev as usize].next = next;
        } else {
            self.head = next;
        }
        if next != NIL {
            self.slots[next as usize].prev = prev;
        } else {
            self.tail = prev;
        }
    }

    fn push_front(&mut self, s: u32) {
        let old = self.head;
        {
            let slot = &mut self.slots[s as usize];
            slot.prev = NIL;
            slot.next = old;
        }
        if old != NIL {
            self.slots[old as usize].prev = s;
        } else {
            self.tail = s;
        }
        self.head = s;
    }

    fn touch(&mut self, s: u32) {
        if self.head != s {
            self.unlink(s);
            self.push_front(s);
        }
    }
}

/// Iterator over live entries, most recently seen first.
#[derive(Debug, Clone)]
pub struct Iter<'a> {
    table: &'a ClientTable,
    cur: u32,
    left: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = &'a ClientEntry;

    fn next(&mut self) -> Option<&'a ClientEntry> {
        if self.cur == NIL {
            return None;
        }
        let slot = &self.table.slots[self.cur as usize];
        self.cur = slot.next;
        self.left -= 1;
        Some(&slot.entry)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl<'a> IntoIterator for &'a ClientTable {
    type Item = &'a ClientEntry;
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::frame::{parse, Frame};
    use proptest::prelude::*;

    const SIP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);

    fn m(i: u32) -> Mac {
        let b = i.to_be_bytes();
        Mac::from([0x02, 0x00, b[0], b[1], b[2], b[3]])
    }

    fn cip(i: u32) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(Ipv4Addr::new(198, 18, 0, 0)) + (i & 0x1_ffff))
    }

    fn macs(t: &ClientTable) -> Vec<Mac> {
        t.iter().map(|e| e.mac).collect()
    }

    /// Structural invariants: list and index agree, every key findable, no duplicates.
    fn check(t: &ClientTable) {
        assert!(t.len() <= t.capacity());
        let fwd: Vec<u32> = {
            let mut v = Vec::new();
            let mut s = t.head;
            while s != NIL {
                v.push(s);
                s = t.slots[s as usize].next;
            }
            v
        };
        assert_eq!(fwd.len(), t.len());
        let mut back = Vec::new();
        let mut s = t.tail;
        while s != NIL {
            back.push(s);
            s = t.slots[s as usize].prev;
        }
        back.reverse();
        assert_eq!(fwd, back);
        let used = t.index.iter().filter(|b| b.slot != NIL).count();
        assert_eq!(used, t.len());
        for &s in &fwd {
            let mac = t.slots[s as usize].entry.mac;
            assert_eq!(t.find(&mac, t.tag(&mac)).map(|x| x.1), Some(s));
        }
        assert_eq!(t.iter().len(), t.len());
    }

    #[test]
    fn insert_lookup_update() {
        let mut t = ClientTable::new(8, 0);
        assert!(t.is_empty());
        t.account(m(1), cip(1), SIP, 0, 100, 10);
        t.account(m(2), cip(2), SIP, 1, 200, 10);
        t.account(m(1), cip(3), Ipv4Addr::new(198, 18, 0, 2), 1, 50, 11);
        let e = t.get(&m(1)).unwrap();
        assert_eq!(e.ip, cip(3));
        assert_eq!(e.server_ip, Ipv4Addr::new(198, 18, 0, 2));
        assert_eq!(e.port, 1);
        assert_eq!(e.bytes_this_second, 150);
        assert_eq!(e.last_seen, 11);
        assert_eq!(t.get(&m(2)).unwrap().bytes_this_second, 200);
        assert_eq!(t.get(&m(3)), None);
        assert_eq!(t.len(), 2);
        assert_eq!(macs(&t), vec![m(1), m(2)]);
        check(&t);
    }

    #[test]
    fn dual_stack_client_is_one_entry() {
        let mut t = ClientTable::new(8, 0);
        let c6: Ipv6Addr = "2001:db8:77::11".parse().unwrap();
        let s6: Ipv6Addr = "2001:db8:77::1".parse().unwrap();
        // IPv6 first: a new entry without IPv4 addresses.
        t.account_v6(m(1), c6, s6, 1, 100, 1);
        let e = t.get(&m(1)).unwrap();
        assert_eq!(
            (e.ip, e.server_ip),
            (Ipv4Addr::UNSPECIFIED, Ipv4Addr::UNSPECIFIED)
        );
        assert_eq!((e.ip6, e.server_ip6), (Some(c6), Some(s6)));
        // Then IPv4 from the same MAC: the same entry, both families kept, bytes summed.
        t.account(m(1), cip(1), SIP, 0, 50, 2);
        t.account(m(2), cip(2), SIP, 0, 10, 2);
        t.account_v6(m(1), c6, s6, 1, 25, 2);
        let e = t.get(&m(1)).unwrap();
        assert_eq!((e.ip, e.server_ip), (cip(1), SIP));
        assert_eq!((e.ip6, e.server_ip6), (Some(c6), Some(s6)));
        assert_eq!((e.port, e.bytes_this_second, e.last_seen), (1, 175, 2));
        assert_eq!(t.get(&m(2)).unwrap().ip6, None);
        assert_eq!(t.len(), 2);
        assert_eq!(macs(&t), vec![m(1), m(2)]);
        check(&t);
    }

    #[test]
    fn lru_eviction_order_and_count() {
        let mut t = ClientTable::new(3, 0);
        for i in 1..=3 {
            t.account(m(i), cip(i), SIP, 0, 1, 1);
        }
        // Touch 1: order is now 1, 3, 2 (2 is least recent).
        t.account(m(1), cip(1), SIP, 0, 1, 2);
        assert_eq!(macs(&t), vec![m(1), m(3), m(2)]);
        t.account(m(4), cip(4), SIP, 0, 1, 3);
        assert_eq!(macs(&t), vec![m(4), m(1), m(3)]);
        assert_eq!(t.evictions(), 1);
        assert!(t.get(&m(2)).is_none());
        t.account(m(5), cip(5), SIP, 0, 1, 3);
        assert_eq!(macs(&t), vec![m(5), m(4), m(1)]);
        assert_eq!(t.evictions(), 2);
        // A get does not refresh.
        assert!(t.get(&m(1)).is_some());
        t.account(m(6), cip(6), SIP, 0, 1, 4);
        assert!(t.get(&m(1)).is_none());
        assert_eq!(t.evictions(), 3);
        assert_eq!(t.len(), 3);
        check(&t);
    }

    #[test]
    fn capacity_one_and_clamp() {
        let mut t = ClientTable::new(0, 0);
        assert_eq!(t.capacity(), 1);
        t.account(m(1), cip(1), SIP, 0, 1, 1);
        t.account(m(2), cip(2), SIP, 0, 1, 1);
        assert_eq!(macs(&t), vec![m(2)]);
        assert_eq!(t.evictions(), 1);
        check(&t);
    }

    #[test]
    fn roll_over_rates() {
        let mut t = ClientTable::new(16, 0);
        t.account(m(1), cip(1), SIP, 0, 1000, 0);
        t.account(m(1), cip(1), SIP, 0, 500, 0);
        t.account(m(2), cip(2), SIP, 1, 64, 0);
        t.roll_over(1);
        assert_eq!(t.get(&m(1)).unwrap().rate, 1500);
        assert_eq!(t.get(&m(1)).unwrap().bytes_this_second, 0);
        assert_eq!(t.get(&m(2)).unwrap().rate, 64);
        t.account(m(2), cip(2), SIP, 1, 100, 1);
        t.roll_over(2);
        assert_eq!(t.get(&m(1)).unwrap().rate, 0);
        assert_eq!(t.get(&m(2)).unwrap().rate, 100);
        // A late roll-over averages over the ticks it covers.
        t.account(m(1), cip(1), SIP, 0, 3000, 3);
        t.roll_over(5);
        assert_eq!(t.get(&m(1)).unwrap().rate, 1000);
        // Saturates instead of overflowing.
        t.account(m(1), cip(1), SIP, 0, u32::MAX, 5);
        let e = t.get(&m(1)).unwrap();
        assert_eq!(e.bytes_this_second, u64::from(u32::MAX));
        check(&t);
    }

    #[test]
    fn idle_expiry_walks_from_the_tail() {
        let mut t = ClientTable::new(16, 3);
        t.account(m(1), cip(1), SIP, 0, 1, 0);
        t.account(m(2), cip(2), SIP, 0, 1, 1);
        t.account(m(3), cip(3), SIP, 0, 1, 2);
        t.roll_over(2);
        assert_eq!(t.len(), 3);
        t.roll_over(3); // m(1) idle for 3 ticks
        assert_eq!(macs(&t), vec![m(3), m(2)]);
        assert_eq!(t.expirations(), 1);
        t.account(m(2), cip(2), SIP, 0, 1, 4);
        t.roll_over(5); // m(3) idle 3, m(2) idle 1
        assert_eq!(macs(&t), vec![m(2)]);
        t.roll_over(100);
        assert!(t.is_empty());
        assert_eq!(t.expirations(), 3);
        assert_eq!(t.evictions(), 0);
        check(&t);
        // Slots are reused after expiry.
        for i in 10..26 {
            t.account(m(i), cip(i), SIP, 0, 1, 101);
        }
        assert_eq!(t.len(), 16);
        assert_eq!(t.slots.len(), 16);
        check(&t);
    }

    #[test]
    fn zero_idle_never_expires() {
        let mut t = ClientTable::new(4, 0);
        t.account(m(1), cip(1), SIP, 0, 1, 0);
        t.roll_over(u64::MAX);
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn remove_and_reinsert() {
        let mut t = ClientTable::new(8, 0);
        for i in 0..8 {
            t.account(m(i), cip(i), SIP, 0, 1, 1);
        }
        assert_eq!(t.remove(&m(3)).unwrap().mac, m(3));
        assert_eq!(t.remove(&m(3)), None);
        assert_eq!(t.len(), 7);
        check(&t);
        t.account(m(42), cip(42), SIP, 0, 1, 2);
        assert_eq!(t.evictions(), 0);
        assert_eq!(t.len(), 8);
        check(&t);
    }

    #[test]
    fn large_capacity_bound() {
        let cap = 65_536;
        let mut t = ClientTable::new(cap, 0);
        for i in 0..100_000u32 {
            t.account(m(i), cip(i), SIP, (i % 4) as u16, 60, u64::from(i / 10_000));
        }
        assert_eq!(t.len(), cap);
        assert_eq!(t.evictions(), 100_000 - cap as u64);
        // The newest `cap` survive, in reverse insertion order.
        let first = 100_000 - cap as u32;
        assert!(t.get(&m(first - 1)).is_none());
        assert!(t.get(&m(first)).is_some());
        assert_eq!(t.iter().next().unwrap().mac, m(99_999));
        assert_eq!(t.iter().last().unwrap().mac, m(first));
        assert_eq!(t.slots.capacity(), cap);
        check(&t);
        t.roll_over(10);
        assert!(t.iter().all(|e| e.rate == 60 && e.bytes_this_second == 0));
    }

    #[derive(Debug, Clone)]
    enum Op {
        Account(u8, u32, u64),
        Remove(u8),
        Roll(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (any::<u8>(), any::<u32>(), 0u64..3).prop_map(|(k, l, d)| Op::Account(k, l, d)),
            1 => any::<u8>().prop_map(Op::Remove),
            1 => (0u64..4).prop_map(Op::Roll),
        ]
    }

    proptest! {
        /// Random byte vectors through `parse` and into the table: no panic, bounded size.
        #[test]
        fn parse_then_account_never_panics(
            frames in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..128), 0..64),
            cap in 1usize..16,
        ) {
            let mut t = ClientTable::new(cap, 2);
            for (i, f) in frames.iter().enumerate() {
                let tick = i as u64 / 8;
                match parse(f) {
                    Some(Frame::Ipv4 { src_mac, src_ip, dst_ip, .. }) => {
                        t.account(src_mac, src_ip, dst_ip, (i % 3) as u16, f.len() as u32, tick)
                    }
                    Some(Frame::Arp { sha, spa, tpa, .. }) => {
                        t.account(sha, spa, tpa, 0, f.len() as u32, tick)
                    }
                    Some(Frame::Ipv6 { src_mac, src_ip, dst_ip, .. }) => {
                        t.account_v6(src_mac, src_ip, dst_ip, 1, f.len() as u32, tick)
                    }
                    Some(Frame::Nd { .. }) | None => {}
                }
                if i % 8 == 7 {
                    t.roll_over(tick + 1);
                }
                prop_assert!(t.len() <= t.capacity());
            }
            check(&t);
        }

        /// Random well-formed frames (so the table actually fills) through parse + account.
        #[test]
        fn wellformed_frames_fill_table(
            keys in proptest::collection::vec((any::<u8>(), 14usize..1514), 0..200),
            cap in 1usize..32,
        ) {
            use crate::capture::frame::tests::{ipv4_frame, SERVER_MAC, SERVER_IP};
            let mut t = ClientTable::new(cap, 0);
            for (k, len) in &keys {
                let f = ipv4_frame(m(u32::from(*k)), SERVER_MAC, cip(u32::from(*k)), SERVER_IP, false, *len);
                if let Some(Frame::Ipv4 { src_mac, src_ip, dst_ip, .. }) = parse(&f[..f.len().min(96)]) {
                    t.account(src_mac, src_ip, dst_ip, 0, *len as u32, 0);
                }
                prop_assert!(t.len() <= t.capacity());
            }
            check(&t);
        }

        /// The table matches a naive model (a Vec in LRU order) under random operations.
        #[test]
        fn matches_naive_model(ops in proptest::collection::vec(op(), 0..300), cap in 1usize..12) {
            let mut t = ClientTable::new(cap, 3);
            let mut model: Vec<ClientEntry> = Vec::new(); // most recent first
            let mut evictions = 0u64;
            let mut now = 0u64;
            let mut last_roll: Option<u64> = None;
            for op in ops {
                match op {
                    Op::Account(k, len, dt) => {
                        now += dt;
                        // Few distinct keys, so hits, evictions and probe collisions all happen.
                        let mac = m(u32::from(k % 24));
                        t.account(mac, cip(u32::from(k)), SIP, u16::from(k), len, now);
                        if let Some(i) = model.iter().position(|e| e.mac == mac) {
                            let mut e = model.remove(i);
                            e.ip = cip(u32::from(k));
                            e.port = u16::from(k);
                            e.bytes_this_second = e.bytes_this_second.saturating_add(u64::from(len));
                            e.last_seen = now;
                            model.insert(0, e);
                        } else {
                            if model.len() == cap {
                                model.pop();
                                evictions += 1;
                            }
                            model.insert(0, ClientEntry {
                                mac, ip: cip(u32::from(k)), server_ip: SIP, ip6: None, server_ip6: None,
                                port: u16::from(k),
                                bytes_this_second: u64::from(len), rate: 0, last_seen: now,
                            });
                        }
                    }
                    Op::Remove(k) => {
                        let mac = m(u32::from(k % 24));
                        let want = model.iter().position(|e| e.mac == mac).map(|i| model.remove(i));
                        prop_assert_eq!(t.remove(&mac), want);
                    }
                    Op::Roll(dt) => {
                        now += dt;
                        t.roll_over(now);
                        model.retain(|e| now - e.last_seen < 3);
                        let elapsed = last_roll.map_or(1, |p: u64| (now - p).max(1));
                        last_roll = Some(now);
                        for e in &mut model {
                            e.rate = e.bytes_this_second / elapsed;
                            e.bytes_this_second = 0;
                        }
                    }
                }
                let got: Vec<ClientEntry> = t.iter().copied().collect();
                prop_assert_eq!(&got, &model);
                prop_assert_eq!(t.evictions(), evictions);
            }
            check(&t);
        }
    }
}
