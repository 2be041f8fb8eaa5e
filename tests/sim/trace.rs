//! The last events of a run, printed with the seed when a rule fails, and a hash of every event
//! noted: the same seed run twice must give the same hash (the run is deterministic).

use std::collections::VecDeque;

pub struct Trace {
    keep: usize,
    lines: VecDeque<String>,
    /// FNV-1a over every line noted (not only those kept).
    hash: u64,
}

impl Trace {
    pub fn new(keep: usize) -> Trace {
        Trace {
            keep,
            lines: VecDeque::with_capacity(keep),
            hash: 0xcbf2_9ce4_8422_2325,
        }
    }

    pub fn note(&mut self, now: u64, line: impl FnOnce() -> String) {
        if self.lines.len() == self.keep {
            self.lines.pop_front();
        }
        let line = format!("{:>12} ms  {}", now, line());
        for b in line.bytes() {
            self.hash = (self.hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        self.lines.push_back(line);
    }

    /// The hash of every event noted so far.
    pub fn hash(&self) -> u64 {
        self.hash
    }

    pub fn dump(&self) -> String {
        self.lines.iter().cloned().collect::<Vec<_>>().join("\n")
    }
}
