//! A bucket of the table's open-addressing index, and the key it compares.

use super::NIL;
use crate::client::ClientKey;

/// A client key as one integer: compared in one instruction, not seven.
#[inline]
pub(super) fn key(k: &ClientKey) -> u64 {
    k.as_u64()
}

/// A bucket of the open-addressing index: slot number (NIL when empty) and the low 32 bits of the
/// key's hash (its home bucket, and a cheap pre-check before touching the slot).
#[derive(Debug, Clone, Copy)]
pub(super) struct Bucket {
    pub(super) slot: u32,
    pub(super) tag: u32,
}

pub(super) const EMPTY: Bucket = Bucket { slot: NIL, tag: 0 };
