//! Guests behind the bond (issue 38, the kernel side): each guest (a VM's or container's MAC,
//! with its VLAN) on the host bridge is pinned to one slave. Two maps and two programs:
//! - the pins ([`GuestMaps`]): a hash from the guest (MAC, VLAN; 0 untagged) to the slave's
//!   ifindex and the guest's counter slot;
//! - the counters: a per-CPU array of one [`RECORD`] per slot (transmitted, received on each
//!   port, reflections and floods dropped, frames seen from the switch);
//! - at the bond's tc egress ([`program::guest_egress_program`]): a pinned guest's frame is
//!   counted and redirected, unchanged, out of its slave (the bonding driver, which would copy
//!   a slave's MAC over its source, never sees it);
//! - at each slave's tc ingress, after the counting program
//!   ([`program::guest_ingress_program`]): reflections of a guest's own frames and floods of
//!   frames for a guest pinned elsewhere are dropped, a guest's frames from the switch on its
//!   own port (it moved away) and its received frames are counted.
//!
//! Counters are per-CPU: a guest's flows are spread over several CPUs' queues, and one shared
//! record written with atomic adds would bounce its cache line between them on every frame;
//! per-CPU the hot path is a plain load and store, and the reader sums the CPUs once a second.
//! Readings are totals since the guest was pinned (a slot is zeroed when a guest takes it; a
//! guest pinned again to another slave keeps its slot and totals); the caller diffs them
//! ([`GuestCounters::since`]).

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::Mutex;

use super::sys;
use crate::capture::Mac;

pub mod program;

pub use program::{guest_egress_program, guest_ingress_program};

/// Ports (slaves) a guest's receive counters tell apart: a port's slot is `0..MAX_PORTS`.
pub const MAX_PORTS: usize = 16;
/// The pin's key: MAC (6 bytes), VLAN (u16, host order).
pub const KEY_SIZE: usize = 8;
/// The pin: the slave's ifindex (u32), the guest's counter slot (u32).
pub const PIN_SIZE: usize = 8;
// One slot's counters (u64 each, per CPU).
pub const TX_PACKETS: i16 = 0;
pub const TX_BYTES: i16 = 8;
pub const REFLECTIONS: i16 = 16;
pub const FLOODS: i16 = 24;
pub const SEEN: i16 = 32;
/// Received packets on port slot `p` at `RX + 16 p`, their bytes 8 further.
pub const RX: i16 = 40;
/// Bytes of one slot's record (one CPU's).
pub const RECORD: usize = RX as usize + 16 * MAX_PORTS;
const BPF_MAP_TYPE_HASH: u32 = 1;

/// A guest: its MAC and VLAN (0: untagged).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GuestKey {
    pub mac: Mac,
    pub vlan: u16,
}

impl GuestKey {
    pub fn new(mac: Mac, vlan: u16) -> GuestKey {
        GuestKey { mac, vlan }
    }

    /// The map's key.
    pub fn encode(&self) -> [u8; KEY_SIZE] {
        let mut k = [0u8; KEY_SIZE];
        k[..6].copy_from_slice(&self.mac.octets());
        k[6..].copy_from_slice(&self.vlan.to_ne_bytes());
        k
    }
}

/// A guest's counters summed over the CPUs (totals since it was pinned).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GuestCounters {
    /// Sent through the bond's egress and redirected: packets (GRO/TSO merges counted as their
    /// segments) and bytes (`skb->len`, headers once).
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// Its own frames coming back from the switch on a port it is not pinned to: dropped.
    pub reflections: u64,
    /// Frames for it arriving on a port it is not pinned to: dropped.
    pub floods: u64,
    /// Its own frames coming from the switch on the port it is pinned to: it moved away.
    pub seen_from_switch: u64,
    /// Received on each port slot (packets, bytes on the wire as the counting program counts
    /// them).
    pub rx: [(u64, u64); MAX_PORTS],
}

impl GuestCounters {
    /// Sums one slot's per-CPU records (`values`: one [`RECORD`] per CPU; a short trailing
    /// record is ignored). Sums saturate.
    pub fn sum(values: &[u8]) -> GuestCounters {
        let mut c = GuestCounters::default();
        for v in values.chunks_exact(RECORD) {
            let u = |at: i16| {
                let at = at as usize;
                u64::from_ne_bytes(v[at..at + 8].try_into().unwrap_or([0; 8]))
            };
            c.tx_packets = c.tx_packets.saturating_add(u(TX_PACKETS));
            c.tx_bytes = c.tx_bytes.saturating_add(u(TX_BYTES));
            c.reflections = c.reflections.saturating_add(u(REFLECTIONS));
            c.floods = c.floods.saturating_add(u(FLOODS));
            c.seen_from_switch = c.seen_from_switch.saturating_add(u(SEEN));
            for (p, rx) in c.rx.iter_mut().enumerate() {
                let at = RX + 16 * p as i16;
                rx.0 = rx.0.saturating_add(u(at));
                rx.1 = rx.1.saturating_add(u(at + 8));
            }
        }
        c
    }

    /// What was counted since `earlier` (an earlier reading of the same guest). A counter lower
    /// than before (the guest was unpinned and pinned again) counts from zero.
    pub fn since(&self, earlier: &GuestCounters) -> GuestCounters {
        let d = |now: u64, then: u64| if now >= then { now - then } else { now };
        let mut rx = [(0, 0); MAX_PORTS];
        for (p, r) in rx.iter_mut().enumerate() {
            *r = (
                d(self.rx[p].0, earlier.rx[p].0),
                d(self.rx[p].1, earlier.rx[p].1),
            );
        }
        GuestCounters {
            tx_packets: d(self.tx_packets, earlier.tx_packets),
            tx_bytes: d(self.tx_bytes, earlier.tx_bytes),
            reflections: d(self.reflections, earlier.reflections),
            floods: d(self.floods, earlier.floods),
            seen_from_switch: d(self.seen_from_switch, earlier.seen_from_switch),
            rx,
        }
    }
}

/// One pinned guest as read back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuestReading {
    pub guest: GuestKey,
    /// The slave it is pinned to.
    pub ifindex: u32,
    pub counters: GuestCounters,
}

/// The maps' descriptors, for the program builders.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuestFds {
    pub pins: i32,
    pub counters: i32,
    /// The filter: an array of one [`FILTER_BYTES`] value, the programs' first test.
    pub filter: i32,
}

/// The filter's bytes: one per value of a MAC's last two octets (read in place as a u16 in
/// the machine's order, [`filter_index`]), non-zero while a pinned guest's MAC ends in them.
/// A frame whose MAC finds 0 there is no guest's, and the programs let it go before any
/// lookup: the host's own frames (every ACK it sends) cost a handful of instructions.
pub const FILTER_BYTES: usize = 1 << 16;

/// A MAC's byte in the filter.
pub fn filter_index(mac: Mac) -> usize {
    let o = mac.octets();
    usize::from(u16::from_ne_bytes([o[4], o[5]]))
}

/// The pins and counters maps, and which guest has which counter slot.
#[derive(Debug)]
pub struct GuestMaps {
    pins: OwnedFd,
    counters: OwnedFd,
    filter: OwnedFd,
    filter_mem: sys::Mapped,
    cpus: usize,
    book: Mutex<SlotBook>,
}

/// Counter slots: taken by a pinned guest, or free.
#[derive(Debug)]
struct SlotBook {
    taken: HashMap<GuestKey, (u32, u32)>,
    free: Vec<u32>,
    /// Pinned guests per filter byte.
    sharing: HashMap<usize, u32>,
}

impl SlotBook {
    fn new(n: u32) -> SlotBook {
        SlotBook {
            taken: HashMap::new(),
            free: (0..n).rev().collect(),
            sharing: HashMap::new(),
        }
    }
}

/// Sets filter byte `at` to `v` (the programs only read it: no other writer).
fn set_filter(mem: &sys::Mapped, at: usize, v: u8) {
    let word = at & !7;
    let mut b = mem.load(word).to_ne_bytes();
    b[at & 7] = v;
    mem.store(word, u64::from_ne_bytes(b));
}

impl GuestMaps {
    /// Creates the maps for up to `max_guests` pinned guests (1 to 65,536).
    pub fn new(max_guests: u32) -> io::Result<GuestMaps> {
        if !(1..=1 << 16).contains(&max_guests) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{max_guests} guests: 1 to 65536 expected"),
            ));
        }
        let ctx = |what: &'static str| {
            move |e: io::Error| io::Error::new(e.kind(), format!("the guests' {what} map: {e}"))
        };
        let pins = sys::map_create(
            BPF_MAP_TYPE_HASH,
            KEY_SIZE as u32,
            PIN_SIZE as u32,
            max_guests,
            0,
            "rlbdg_pins",
        )
        .map_err(ctx("pins"))?;
        let counters = sys::map_create(
            sys::BPF_MAP_TYPE_PERCPU_ARRAY,
            4,
            RECORD as u32,
            max_guests,
            0,
            "rlbdg_counters",
        )
        .map_err(ctx("counters"))?;
        let filter = sys::map_create(
            sys::BPF_MAP_TYPE_ARRAY,
            4,
            FILTER_BYTES as u32,
            1,
            sys::BPF_F_MMAPABLE,
            "rlbdg_filter",
        )
        .map_err(ctx("filter"))?;
        let filter_mem = sys::Mapped::new(filter.as_fd(), FILTER_BYTES).map_err(ctx("filter"))?;
        Ok(GuestMaps {
            pins,
            counters,
            filter,
            filter_mem,
            cpus: super::cpus()?,
            book: Mutex::new(SlotBook::new(max_guests)),
        })
    }

    pub fn fds(&self) -> GuestFds {
        GuestFds {
            pins: self.pins.as_raw_fd(),
            counters: self.counters.as_raw_fd(),
            filter: self.filter.as_raw_fd(),
        }
    }

    pub fn pins_fd(&self) -> BorrowedFd<'_> {
        self.pins.as_fd()
    }

    /// Pins `mac` on `vlan` to the slave `ifindex` (again, if pinned elsewhere: its counters
    /// go on). A guest new to the maps takes a free counter slot, zeroed first.
    pub fn pin(&self, mac: Mac, vlan: u16, ifindex: u32) -> io::Result<()> {
        let g = GuestKey::new(mac, vlan);
        // The programs' VLAN is 12 bits; ifindex 0 names no device (a redirect there drops).
        if vlan > 0x0fff || ifindex == 0 || i32::try_from(ifindex).is_err() {
            let what = format!("ifindex {ifindex}: a VLAN up to 4095 and a device expected");
            let e = io::Error::new(io::ErrorKind::InvalidInput, what);
            return Err(guest_err(&g, "pinning it", e));
        }
        let mut book = self.book.lock().unwrap_or_else(|p| p.into_inner());
        let slot = match book.taken.get(&g) {
            Some(&(slot, _)) => slot,
            None => {
                let slot = book.free.pop().ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::OutOfMemory,
                        format!("guest {mac} VLAN {vlan}: every guest slot is taken"),
                    )
                })?;
                // No pin names the slot yet: nothing writes it while it is zeroed.
                let zero = vec![0u8; RECORD * self.cpus];
                if let Err(e) = sys::update(self.counters.as_fd(), &slot.to_ne_bytes(), &zero) {
                    book.free.push(slot);
                    return Err(guest_err(&g, "zeroing its counters", e));
                }
                slot
            }
        };
        let new = !book.taken.contains_key(&g);
        // The filter lets the guest's frames through before its pin exists, and after it
        // is gone: a frame between finds no pin, as before.
        if new {
            self.share(&mut book, mac, 1);
        }
        let mut pin = [0u8; PIN_SIZE];
        pin[..4].copy_from_slice(&ifindex.to_ne_bytes());
        pin[4..].copy_from_slice(&slot.to_ne_bytes());
        match sys::update(self.pins.as_fd(), &g.encode(), &pin) {
            Ok(()) => {
                book.taken.insert(g, (slot, ifindex));
                Ok(())
            }
            Err(e) => {
                if new {
                    book.free.push(slot);
                    self.share(&mut book, mac, -1);
                }
                Err(guest_err(
                    &g,
                    &format!("pinning it to ifindex {ifindex}"),
                    e,
                ))
            }
        }
    }

    /// Unpins `mac` on `vlan`: the programs leave its frames alone again. False when it was
    /// not pinned.
    pub fn unpin(&self, mac: Mac, vlan: u16) -> io::Result<bool> {
        let g = GuestKey::new(mac, vlan);
        let mut book = self.book.lock().unwrap_or_else(|p| p.into_inner());
        let Some(&(slot, _)) = book.taken.get(&g) else {
            return Ok(false);
        };
        sys::delete(self.pins.as_fd(), &g.encode()).map_err(|e| guest_err(&g, "unpinning", e))?;
        book.taken.remove(&g);
        book.free.push(slot);
        self.share(&mut book, mac, -1);
        Ok(true)
    }

    /// One more (`by` 1) or one fewer (-1) pinned guest with `mac`'s filter byte: the byte
    /// set while any is.
    fn share(&self, book: &mut SlotBook, mac: Mac, by: i32) {
        let at = filter_index(mac);
        let n = book.sharing.entry(at).or_insert(0);
        *n = n.saturating_add_signed(by);
        let set = *n > 0;
        if !set {
            book.sharing.remove(&at);
        }
        set_filter(&self.filter_mem, at, u8::from(set));
    }

    /// Whether the filter lets `mac`'s frames on to the lookup (as the programs read it).
    pub fn filter_passes(&self, mac: Mac) -> bool {
        let at = filter_index(mac);
        self.filter_mem.load(at & !7).to_ne_bytes()[at & 7] != 0
    }

    /// The pinned guests, each with its slave and its counters' totals.
    pub fn read(&self) -> io::Result<Vec<GuestReading>> {
        let book = self.book.lock().unwrap_or_else(|p| p.into_inner());
        let mut values = vec![0u8; RECORD * self.cpus];
        let mut out = Vec::with_capacity(book.taken.len());
        for (g, &(slot, ifindex)) in &book.taken {
            if !sys::lookup(self.counters.as_fd(), &slot.to_ne_bytes(), &mut values)
                .map_err(|e| guest_err(g, "reading its counters", e))?
            {
                continue;
            }
            out.push(GuestReading {
                guest: *g,
                ifindex,
                counters: GuestCounters::sum(&values),
            });
        }
        out.sort_by_key(|r| r.guest);
        Ok(out)
    }

    /// One guest's counters' totals (None: not pinned).
    pub fn counters(&self, mac: Mac, vlan: u16) -> io::Result<Option<GuestCounters>> {
        let g = GuestKey::new(mac, vlan);
        let slot = {
            let book = self.book.lock().unwrap_or_else(|p| p.into_inner());
            match book.taken.get(&g) {
                Some(&(slot, _)) => slot,
                None => return Ok(None),
            }
        };
        let mut values = vec![0u8; RECORD * self.cpus];
        sys::lookup(self.counters.as_fd(), &slot.to_ne_bytes(), &mut values)
            .map_err(|e| guest_err(&g, "reading its counters", e))?;
        Ok(Some(GuestCounters::sum(&values)))
    }

    /// The slave `mac` on `vlan` is pinned to, as the kernel's map holds it.
    pub fn pinned_to(&self, mac: Mac, vlan: u16) -> io::Result<Option<u32>> {
        let g = GuestKey::new(mac, vlan);
        let mut pin = [0u8; PIN_SIZE];
        let found = sys::lookup(self.pins.as_fd(), &g.encode(), &mut pin)
            .map_err(|e| guest_err(&g, "reading its pin", e))?;
        Ok(found.then(|| u32::from_ne_bytes([pin[0], pin[1], pin[2], pin[3]])))
    }

    /// Loads the bond's egress program (named `rlbdg_<bond>`).
    pub fn load_egress(&self, bond: &str) -> io::Result<OwnedFd> {
        let insns = guest_egress_program(self.fds())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        sys::prog_load(sys::BPF_PROG_TYPE_SCHED_CLS, &insns, &prog_name(bond))
            .map_err(|e| io::Error::new(e.kind(), format!("bond {bond}: guest egress: {e}")))
    }

    /// Loads the ingress program of slave `port` (`ifindex`, port slot `port_slot`; named
    /// `rlbdg_<port>`).
    pub fn load_ingress(&self, port: &str, ifindex: u32, port_slot: usize) -> io::Result<OwnedFd> {
        let insns = guest_ingress_program(self.fds(), ifindex, port_slot)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        sys::prog_load(sys::BPF_PROG_TYPE_SCHED_CLS, &insns, &prog_name(port))
            .map_err(|e| io::Error::new(e.kind(), format!("port {port}: guest ingress: {e}")))
    }
}

/// `rlbdg_<dev>`: how rlbd's guest filters are told from an operator's
/// ([`super::tc::hook::GUEST_PREFIX`]).
pub fn prog_name(dev: &str) -> String {
    format!("{}{dev}", super::tc::hook::GUEST_PREFIX)
}

fn guest_err(g: &GuestKey, what: &str, e: io::Error) -> io::Error {
    io::Error::new(
        e.kind(),
        format!("guest {} VLAN {}: {what}: {e}", g.mac, g.vlan),
    )
}

#[cfg(test)]
mod live_tests;
#[cfg(test)]
mod tests;
