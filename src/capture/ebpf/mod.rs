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

pub mod draw;
pub mod guest;
mod hash;
pub mod insn;
pub mod map;
pub mod program;
pub mod ringbuf;
pub mod slots;
mod sys;

#[cfg(test)]
pub(crate) use sys::tcx_programs;
pub mod tc;
pub mod tc_program;

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use hash::HashReader;
pub use map::{Delta, EntryKey};
use map::{KEY_SIZE, VALUE_SIZE};
use program::Store;
pub use ringbuf::{RecordMeta, RingBuf};
use slots::{SlotReader, SLOT_SIZE};

use crate::capture::Mac;
use crate::engine::CountingHook;

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

/// Where the program runs (the engine's [`CountingHook`]: a socket filter on the port's
/// capture socket, which hands ARP and ND on to its ring, or the port's tc hooks, which pass
/// every frame on unchanged, with no tap involved, and hand ARP and ND to a ring buffer), and
/// how much of an ARP or ND frame it hands on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hook {
    pub at: CountingHook,
    pub snap_len: u32,
}

impl Hook {
    pub const fn tc(snap_len: u32) -> Hook {
        Hook {
            at: CountingHook::Tc,
            snap_len,
        }
    }

    pub const fn socket(snap_len: u32) -> Hook {
        Hook {
            at: CountingHook::Socket,
            snap_len,
        }
    }
}

/// What a program is built for: the hook, the sampling ratio's descriptor, and at tc the ring
/// buffer's and its lost-frame counter's.
#[derive(Debug, Clone, Copy)]
struct Target {
    hook: Hook,
    ring: i32,
    lost: i32,
    ratio: i32,
}

impl Target {
    fn new(hook: Hook, ring: Option<&RingBuf>, ratio: &OwnedFd) -> Target {
        Target {
            hook,
            ring: ring.map_or(-1, |r| r.fd().as_raw_fd()),
            lost: ring.map_or(-1, |r| r.lost_fd().as_raw_fd()),
            ratio: ratio.as_raw_fd(),
        }
    }

    fn ring(&self, snap_len: u32) -> tc_program::Ring {
        tc_program::Ring {
            fd: self.ring,
            snap_len,
            lost_fd: self.lost,
        }
    }
}

/// A port's counting map and the program that fills it.
#[derive(Debug)]
pub struct KernelCounter {
    /// At the tc hooks: the links or filters (detached first on drop), the egress program, and
    /// the ring buffer both hand ARP and ND to.
    tc: Option<tc::TcAttached>,
    egress: Option<OwnedFd>,
    ring: Option<RingBuf>,
    /// The sampling ratio the program reads (log2 N), and N.
    ratio: OwnedFd,
    one_in: std::cell::Cell<u32>,
    hook: Hook,
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
    target: Target,
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
    let prog = load(&map, host_macs, target, name, store)?;
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
    /// Creates the map (`max_entries` clients x destinations) and loads the program for `hook`
    /// of a port whose other host MACs are `host_macs`. `name` (the port's) names both in
    /// `bpftool` listings. At the tc hook, [`attach_tc`](Self::attach_tc) attaches it.
    pub fn new(host_macs: &[Mac], hook: Hook, max_entries: u32, name: &str) -> io::Result<Self> {
        let (ring, ratio) = (ring_for(hook, name)?, ratio_for(name)?);
        let target = Target::new(hook, ring.as_ref(), &ratio);
        // The slot table where the kernel has it (and takes its program); else the hash.
        let e = match slot_table(host_macs, target, max_entries, name) {
            Ok((map, prog, store, mem, n)) => {
                return Ok(KernelCounter {
                    tc: None,
                    egress: None,
                    ring,
                    ratio,
                    one_in: std::cell::Cell::new(1),
                    hook,
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
        let mut c = Self::with_hash(host_macs, hook, max_entries, name)?;
        c.slot_error = Some(e.to_string());
        Ok(c)
    }

    /// Counts in the per-CPU LRU hash even where the slot table would work.
    pub fn with_hash(
        host_macs: &[Mac],
        hook: Hook,
        max_entries: u32,
        name: &str,
    ) -> io::Result<Self> {
        let cpus = cpus()?;
        let (ring, ratio) = (ring_for(hook, name)?, ratio_for(name)?);
        let target = Target::new(hook, ring.as_ref(), &ratio);
        let map = sys::map_create(
            sys::BPF_MAP_TYPE_LRU_PERCPU_HASH,
            KEY_SIZE as u32,
            VALUE_SIZE as u32,
            max_entries.max(1),
            0,
            &format!("rlbd_{name}"),
        )
        .map_err(|e| io::Error::new(e.kind(), format!("creating the counting map: {e}")))?;
        let prog = load(&map, host_macs, target, name, Store::Hash)?;
        Ok(KernelCounter {
            tc: None,
            egress: None,
            ring,
            ratio,
            one_in: std::cell::Cell::new(1),
            hook,
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

    /// Loads the program again for a new set of host MACs (same map, counts kept). At the tc
    /// hook the filter takes it at once; a socket filter's caller attaches it.
    pub fn reprogram(&mut self, host_macs: &[Mac], name: &str) -> io::Result<()> {
        let target = Target::new(self.hook, self.ring.as_ref(), &self.ratio);
        let prog = load(&self.map, host_macs, target, name, self.store)?;
        if let Some(f) = &self.tc {
            f.replace(prog.as_fd(), &format!("rlbd_{name}"))?;
        }
        self.prog = prog;
        Ok(())
    }

    /// Attaches the socket filter to `sock` in place of its filter.
    pub fn attach(&self, sock: BorrowedFd<'_>) -> io::Result<()> {
        sys::attach_bpf(sock, self.prog.as_fd())
            .map_err(|e| io::Error::new(e.kind(), format!("SO_ATTACH_BPF: {e}")))
    }

    /// Attaches the tc programs at the ingress and egress hooks of `port` / `ifindex` (see
    /// `tc.rs`: tcx `links` where the kernel has them, else filters); they go when this
    /// counter does.
    pub fn attach_tc(&mut self, port: &str, ifindex: u32, links: bool) -> io::Result<()> {
        let (CountingHook::Tc, Some(ring)) = (self.hook.at, &self.ring) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a tc counting program",
            ));
        };
        let r = Target::new(self.hook, Some(ring), &self.ratio).ring(self.hook.snap_len);
        let insns = tc_program::watching_program(r)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let name = format!("rlbd_{port}");
        let egress = sys::prog_load(sys::BPF_PROG_TYPE_SCHED_CLS, &insns, &name)
            .map_err(|e| io::Error::new(e.kind(), format!("loading the egress program: {e}")))?;
        let (ingress, egress_fd) = (self.prog.as_fd(), egress.as_fd());
        let f = tc::TcAttached::attach(port, ifindex, ingress, egress_fd, &name, links)?;
        self.tc = Some(f);
        self.egress = Some(egress);
        Ok(())
    }

    /// Counts one IPv4/IPv6 data frame in `one_in` (a power of two up to
    /// 2^[`MAX_SHIFT`](draw::MAX_SHIFT); 1: every frame), each kept one for `one_in` frames and
    /// bytes, from the next frame on: one map write, the program stays (at the tc hooks and in a
    /// socket filter alike).
    pub fn set_sampling(&self, one_in: u32) -> io::Result<()> {
        let shift = one_in.trailing_zeros();
        if !one_in.is_power_of_two() || shift > draw::MAX_SHIFT {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "sampling ratio {one_in} is not a power of two in 1..={}",
                    1u32 << draw::MAX_SHIFT
                ),
            ));
        }
        let mut value = ratio_values(self.ratio.as_fd())?;
        set_ratio(&mut value, u64::from(shift));
        sys::update(self.ratio.as_fd(), &0u32.to_ne_bytes(), &value)
            .map_err(|e| io::Error::new(e.kind(), format!("setting the sampling ratio: {e}")))?;
        self.one_in.set(one_in);
        Ok(())
    }

    /// The packets the hook (the tc ingress hook, or the socket) handed the program since it was
    /// made, all CPUs together (what the sampling ratio is chosen from).
    pub fn hook_packets(&self) -> Option<u64> {
        let v = ratio_values(self.ratio.as_fd()).ok()?;
        let at = draw::RATIO_SEEN;
        let seen = v.chunks_exact(draw::RATIO_VALUE).map(|c| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&c[at..at + 8]);
            u64::from_ne_bytes(b)
        });
        Some(seen.fold(0u64, u64::wrapping_add))
    }

    /// The sampling ratio in force: one IPv4/IPv6 data frame in this many is counted.
    pub fn sampling(&self) -> u32 {
        self.one_in.get()
    }

    /// At the tc hooks: the ring buffer of ARP and ND frames.
    pub fn ring(&mut self) -> Option<&mut RingBuf> {
        self.ring.as_mut()
    }

    /// At the tc hooks: whether the ring buffer holds a record.
    pub fn ring_pending(&self) -> bool {
        self.ring.as_ref().is_some_and(RingBuf::pending)
    }

    /// At the tc hooks: frames the ring buffer had no room for since it was made.
    pub fn ring_lost(&self) -> Option<u64> {
        self.ring.as_ref().and_then(|r| r.lost().ok())
    }

    /// At the tc hooks: the ring buffer's descriptor (readable when it holds a record).
    pub fn ring_fd(&self) -> Option<std::os::fd::RawFd> {
        self.ring.as_ref().map(|r| r.fd().as_raw_fd())
    }

    /// How the programs are attached at the tc hooks: "tcx" (links) or "cls_bpf" (filters).
    pub fn tc_attach(&self) -> Option<&'static str> {
        self.tc.as_ref().map(tc::TcAttached::how)
    }

    /// Where the program runs: at the tc ingress hook, or in a socket filter.
    pub fn hook(&self) -> Hook {
        self.hook
    }

    /// Where the program runs: "tc" (ingress hook) or "socket" (a socket filter).
    pub fn hook_name(&self) -> &'static str {
        self.hook.at.as_str()
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

/// At the tc hooks, the ring buffer for ARP and ND.
fn ring_for(hook: Hook, name: &str) -> io::Result<Option<RingBuf>> {
    match hook.at {
        CountingHook::Tc => RingBuf::new(name).map(Some),
        CountingHook::Socket => Ok(None),
    }
}

/// The sampling ratio's one-entry per-CPU array (log2 N, 0 at first: every frame; and each
/// CPU's generator), which both programs read.
fn ratio_for(name: &str) -> io::Result<OwnedFd> {
    let value = draw::RATIO_VALUE as u32;
    sys::map_create(
        sys::BPF_MAP_TYPE_PERCPU_ARRAY,
        4,
        value,
        1,
        0,
        &format!("rlbd_{name}"),
    )
    .map_err(|e| io::Error::new(e.kind(), format!("creating the sampling ratio: {e}")))
}

/// The ratio map's whole value, every possible CPU's.
fn ratio_values(ratio: BorrowedFd<'_>) -> io::Result<Vec<u8>> {
    let mut v = vec![0u8; cpus()? * draw::RATIO_VALUE];
    sys::lookup(ratio, &0u32.to_ne_bytes(), &mut v)?;
    Ok(v)
}

/// `shift` for every CPU in `value`, each with a generator seeded at random (never 0, which
/// xorshift never leaves); the packets seen stay.
fn set_ratio(value: &mut [u8], shift: u64) {
    use std::hash::BuildHasher;
    let seeds = std::collections::hash_map::RandomState::new();
    for (cpu, v) in value.chunks_exact_mut(draw::RATIO_VALUE).enumerate() {
        v[..8].copy_from_slice(&shift.to_ne_bytes());
        v[8..16].copy_from_slice(&(seeds.hash_one(cpu) | 1).to_ne_bytes());
    }
}

fn load(
    map: &OwnedFd,
    host_macs: &[Mac],
    target: Target,
    name: &str,
    store: Store,
) -> io::Result<OwnedFd> {
    let fd = map.as_raw_fd();
    let snap_len = target.hook.snap_len;
    let (insns, prog_type) = match target.hook.at {
        CountingHook::Socket => (
            program::counting_program(host_macs, snap_len, fd, store, target.ratio),
            sys::BPF_PROG_TYPE_SOCKET_FILTER,
        ),
        CountingHook::Tc => (
            tc_program::counting_program(host_macs, fd, store, target.ring(snap_len), target.ratio),
            sys::BPF_PROG_TYPE_SCHED_CLS,
        ),
    };
    let insns = insns.map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    sys::prog_load(prog_type, &insns, &format!("rlbd_{name}"))
        .map_err(|e| io::Error::new(e.kind(), format!("loading the counting program: {e}")))
}

#[cfg(test)]
pub(crate) mod unprivileged_tests;
