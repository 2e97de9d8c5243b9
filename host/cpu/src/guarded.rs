//! Memory between guard pages, for fuzzing and tests: a buffer whose last word ends where an
//! inaccessible page begins, with another inaccessible page before it. An access past either
//! end stops the process with a segmentation fault instead of reading or corrupting a
//! neighbour, so a fuzzer sees every access compiled code makes outside a buffer.

/// Zeroed words mapped between two inaccessible pages (see the module documentation).
#[derive(Debug)]
pub struct Guarded {
    /// The whole mapping: guard page, data pages, guard page.
    region: *mut libc::c_void,
    region_len: usize,
    /// The first word; the last one ends at the second guard page.
    words: *mut u64,
    len: usize,
}

// SAFETY: `Guarded` owns its mapping exclusively (no other value holds its pointers), like a
// `Box<[u64]>`, so moving it to another thread or sharing `&Guarded` is as safe as for a box.
unsafe impl Send for Guarded {}
// SAFETY: as above; `&Guarded` gives only shared access to the words.
unsafe impl Sync for Guarded {}

fn page_size() -> usize {
    // SAFETY: `sysconf` has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size).unwrap_or(4096).max(4096)
}

impl Guarded {
    /// `len` zeroed words between guard pages, or `None` when the system refuses the mapping.
    pub fn zeroed(len: usize) -> Option<Guarded> {
        let page = page_size();
        let data = len.checked_mul(8)?.checked_next_multiple_of(page)?;
        let region_len = data.checked_add(2 * page)?;
        // SAFETY: an anonymous private mapping at an address the kernel chooses touches no
        // existing memory; the result is checked below.
        let region = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                region_len,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if region == libc::MAP_FAILED {
            return None;
        }
        let guarded = Guarded {
            region,
            region_len,
            // SAFETY: `page + data - 8 * len` is inside the mapping (`8 * len <= data`).
            words: unsafe { region.cast::<u8>().add(page + data - len * 8) }.cast::<u64>(),
            len,
        };
        if data > 0 {
            // SAFETY: the data pages lie inside the mapping made above, which this value owns.
            let ok = unsafe {
                libc::mprotect(
                    region.cast::<u8>().add(page).cast(),
                    data,
                    libc::PROT_READ | libc::PROT_WRITE,
                )
            };
            if ok != 0 {
                return None;
            }
        }
        Some(guarded)
    }

    /// The words.
    pub fn as_slice(&self) -> &[u64] {
        // SAFETY: `words` points at `len` readable, zero-initialized (or since written) and
        // 8-aligned words (page offsets are multiples of 8) that this value owns.
        unsafe { std::slice::from_raw_parts(self.words, self.len) }
    }

    /// The words, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [u64] {
        // SAFETY: as in `as_slice`, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.words, self.len) }
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        // SAFETY: the mapping was made by `zeroed` with this length and is unmapped once.
        unsafe {
            libc::munmap(self.region, self.region_len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_words_end_at_the_guard_page_and_start_zeroed() {
        let page = page_size();
        for len in [0usize, 1, 3, page / 8, page / 8 + 1] {
            let mut g = Guarded::zeroed(len).expect("maps");
            assert!(g.as_slice().iter().all(|&w| w == 0));
            g.as_mut_slice().iter_mut().for_each(|w| *w = 7);
            assert!(g.as_slice().iter().all(|&w| w == 7));
            let end = g.as_slice().as_ptr_range().end as usize;
            assert_eq!(
                end % page,
                0,
                "len {len}: the last word ends at a page boundary"
            );
        }
    }
}
