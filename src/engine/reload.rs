//! What a reload cannot apply: the bond or ports, the capture table and ring sizes and the way
//! ports count are sized or opened at start; a change of them is said, not applied.

use crate::config::Settings;

/// The changes from `old` to `new` that need a restart, in words.
pub fn restart_needed(old: &Settings, new: &Settings) -> Vec<&'static str> {
    let mut v = Vec::new();
    if new.target != old.target && new.target.is_some() {
        v.push("the bond or ports changed in the configuration");
    }
    let (o, n) = (&old.capture, &new.capture);
    if (o.table_size, o.ring_blocks, o.ring_block_kib)
        != (n.table_size, n.ring_blocks, n.ring_block_kib)
    {
        v.push("the capture table or ring size changed");
    }
    if o.kernel_counting() != n.kernel_counting() {
        v.push("[capture] counting changed");
    }
    v
}
