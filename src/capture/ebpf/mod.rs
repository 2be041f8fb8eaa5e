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

pub mod insn;
pub mod map;
pub mod program;
pub mod slots;
mod sys;

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

pub use map::{Delta, EntryKey};
use map::{Deltas, RawKey, KEY_SIZE, VALUE_SIZE};
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

/// Entries read per batch lookup (grown when a hash bucket holds more).
const BATCH: usize = 256;

/// A port's counting map and the program that fills it.
#[derive(Debug)]
pub struct KernelCounter {
    map: OwnedFd,
    prog: OwnedFd,
    max_entries: u32,
    store: Store,
    slots: Option<(sys::Mapped, SlotReader)>,
    /// Why the slot table could not be used, when the hash is the fallback.
    slot_error: Option<String>,
    /// Values per entry: one per possible CPU.
    cpus: usize,
    deltas: Deltas,
    /// Whether batch lookups work here (until one fails as unsupported).
    batch: bool,
    batch_len: usize,
    keys: Vec<u8>,
    values: Vec<u8>,
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
        let cpus = cpus()?;
        // The slot table where the kernel has it (and takes its program); else the hash.
        let e = match slot_table(host_macs, snap_len, max_entries, name) {
            Ok((map, prog, store, mem, n)) => {
                return Ok(KernelCounter {
                    map,
                    prog,
                    max_entries: n,
                    store,
                    slots: Some((mem, SlotReader::new(n))),
                    slot_error: None,
                    cpus,
                    deltas: Deltas::new(),
                    batch: false,
                    batch_len: BATCH,
                    keys: Vec::new(),
                    values: Vec::new(),
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
            slots: None,
            slot_error: None,
            cpus,
            deltas: Deltas::new(),
            batch: true,
            batch_len: BATCH,
            keys: Vec::new(),
            values: Vec::new(),
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
        if let Some((mem, reader)) = self.slots.as_mut() {
            return Ok(reader.read(mem, out).overflow_frames);
        }
        let r = if self.batch {
            match self.read_batch(out) {
                Ok(true) => Ok(()),
                Ok(false) => {
                    // Entries the batch already gave count once (`Deltas::entry`).
                    self.batch = false;
                    self.read_walk(out)
                }
                Err(e) => Err(e),
            }
        } else {
            self.read_walk(out)
        };
        match r {
            Ok(()) => {
                self.deltas.finish();
                Ok(0)
            }
            Err(e) => {
                self.deltas.finish_partial();
                Err(e)
            }
        }
    }

    fn value_len(&self) -> usize {
        VALUE_SIZE * self.cpus
    }

    /// `Ok(false)`: batch lookups are not supported here.
    fn read_batch(&mut self, out: &mut Vec<Delta>) -> io::Result<bool> {
        let vlen = self.value_len();
        let mut from = None;
        // Bounded: a map walk cannot be longer than the map, and a bucket that keeps growing
        // the buffers stops at the map's size.
        for _ in 0..=self.max_entries as usize + 64 {
            self.keys.resize(self.batch_len * KEY_SIZE, 0);
            self.values.resize(self.batch_len * vlen, 0);
            let step = sys::lookup_batch(
                self.map.as_fd(),
                from,
                &mut self.keys,
                &mut self.values,
                KEY_SIZE,
                vlen,
            )
            .map_err(|e| io::Error::new(e.kind(), format!("BPF_MAP_LOOKUP_BATCH: {e}")))?;
            let n = match step {
                sys::BatchStep::Unsupported => return Ok(false),
                sys::BatchStep::TooSmall => {
                    if self.batch_len >= self.max_entries as usize {
                        return Ok(false);
                    }
                    self.batch_len *= 2;
                    continue;
                }
                sys::BatchStep::More(n, token) => {
                    from = Some(token);
                    n
                }
                sys::BatchStep::Done(n) => n,
            };
            for i in 0..n {
                let mut k: RawKey = [0; KEY_SIZE];
                k.copy_from_slice(&self.keys[i * KEY_SIZE..(i + 1) * KEY_SIZE]);
                let t = map::sum_values(&self.values[i * vlen..(i + 1) * vlen]);
                out.extend(self.deltas.entry(&k, t));
            }
            if matches!(step, sys::BatchStep::Done(_)) {
                return Ok(true);
            }
        }
        Ok(true)
    }

    fn read_walk(&mut self, out: &mut Vec<Delta>) -> io::Result<()> {
        let vlen = self.value_len();
        self.values.resize(vlen, 0);
        let mut key: Option<RawKey> = None;
        let ctx = |what: &str, e: io::Error| io::Error::new(e.kind(), format!("{what}: {e}"));
        // An entry evicted under the walk makes the kernel start again from the first key:
        // bounded, and keys seen twice count once (`Deltas::entry`).
        for _ in 0..2 * self.max_entries as usize + 2 {
            let mut next: RawKey = [0; KEY_SIZE];
            let more = sys::next_key(self.map.as_fd(), key.as_ref().map(|k| &k[..]), &mut next)
                .map_err(|e| ctx("BPF_MAP_GET_NEXT_KEY", e))?;
            if !more {
                break;
            }
            if sys::lookup(self.map.as_fd(), &next, &mut self.values)
                .map_err(|e| ctx("BPF_MAP_LOOKUP_ELEM", e))?
            {
                out.extend(self.deltas.entry(&next, map::sum_values(&self.values)));
            }
            key = Some(next);
        }
        Ok(())
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
