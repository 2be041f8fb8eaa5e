//! Reading the per-CPU LRU hash (the fallback where the kernel cannot map a map): batch lookups
//! (or, on kernels without them, a key-by-key walk), the per-CPU values summed, and cumulative
//! counters turned into per-reading deltas (`map::Deltas`).

use std::io;
use std::os::fd::BorrowedFd;

use super::map::{self, Delta, Deltas, RawKey, KEY_SIZE, VALUE_SIZE};
use super::sys;

/// Entries read per batch lookup (grown when a hash bucket holds more).
const BATCH: usize = 256;

/// The daemon's side of the hash: the last reading's counters and the read buffers.
#[derive(Debug)]
pub struct HashReader {
    max_entries: u32,
    /// Values per entry: one per possible CPU.
    cpus: usize,
    deltas: Deltas,
    /// Whether batch lookups work here (until one fails as unsupported).
    batch: bool,
    batch_len: usize,
    keys: Vec<u8>,
    values: Vec<u8>,
}

impl HashReader {
    pub fn new(max_entries: u32, cpus: usize) -> HashReader {
        HashReader {
            max_entries,
            cpus,
            deltas: Deltas::new(),
            batch: true,
            batch_len: BATCH,
            keys: Vec::new(),
            values: Vec::new(),
        }
    }

    /// Every entry of `map` that counted frames since the last reading, with those counts,
    /// appended to `out`. A reading that fails halfway still reports what it read (the next
    /// one counts the rest).
    pub fn read(&mut self, map: BorrowedFd<'_>, out: &mut Vec<Delta>) -> io::Result<()> {
        let r = if self.batch {
            match self.read_batch(map, out) {
                Ok(true) => Ok(()),
                Ok(false) => {
                    // Entries the batch already gave count once (`Deltas::entry`).
                    self.batch = false;
                    self.read_walk(map, out)
                }
                Err(e) => Err(e),
            }
        } else {
            self.read_walk(map, out)
        };
        match r {
            Ok(()) => self.deltas.finish(),
            Err(_) => self.deltas.finish_partial(),
        }
        r
    }

    fn value_len(&self) -> usize {
        VALUE_SIZE * self.cpus
    }

    /// `Ok(false)`: batch lookups are not supported here.
    fn read_batch(&mut self, map: BorrowedFd<'_>, out: &mut Vec<Delta>) -> io::Result<bool> {
        let vlen = self.value_len();
        let mut from = None;
        // Bounded: a map walk cannot be longer than the map, and a bucket that keeps growing
        // the buffers stops at the map's size.
        for _ in 0..=self.max_entries as usize + 64 {
            self.keys.resize(self.batch_len * KEY_SIZE, 0);
            self.values.resize(self.batch_len * vlen, 0);
            let step =
                sys::lookup_batch(map, from, &mut self.keys, &mut self.values, KEY_SIZE, vlen)
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

    fn read_walk(&mut self, map: BorrowedFd<'_>, out: &mut Vec<Delta>) -> io::Result<()> {
        let vlen = self.value_len();
        self.values.resize(vlen, 0);
        let mut key: Option<RawKey> = None;
        let ctx = |what: &str, e: io::Error| io::Error::new(e.kind(), format!("{what}: {e}"));
        // An entry evicted under the walk makes the kernel start again from the first key:
        // bounded, and keys seen twice count once (`Deltas::entry`).
        for _ in 0..2 * self.max_entries as usize + 2 {
            let mut next: RawKey = [0; KEY_SIZE];
            let more = sys::next_key(map, key.as_ref().map(|k| &k[..]), &mut next)
                .map_err(|e| ctx("BPF_MAP_GET_NEXT_KEY", e))?;
            if !more {
                break;
            }
            if sys::lookup(map, &next, &mut self.values)
                .map_err(|e| ctx("BPF_MAP_LOOKUP_ELEM", e))?
            {
                out.extend(self.deltas.entry(&next, map::sum_values(&self.values)));
            }
            key = Some(next);
        }
        Ok(())
    }
}
