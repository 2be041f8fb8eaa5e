//! Exact counting in the kernel: an eBPF socket filter on a port's capture socket counts every
//! IPv4/IPv6 data frame under (source MAC, VLAN, destination address) and drops it before it
//! is copied; ARP and Neighbor Discovery still reach the ring. The daemon reads the counts once
//! a second and feeds the per-second deltas to its client table. The counts live in a slot
//! table the daemon maps into its memory (`slots.rs`, Linux >= 5.5) or, where the kernel cannot
//! map a map, in a per-CPU LRU hash read with batch lookups (`map.rs`).
//!
//! No compiler is involved: the program is assembled here (`insn.rs`, `program.rs`) and loaded
//! with bpf(2) (`sys.rs`). Needs CAP_BPF (Linux >= 5.8; CAP_SYS_ADMIN before), and on kernels
//! before 5.11 enough RLIMIT_MEMLOCK for the map. Whoever cannot get it counts with the classic
//! filter and the ring instead (the caller decides).

mod hash;
pub mod insn;
pub mod map;
pub mod program;
pub mod slots;
mod sys;

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use hash::HashReader;
pub use map::{Delta, EntryKey};
use map::{KEY_SIZE, VALUE_SIZE};
use program::Store;
use slots::{SlotReader, SLOT_SIZE};

use crate::capture::Mac;

/// The map's size for a client table of `capacity`: an entry the kernel evicts before it is
/// read loses its count, so the map holds far more (client, destination) pairs than the table
/// holds clients, within a bound (each entry costs 32 bytes per possible CPU, allocated up
/// front).
pub fn map_entries(capacity: usize) -> u32 {
    let want = capacity.saturating_mul(2).clamp(MIN_ENTRIES, MAX_ENTRIES);
    u32::try_from(want).unwrap_or(MAX_ENTRIES as u32)
}

/// Bounds of [`map_entries`].
pub const MIN_ENTRIES: usize = 16_384;
pub const MAX_ENTRIES: usize = 131_072;

/// A port's counting map and the program that fills it.
#[derive(Debug)]
pub struct KernelCounter {
    map: OwnedFd,
    prog: OwnedFd,
    max_entries: u32,
    store: Store,
    reader: Reader,
    /// Why the slot table could not be used, when the hash is the fallback.
    slot_error: Option<String>,
}

/// How the counts are read: the mapped slot table, or the hash with bpf(2).
#[derive(Debug)]
enum Reader {
    Slots(sys::Mapped, SlotReader),
    Hash(HashReader),
}

impl slots::SlotMemory for sys::Mapped {
    fn load(&self, at: usize) -> u64 {
        sys::Mapped::load(self, at)
    }
    fn store(&self, at: usize, v: u64) {
        sys::Mapped::store(self, at, v)
    }
}

/// Odd multipliers for the slot hash, secret to this process.
fn multipliers() -> [i32; 3] {
    use std::hash::BuildHasher;
    let r = std::collections::hash_map::RandomState::new();
    [1u64, 2, 3].map(|i| ((r.hash_one(i) as u32) >> 1) as i32 | 1)
}

/// The slot table for `entries` pairs and its program, if this kernel maps arrays.
fn slot_table(
    host_macs: &[Mac],
    snap_len: u32,
    entries: u32,
    name: &str,
) -> io::Result<(OwnedFd, OwnedFd, Store, sys::Mapped, u32)> {
    let n = slots::slot_count(entries);
    let map = sys::map_create(
        sys::BPF_MAP_TYPE_ARRAY,
        4,
        SLOT_SIZE as u32,
        n + 1,
        sys::BPF_F_MMAPABLE,
        &format!("rlbd_{name}"),
    )?;
    let mem = sys::Mapped::new(map.as_fd(), slots::map_bytes(n))?;
    let store = Store::Slots {
        slots: n,
        mul: multipliers(),
    };
    let prog = load(&map, host_macs, snap_len, name, store)?;
    Ok((map, prog, store, mem, n))
}

fn cpus() -> io::Result<usize> {
    let path = "/sys/devices/system/cpu/possible";
    let text = std::fs::read_to_string(path)
        .map_err(|e| io::Error::new(e.kind(), format!("{path}: {e}")))?;
    map::possible_cpus(&text).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{path}: cannot read {:?}", text.trim()),
        )
    })
}

impl KernelCounter {
    /// Creates the map (`max_entries` clients x destinations) and loads the program for a port
    /// whose other host MACs are `host_macs`, passing ARP and ND truncated to `snap_len`.
    /// `name` (the port's) names both in `bpftool` listings.
    pub fn new(host_macs: &[Mac], snap_len: u32, max_entries: u32, name: &str) -> io::Result<Self> {
        // The slot table where the kernel has it (and takes its program); else the hash.
        let e = match slot_table(host_macs, snap_len, max_entries, name) {
            Ok((map, prog, store, mem, n)) => {
                return Ok(KernelCounter {
                    map,
                    prog,
                    max_entries: n,
                    store,
                    reader: Reader::Slots(mem, SlotReader::new(n)),
                    slot_error: None,
                })
            }
            Err(e) => e,
        };
        let mut c = Self::with_hash(host_macs, snap_len, max_entries, name)?;
        c.slot_error = Some(e.to_string());
        Ok(c)
    }

    /// Counts in the per-CPU LRU hash even where the slot table would work.
    pub fn with_hash(
        host_macs: &[Mac],
        snap_len: u32,
        max_entries: u32,
        name: &str,
    ) -> io::Result<Self> {
        let cpus = cpus()?;
        let map = sys::map_create(
            sys::BPF_MAP_TYPE_LRU_PERCPU_HASH,
            KEY_SIZE as u32,
            VALUE_SIZE as u32,
            max_entries.max(1),
            0,
            &format!("rlbd_{name}"),
        )
        .map_err(|e| io::Error::new(e.kind(), format!("creating the counting map: {e}")))?;
        let prog = load(&map, host_macs, snap_len, name, Store::Hash)?;
        Ok(KernelCounter {
            map,
            prog,
            max_entries: max_entries.max(1),
            store: Store::Hash,
            reader: Reader::Hash(HashReader::new(max_entries.max(1), cpus)),
            slot_error: None,
        })
    }

    /// The program, to attach to a socket.
    pub fn program(&self) -> BorrowedFd<'_> {
        self.prog.as_fd()
    }

    /// Loads the program again for a new set of host MACs (same map, counts kept). The caller
    /// attaches the new one.
    pub fn reprogram(&mut self, host_macs: &[Mac], snap_len: u32, name: &str) -> io::Result<()> {
        self.prog = load(&self.map, host_macs, snap_len, name, self.store)?;
        Ok(())
    }

    /// Attaches the program to `sock` in place of its filter.
    pub fn attach(&self, sock: BorrowedFd<'_>) -> io::Result<()> {
        sys::attach_bpf(sock, self.prog.as_fd())
            .map_err(|e| io::Error::new(e.kind(), format!("SO_ATTACH_BPF: {e}")))
    }

    /// The kernel's (run time in ns, runs) of the program, counted while the
    /// `kernel.bpf_stats_enabled` sysctl is 1 (for measurements).
    pub fn run_stats(&self) -> io::Result<(u64, u64)> {
        sys::prog_run_stats(self.prog.as_fd())
    }

    /// Where the counts live: "slots" (the mapped slot table) or "hash" (the LRU hash).
    pub fn store_name(&self) -> &'static str {
        match self.store {
            Store::Slots { .. } => "slots",
            Store::Hash => "hash",
        }
    }

    /// Why the slot table is not used, when the kernel refused it.
    pub fn slot_error(&self) -> Option<&str> {
        self.slot_error.as_deref()
    }

    /// Largest number of entries the map holds.
    pub fn max_entries(&self) -> u32 {
        self.max_entries
    }

    /// Reads the map: every entry that counted frames since the last reading, with those
    /// counts, into `out` (cleared first), and the frames no entry got (a full slot table). A
    /// reading that fails halfway still reports what it read, in `out` (the next one counts
    /// the rest).
    pub fn read(&mut self, out: &mut Vec<Delta>) -> io::Result<u64> {
        out.clear();
        match &mut self.reader {
            Reader::Slots(mem, slots) => Ok(slots.read(mem, out).overflow_frames),
            Reader::Hash(hash) => hash.read(self.map.as_fd(), out).map(|()| 0),
        }
    }
}

fn load(
    map: &OwnedFd,
    host_macs: &[Mac],
    snap_len: u32,
    name: &str,
    store: Store,
) -> io::Result<OwnedFd> {
    use std::os::fd::AsRawFd;
    let insns = program::counting_program(host_macs, snap_len, map.as_raw_fd(), store)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    sys::prog_load_socket_filter(&insns, &format!("rlbd_{name}"))
        .map_err(|e| io::Error::new(e.kind(), format!("loading the counting program: {e}")))
}
