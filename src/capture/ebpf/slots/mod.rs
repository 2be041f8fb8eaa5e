//! The slot table: the counting map as an mmapable array of fixed slots the program fills by
//! open addressing, which the daemon reads as plain memory (no system call, no hash walk).
//!
//! Why not the per-CPU LRU hash (`map.rs`) where the kernel allows this: reading a hash is a
//! walk of every bucket under its lock, about a microsecond per entry on the lab machine (60 ms
//! a second at 65,536 clients), and a per-CPU value costs its memory once per possible CPU. A
//! slot is 64 bytes whatever the CPU count, and the daemon's reading is a linear scan.
//!
//! Slot layout (64 bytes): the map key (24: source MAC, VLAN, destination; `map.rs`), frames
//! (u64) and bytes (u64) counted with atomic adds, the source address of the frame that claimed
//! the slot (16), 8 unused. A slot whose first key word (MAC and VLAN) is 0 is free: the program
//! drops frames from the all-zero MAC untagged, which no client sends. The program probes
//! up to [`PROBES`] slots from the key's keyed hash; a key found nowhere and no free slot on
//! the way counts in the overflow slot (index `slots`), which the reading reports.
//!
//! The counters are never reset: the daemon keeps each slot's last reading and takes the
//! difference. Only the daemon frees a slot (writes its first key word 0), when it has counted
//! nothing for a while; the next key to claim it continues from the counters as they are.
//! Races, each costing at most a few frames' attribution: two CPUs claiming one free slot at
//! once (the last key written keeps it), and a frame of a slot's old key counted just after the
//! daemon freed it (it goes to the next key to claim the slot).

use super::map::{decode_key, Delta, RawKey, KEY_SIZE};

pub const SLOT_SIZE: usize = 64;
pub const SLOT_FRAMES: usize = 24;
pub const SLOT_BYTES: usize = 32;
pub const SLOT_SRC: usize = 40;
/// Slots the program tries for a key before it counts the frame as overflow.
pub const PROBES: u32 = 8;
/// Bounds of [`slot_count`] (powers of two): 2 MB to 16 MB of map.
pub const MIN_SLOTS: u32 = 32_768;
pub const MAX_SLOTS: u32 = 262_144;
/// Readings a slot may count nothing before it is freed...
const IDLE_READINGS: u32 = 30;
/// ...and when more than 3/4 of the slots are taken (probe runs grow long), after this many.
const IDLE_READINGS_FULL: u32 = 2;

/// Slots for a map of `entries` (client, destination) pairs (`map_entries`: twice the client
/// table): twice as many, a power of two within bounds. Open addressing wants the table at
/// most half full: linear probe runs grow fast past that (with 4 probes and 10,000 sources in
/// 16,384 slots, 9% of the frames found no slot).
pub fn slot_count(entries: u32) -> u32 {
    entries
        .saturating_mul(2)
        .clamp(MIN_SLOTS, MAX_SLOTS)
        .next_power_of_two()
}

/// The map's bytes for `slots` slots and the overflow slot.
pub fn map_bytes(slots: u32) -> usize {
    (slots as usize + 1) * SLOT_SIZE
}

/// Where the slots live: the mapped map, or plain memory in tests.
pub trait SlotMemory {
    /// The 8 bytes at `at` (8-aligned) in native byte order; 0 out of bounds.
    fn load(&self, at: usize) -> u64;
    /// Stores `v` at `at` (8-aligned); out of bounds does nothing.
    fn store(&self, at: usize, v: u64);
}

#[derive(Debug, Clone, Copy, Default)]
struct Prev {
    frames: u64,
    bytes: u64,
    /// Readings in a row that counted nothing.
    idle: u32,
    taken: bool,
}

/// What one reading found besides the deltas.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reading {
    /// Frames counted in the overflow slot since the last reading: no client got them.
    pub overflow_frames: u64,
    /// Slots taken after the reading.
    pub taken: usize,
    /// Slots freed by this reading.
    pub freed: usize,
}

/// The daemon's side of a slot table: each slot's counters at the last reading.
#[derive(Debug)]
pub struct SlotReader {
    slots: usize,
    prev: Vec<Prev>,
    taken: usize,
}

impl SlotReader {
    pub fn new(slots: u32) -> SlotReader {
        SlotReader {
            slots: slots as usize,
            prev: vec![Prev::default(); slots as usize + 1],
            taken: 0,
        }
    }

    /// One reading: what each taken slot counted since the last into `out` (appended), and
    /// slots idle for long freed.
    pub fn read(&mut self, mem: &impl SlotMemory, out: &mut Vec<Delta>) -> Reading {
        let idle_limit = if self.taken > self.slots / 4 * 3 {
            IDLE_READINGS_FULL
        } else {
            IDLE_READINGS
        };
        let mut freed = 0;
        for i in 0..self.slots {
            let base = i * SLOT_SIZE;
            let w0 = mem.load(base);
            let p = &mut self.prev[i];
            if w0 == 0 {
                // Free: its counters stay as last read, the base for the next key to claim it.
                if p.taken {
                    p.taken = false;
                    self.taken -= 1;
                }
                continue;
            }
            if !p.taken {
                p.taken = true;
                p.idle = 0;
                self.taken += 1;
            }
            let frames = mem.load(base + SLOT_FRAMES);
            let bytes = mem.load(base + SLOT_BYTES);
            // The counters only grow (the program adds, nobody resets), so a wrapping
            // difference is exact.
            let df = frames.wrapping_sub(p.frames);
            let db = bytes.wrapping_sub(p.bytes);
            if df == 0 {
                p.idle += 1;
                if p.idle >= idle_limit {
                    mem.store(base, 0);
                    p.taken = false;
                    p.idle = 0;
                    self.taken -= 1;
                    freed += 1;
                }
                continue;
            }
            p.idle = 0;
            p.frames = frames;
            p.bytes = bytes;
            let mut k: RawKey = [0; KEY_SIZE];
            k[..8].copy_from_slice(&w0.to_ne_bytes());
            k[8..16].copy_from_slice(&mem.load(base + 8).to_ne_bytes());
            k[16..].copy_from_slice(&mem.load(base + 16).to_ne_bytes());
            let mut s = [0u8; 16];
            s[..8].copy_from_slice(&mem.load(base + SLOT_SRC).to_ne_bytes());
            s[8..].copy_from_slice(&mem.load(base + SLOT_SRC + 8).to_ne_bytes());
            let src = super::map::addr(&s);
            out.push(Delta {
                key: decode_key(&k),
                frames: df,
                bytes: db,
                src: (!src.is_unspecified()).then_some(src),
            });
        }
        let base = self.slots * SLOT_SIZE;
        let o = &mut self.prev[self.slots];
        let frames = mem.load(base + SLOT_FRAMES);
        let overflow_frames = frames.wrapping_sub(o.frames);
        o.frames = frames;
        Reading {
            overflow_frames,
            taken: self.taken,
            freed,
        }
    }
}

#[cfg(test)]
mod tests;
