use std::cell::RefCell;
use std::net::{IpAddr, Ipv4Addr};

use super::super::map::{encode_key, EntryKey};
use super::*;
use crate::client::ClientKey;
use crate::Mac;

/// Slots in plain memory, written the way the program writes them.
struct Mem(RefCell<Vec<u64>>);

impl SlotMemory for Mem {
    fn load(&self, at: usize) -> u64 {
        self.0.borrow().get(at / 8).copied().unwrap_or(0)
    }
    fn store(&self, at: usize, v: u64) {
        if let Some(w) = self.0.borrow_mut().get_mut(at / 8) {
            *w = v;
        }
    }
}

const SLOTS: u32 = 16;

impl Mem {
    fn new() -> Mem {
        Mem(RefCell::new(vec![0; map_bytes(SLOTS) / 8]))
    }

    fn word(&self, slot: usize, off: usize) -> u64 {
        self.load(slot * SLOT_SIZE + off)
    }

    /// What the program does when it claims `slot` for `key` (source `src`).
    fn claim(&self, slot: usize, key: &EntryKey, src: Ipv4Addr) {
        let k = encode_key(key);
        let w = |i: usize| u64::from_ne_bytes(k[i * 8..i * 8 + 8].try_into().unwrap());
        let base = slot * SLOT_SIZE;
        self.store(base + 8, w(1));
        self.store(base + 16, w(2));
        let s = src.to_ipv6_mapped().octets();
        self.store(
            base + SLOT_SRC,
            u64::from_ne_bytes(s[..8].try_into().unwrap()),
        );
        self.store(
            base + SLOT_SRC + 8,
            u64::from_ne_bytes(s[8..].try_into().unwrap()),
        );
        self.store(base, w(0));
    }

    fn count(&self, slot: usize, frames: u64, bytes: u64) {
        let base = slot * SLOT_SIZE;
        self.store(base + SLOT_FRAMES, self.load(base + SLOT_FRAMES) + frames);
        self.store(base + SLOT_BYTES, self.load(base + SLOT_BYTES) + bytes);
    }
}

fn key(last: u8, dst: u8) -> EntryKey {
    EntryKey {
        client: ClientKey::new(Mac::new(2, 0, 0, 0, 0, last), 0),
        dst: IpAddr::V4(Ipv4Addr::new(10, 0, 0, dst)),
    }
}

fn read(r: &mut SlotReader, m: &Mem) -> (Vec<(EntryKey, u64, u64)>, Reading) {
    let mut out = Vec::new();
    let reading = r.read(m, &mut out);
    let mut v: Vec<_> = out.iter().map(|d| (d.key, d.frames, d.bytes)).collect();
    v.sort_by_key(|x| (x.0.client, x.0.dst));
    (v, reading)
}

#[test]
fn sizes_are_powers_of_two_within_bounds() {
    assert_eq!(slot_count(0), MIN_SLOTS);
    assert_eq!(slot_count(16_384), 32_768);
    assert_eq!(slot_count(20_000), 65_536);
    assert_eq!(slot_count(131_072), MAX_SLOTS);
    assert_eq!(slot_count(u32::MAX), MAX_SLOTS);
    assert_eq!(map_bytes(16), 17 * 64);
}

#[test]
fn deltas_per_reading_with_key_and_source() {
    let m = Mem::new();
    let mut r = SlotReader::new(SLOTS);
    m.claim(3, &key(1, 1), Ipv4Addr::new(10, 0, 0, 101));
    m.count(3, 10, 15_000);
    m.claim(9, &key(2, 1), Ipv4Addr::UNSPECIFIED);
    m.count(9, 1, 64);
    let mut out = Vec::new();
    let reading = r.read(&m, &mut out);
    assert_eq!(reading.taken, 2);
    assert_eq!(out.len(), 2);
    let d = out.iter().find(|d| d.key == key(1, 1)).unwrap();
    assert_eq!((d.frames, d.bytes), (10, 15_000));
    assert_eq!(d.src, Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 101))));
    let d = out.iter().find(|d| d.key == key(2, 1)).unwrap();
    assert_eq!(d.src, None, "an unknown source stays unknown");
    // Only what was counted since.
    m.count(3, 5, 7_500);
    let (v, _) = read(&mut r, &m);
    assert_eq!(v, vec![(key(1, 1), 5, 7_500)]);
}

#[test]
fn counters_that_wrap_still_give_the_difference() {
    let m = Mem::new();
    let mut r = SlotReader::new(SLOTS);
    m.claim(0, &key(1, 1), Ipv4Addr::UNSPECIFIED);
    m.store(SLOT_FRAMES, u64::MAX - 1);
    m.store(SLOT_BYTES, u64::MAX - 100);
    read(&mut r, &m);
    m.store(SLOT_FRAMES, 2);
    m.store(SLOT_BYTES, 50);
    let (v, _) = read(&mut r, &m);
    assert_eq!(v, vec![(key(1, 1), 4, 151)]);
}

#[test]
fn idle_slots_are_freed_and_the_next_key_counts_from_there() {
    let m = Mem::new();
    let mut r = SlotReader::new(SLOTS);
    m.claim(5, &key(1, 1), Ipv4Addr::UNSPECIFIED);
    m.count(5, 100, 100_000);
    read(&mut r, &m);
    let mut freed = 0;
    for _ in 0..IDLE_READINGS {
        freed += read(&mut r, &m).1.freed;
    }
    assert_eq!(freed, 1);
    assert_eq!(m.word(5, 0), 0, "the key's first word is cleared");
    // A frame of the old key counted just after it was freed, then a new key claims the slot:
    // all of it goes to the new key, nothing is counted twice.
    m.count(5, 1, 64);
    m.claim(5, &key(7, 2), Ipv4Addr::UNSPECIFIED);
    m.count(5, 3, 300);
    let (v, reading) = read(&mut r, &m);
    assert_eq!(v, vec![(key(7, 2), 4, 364)]);
    assert_eq!(reading.taken, 1);
}

#[test]
fn a_busy_table_frees_idle_slots_sooner() {
    let m = Mem::new();
    let mut r = SlotReader::new(SLOTS);
    for s in 0..13 {
        m.claim(s, &key(s as u8 + 1, 1), Ipv4Addr::UNSPECIFIED);
        m.count(s, 1, 64);
    }
    assert_eq!(read(&mut r, &m).1.taken, 13);
    // Slot 0 keeps counting; the others went quiet.
    let mut freed = 0;
    for _ in 0..IDLE_READINGS_FULL {
        m.count(0, 1, 64);
        freed += read(&mut r, &m).1.freed;
    }
    assert_eq!(freed, 12);
    assert_eq!(read(&mut r, &m).1.taken, 1);
}

#[test]
fn overflow_is_reported_not_given_to_anyone() {
    let m = Mem::new();
    let mut r = SlotReader::new(SLOTS);
    m.count(SLOTS as usize, 7, 700);
    let (v, reading) = read(&mut r, &m);
    assert!(v.is_empty());
    assert_eq!(reading.overflow_frames, 7);
    assert_eq!(read(&mut r, &m).1.overflow_frames, 0);
}

#[test]
fn a_slot_freed_under_the_reader_is_let_go() {
    let m = Mem::new();
    let mut r = SlotReader::new(SLOTS);
    m.claim(2, &key(1, 1), Ipv4Addr::UNSPECIFIED);
    m.count(2, 1, 64);
    assert_eq!(read(&mut r, &m).1.taken, 1);
    m.store(2 * SLOT_SIZE, 0);
    assert_eq!(read(&mut r, &m).1.taken, 0);
}
