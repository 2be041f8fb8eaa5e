//! An mmapable BPF array mapped into the process: the programs' counters read with plain loads.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// An mmapable array's memory, mapped shared into the process: the program's counters read
/// without a system call, and slots freed by writing them.
#[derive(Debug)]
pub struct Mapped {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
}

impl Mapped {
    /// Maps the first `len` bytes of `map` (a multiple of the page size is not needed).
    pub fn new(map: BorrowedFd<'_>, len: usize) -> io::Result<Mapped> {
        Self::at(map, len, 0, true)
    }

    /// Maps `len` bytes of `map` from `offset` (a multiple of the page size), writable or
    /// read-only (a ring buffer's producer side only reads).
    pub fn at(
        map: BorrowedFd<'_>,
        len: usize,
        offset: usize,
        writable: bool,
    ) -> io::Result<Mapped> {
        if len == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty map"));
        }
        let prot = if writable {
            libc::PROT_READ | libc::PROT_WRITE
        } else {
            libc::PROT_READ
        };
        let offset = libc::off_t::try_from(offset)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset too large"))?;
        // SAFETY: a fresh shared mapping of the map's fd; the kernel checks `len` and `offset`
        // against the map's size (and a ring buffer's producer side against PROT_WRITE) and
        // fails with EINVAL or EPERM.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                prot,
                libc::MAP_SHARED,
                map.as_raw_fd(),
                offset,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = std::ptr::NonNull::new(p.cast::<u8>())
            .ok_or_else(|| io::Error::other("mmap returned a null address"))?;
        Ok(Mapped { ptr, len })
    }

    fn word(&self, at: usize) -> Option<&std::sync::atomic::AtomicU64> {
        if at % 8 != 0 || at.checked_add(8)? > self.len {
            return None;
        }
        // SAFETY: in bounds (checked) and 8-byte aligned (the mapping is page-aligned and `at`
        // a multiple of 8); the program changes these words concurrently, which is what an
        // atomic is for.
        Some(unsafe {
            &*self
                .ptr
                .as_ptr()
                .add(at)
                .cast::<std::sync::atomic::AtomicU64>()
        })
    }

    /// The 8 bytes at `at` (8-aligned), as the program stored them; 0 out of bounds.
    pub fn load(&self, at: usize) -> u64 {
        self.word(at)
            .map_or(0, |w| w.load(std::sync::atomic::Ordering::Acquire))
    }

    /// `len` bytes at `at`; `None` out of bounds. The caller reads only bytes the kernel has
    /// finished writing (a ring buffer record whose header said so, read with acquire order).
    pub fn bytes(&self, at: usize, len: usize) -> Option<&[u8]> {
        if at.checked_add(len)? > self.len {
            return None;
        }
        // SAFETY: in bounds (checked); the kernel does not write a committed record until the
        // consumer position, which only this process moves, has passed it.
        Some(unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(at), len) })
    }

    /// Stores `v` at `at` (8-aligned); out of bounds does nothing.
    pub fn store(&self, at: usize, v: u64) {
        if let Some(w) = self.word(at) {
            w.store(v, std::sync::atomic::Ordering::Release);
        }
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}
