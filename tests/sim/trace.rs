//! The last events of a run, printed with the seed when a rule fails.

use std::collections::VecDeque;

pub struct Trace {
    keep: usize,
    lines: VecDeque<String>,
}

impl Trace {
    pub fn new(keep: usize) -> Trace {
        Trace {
            keep,
            lines: VecDeque::with_capacity(keep),
        }
    }

    pub fn note(&mut self, now: u64, line: impl FnOnce() -> String) {
        if self.lines.len() == self.keep {
            self.lines.pop_front();
        }
        self.lines.push_back(format!("{:>12} ms  {}", now, line()));
    }

    pub fn dump(&self) -> String {
        self.lines.iter().cloned().collect::<Vec<_>>().join("\n")
    }
}
