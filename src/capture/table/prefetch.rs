//! Cache-line hints for the table's batched updates (the only `unsafe` of the table).

/// A hint to load the cache line of `r` (x86-64 only; elsewhere nothing).
#[inline(always)]
pub(super) fn prefetch<T>(r: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults and changes no memory; the address is a reference's.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>((r as *const T).cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = r;
}

/// [`prefetch`] of every cache line of `r`.
#[inline(always)]
pub(super) fn prefetch_all<T>(r: &T) {
    let bytes = std::mem::size_of::<T>();
    let p = (r as *const T).cast::<u8>();
    for off in (0..bytes).step_by(64) {
        // SAFETY: `off` < size_of::<T>(): inside the referenced value.
        prefetch(unsafe { &*p.add(off) });
    }
}
