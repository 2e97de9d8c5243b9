//! The words of a buffer's memory, from the system allocator whatever the process's global
//! allocator is.
//!
//! Buffers are large and long-lived, and their memory decides how fast every pass over them
//! runs: with mimalloc as the example binaries' global allocator, the 5-point stencil's fused
//! sweep at 4096^2 took 18.1-18.9 ms against 9.1-9.8 ms with the system's (`bench_stencil
//! --n 4094 --iters 5 --sweeps 5`, two alternating runs each, 2-core AMD EPYC, 2026-12-05):
//! the regression came with mimalloc (`git bisect` over the stencil's sweep). The system
//! allocator maps large requests fresh from the kernel, untouched, which is also what the
//! huge-page advice (`memory::advise_huge_pages`) expects. The many small vectors of the host
//! keep the global allocator.

use std::alloc::{GlobalAlloc, Layout, System};
use std::ptr::NonNull;

/// `len` words owned, allocated and freed by [`System`].
pub(crate) struct HostWords {
    ptr: NonNull<u64>,
    len: usize,
}

// SAFETY: `HostWords` owns its memory alone, as a `Box<[u64]>` does; `&HostWords` gives only
// shared access to it.
unsafe impl Send for HostWords {}
// SAFETY: as above.
unsafe impl Sync for HostWords {}

impl HostWords {
    /// `len` zeroed words, or `None` where the system refuses them.
    pub(crate) fn zeroed(len: usize) -> Option<HostWords> {
        if len == 0 {
            return Some(HostWords {
                ptr: NonNull::dangling(),
                len: 0,
            });
        }
        let layout = Layout::array::<u64>(len).ok()?;
        // SAFETY: the layout has a non-zero size (`len > 0`).
        let ptr = unsafe { System.alloc_zeroed(layout) }.cast::<u64>();
        Some(HostWords {
            ptr: NonNull::new(ptr)?,
            len,
        })
    }
}

impl std::ops::Deref for HostWords {
    type Target = [u64];

    fn deref(&self) -> &[u64] {
        // SAFETY: `ptr` holds `len` initialized words (zeroed when allocated) that this value
        // owns (dangling and well aligned for `len == 0`).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl std::ops::DerefMut for HostWords {
    fn deref_mut(&mut self) -> &mut [u64] {
        // SAFETY: as in `deref`, borrowed mutably and exclusively.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for HostWords {
    fn drop(&mut self) {
        if self.len == 0 {
            return;
        }
        if let Ok(layout) = Layout::array::<u64>(self.len) {
            // SAFETY: `ptr` was allocated by `System` with this layout (`zeroed`) and is
            // freed once, here.
            unsafe { System.dealloc(self.ptr.as_ptr().cast(), layout) };
        }
    }
}

impl std::fmt::Debug for HostWords {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HostWords({} words)", self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_come_zeroed_and_hold_what_is_written() {
        for len in [0usize, 1, 7, 1 << 20] {
            let mut w = HostWords::zeroed(len).expect("memory");
            assert_eq!(w.len(), len);
            assert!(w.iter().all(|&x| x == 0));
            for (i, x) in w.iter_mut().enumerate() {
                *x = i as u64;
            }
            assert!(w.iter().enumerate().all(|(i, &x)| x == i as u64));
        }
    }
}
