//! What a reload cannot apply: the bond or ports, the capture table and ring sizes and the way
//! ports count are sized or opened at start; a change of them is said, not applied.

use crate::config::Settings;

/// What changed from `old` to `new` that only a restart applies, in words.
pub fn restart_needed(old: &Settings, new: &Settings) -> Vec<&'static str> {
    let mut v = Vec::new();
    if new.target != old.target && new.target.is_some() {
        v.push("the bond or ports");
    }
    let (o, n) = (&old.capture, &new.capture);
    if (o.table_size, o.ring_blocks, o.ring_block_kib)
        != (n.table_size, n.ring_blocks, n.ring_block_kib)
    {
        v.push("the capture table or ring size");
    }
    if o.kernel_counting() != n.kernel_counting() {
        v.push("[capture] counting");
    }
    v
}
