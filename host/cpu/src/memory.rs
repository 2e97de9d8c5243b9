//! The CPU back end's memory: buffers of host memory, 8-byte aligned and zeroed, and a pool
//! that reuses the memory of freed buffers.
//!
//! Loops that free and allocate arrays of one size every iteration (every NumPy-style
//! program's temporaries) get the same memory back instead of fresh pages, which spares the
//! page faults of fresh memory. Reused memory is zeroed again, so nothing of another store
//! shows through, unless the runtime asks for it uncleared ([`Memory::alloc_uninit`]) for a
//! store that its first task writes whole before reading: the fill would be a pass over
//! memory for nothing.

use rustc_hash::FxHashMap;

use weft_runtime::BufferId;

use crate::{Error, Result};

/// The buffers of one back end.
#[derive(Debug, Default)]
pub struct Memory {
    /// By id; looked up for every binding of every launch, so hashed cheaply (the ids are
    /// the back end's own counter, not anyone's input to collide).
    buffers: FxHashMap<BufferId, Buffer>,
    next: u64,
    /// Bytes in live buffers.
    allocated: u64,
    /// Memory of freed buffers, kept for reuse.
    pool: crate::free_list::FreeList,
    /// The most bytes `pool` may hold.
    pool_limit: u64,
    /// Whether each buffer sits between guard pages (and none is reused).
    guard_pages: bool,
    /// Whether fresh buffers of at least [`HUGE_PAGE_MIN_BYTES`] ask for transparent huge
    /// pages (see [`advise_huge_pages`]).
    huge_pages: bool,
}

/// One buffer: its bytes are the first `bytes` bytes of `words`.
#[derive(Debug)]
struct Buffer {
    words: Words,
    bytes: usize,
}

/// A buffer's words: from the allocator, or mapped between guard pages.
#[derive(Debug)]
enum Words {
    Heap(crate::host_words::HostWords),
    Guarded(crate::guarded::Guarded),
}

impl Words {
    fn as_slice(&self) -> &[u64] {
        match self {
            Words::Heap(w) => w,
            Words::Guarded(g) => g.as_slice(),
        }
    }

    fn as_mut_slice(&mut self) -> &mut [u64] {
        match self {
            Words::Heap(w) => w,
            Words::Guarded(g) => g.as_mut_slice(),
        }
    }
}

impl Memory {
    /// No buffers; up to `pool_limit` bytes of freed memory are kept for reuse.
    pub fn with_pool(pool_limit: u64) -> Memory {
        Memory {
            pool_limit,
            ..Memory::default()
        }
    }

    /// This memory, with large fresh buffers asking for transparent huge pages (`true`) or
    /// not (see `advise_huge_pages`).
    pub fn huge_pages(self, huge_pages: bool) -> Memory {
        Memory { huge_pages, ..self }
    }

    /// No buffers, each future one between guard pages (see `crate::guarded`), and no
    /// reuse: for fuzzing, where an access outside a buffer must stop the process.
    pub fn guarded() -> Memory {
        Memory {
            guard_pages: true,
            ..Memory::default()
        }
    }

    /// A new zeroed buffer of `bytes` bytes.
    pub fn alloc(&mut self, bytes: u64) -> Result<BufferId> {
        self.alloc_with(bytes, true)
    }

    /// A new buffer of `bytes` bytes that may hold what a freed buffer of this memory held
    /// (fresh memory is zeroed all the same): for a store its first task writes whole.
    pub fn alloc_uninit(&mut self, bytes: u64) -> Result<BufferId> {
        self.alloc_with(bytes, false)
    }

    fn alloc_with(&mut self, bytes: u64, zero: bool) -> Result<BufferId> {
        let len = usize::try_from(bytes)
            .map_err(|_| Error::Memory(format!("a buffer of {bytes} bytes")))?;
        let words = len.div_ceil(8);
        let refused = || Error::Memory(format!("cannot allocate a buffer of {bytes} bytes"));
        let data = if self.guard_pages {
            Words::Guarded(crate::guarded::Guarded::zeroed(words).ok_or_else(refused)?)
        } else {
            Words::Heap(self.heap_words(words, zero).ok_or_else(refused)?)
        };
        self.next += 1;
        let id = BufferId(self.next);
        self.buffers.insert(
            id,
            Buffer {
                words: data,
                bytes: len,
            },
        );
        self.allocated += bytes;
        Ok(id)
    }

    /// At least `words` words (their class's, see `free_list`) from the pool (zeroed again if
    /// `zero`) or fresh and zeroed.
    fn heap_words(&mut self, words: usize, zero: bool) -> Option<crate::host_words::HostWords> {
        let class = crate::free_list::class_words(words);
        match self.pool.take(class) {
            Some(mut data) => {
                if zero {
                    data.fill(0);
                }
                Some(data)
            }
            None => zeroed_words(class, self.huge_pages),
        }
    }

    /// Frees a buffer, keeping its memory for reuse: when the pool has no room for it, the
    /// buffers freed longest ago leave it (their memory goes back to the allocator), so the
    /// pool holds the sizes the program uses now, not those of a phase long over.
    pub fn free(&mut self, id: BufferId) {
        let Some(b) = self.buffers.remove(&id) else {
            return;
        };
        self.allocated -= b.bytes as u64;
        if let Words::Heap(words) = b.words {
            self.pool.give(words, self.pool_limit);
        }
    }

    /// The bytes of a buffer.
    pub fn bytes(&self, id: BufferId) -> Result<&[u8]> {
        let b = self.get(id)?;
        Ok(&bytemuck_bytes(b.words.as_slice())[..b.bytes])
    }

    /// The bytes of a buffer, mutably.
    pub fn bytes_mut(&mut self, id: BufferId) -> Result<&mut [u8]> {
        let b = self
            .buffers
            .get_mut(&id)
            .ok_or_else(|| Error::Memory(format!("no buffer {}", id.0)))?;
        let len = b.bytes;
        Ok(&mut bytemuck_bytes_mut(b.words.as_mut_slice())[..len])
    }

    /// The address of a buffer's first byte and its length in bytes.
    pub fn base(&mut self, id: BufferId) -> Result<(*mut u8, usize)> {
        let b = self
            .buffers
            .get_mut(&id)
            .ok_or_else(|| Error::Memory(format!("no buffer {}", id.0)))?;
        Ok((b.words.as_mut_slice().as_mut_ptr().cast::<u8>(), b.bytes))
    }

    fn get(&self, id: BufferId) -> Result<&Buffer> {
        self.buffers
            .get(&id)
            .ok_or_else(|| Error::Memory(format!("no buffer {}", id.0)))
    }

    /// Bytes in live buffers.
    pub fn allocated(&self) -> u64 {
        self.allocated
    }

    /// Bytes of freed memory kept for reuse.
    pub fn pooled(&self) -> u64 {
        self.pool.bytes()
    }
}

/// `words` zeroed words from the system allocator's zeroed allocation (`calloc`: large buffers get
/// fresh zero pages from the system, touched only when used), or `None` when memory is short;
/// with `huge_pages`, a large buffer asks for transparent huge pages before its first touch.
fn zeroed_words(words: usize, huge_pages: bool) -> Option<crate::host_words::HostWords> {
    let mut data = crate::host_words::HostWords::zeroed(words)?;
    if huge_pages {
        advise_huge_pages(data.as_mut_ptr().cast::<u8>(), words * 8);
    }
    Some(data)
}

/// The size of a transparent huge page on x86-64 (and of the aligned spans advised).
const HUGE_PAGE: usize = 2 << 20;

/// Buffers of at least this many bytes ask for transparent huge pages: any buffer that can
/// hold one whole aligned span. It was four spans (8 MiB) until 2026-12-05: NPBench's
/// `arc_distance` at `M` writes one fresh 8,000,000-byte output, whose first touches of 1,953
/// pages of 4 KiB made its first run 2.1-2.6x its steady one (four runs); with huge pages
/// 1.7-2.0x (`npbench --kernels hdiff,arc_distance,gesummv --iters 3`, five runs, 2-core AMD
/// EPYC virtual machine).
pub(crate) const HUGE_PAGE_MIN_BYTES: usize = HUGE_PAGE;

/// Asks the kernel to back the whole 2 MiB-aligned spans of the `len` bytes at `ptr` with
/// transparent huge pages (`madvise(MADV_HUGEPAGE)`; where the system's setting is
/// `madvise`, only advised memory gets them), for buffers of at least
/// [`HUGE_PAGE_MIN_BYTES`]. Large buffers come fresh from the system, untouched, so the
/// first touch of each span faults in one huge page: a pass over a large store then walks
/// one page table entry per 2 MiB instead of one per 4 KiB. A refusal changes nothing but
/// the page size, so its result is ignored.
///
/// Measured on a 2-core AMD EPYC virtual machine (two alternating runs each, with and
/// without): the stencil's fused sweep 11.3-12.3 ms against 13.7-14.7 ms, CG 24.8-25.7 ms
/// per iteration against 25.0-28.7 ms, BiCGSTAB 45.9-51.5 ms against 51.0-58.6 ms.
fn advise_huge_pages(ptr: *mut u8, len: usize) {
    #[cfg(target_os = "linux")]
    {
        if len < HUGE_PAGE_MIN_BYTES {
            return;
        }
        let start = (ptr as usize).next_multiple_of(HUGE_PAGE);
        let end = (ptr as usize + len) / HUGE_PAGE * HUGE_PAGE;
        if end > start {
            // SAFETY: `[start, end)` lies inside the allocation of `len` bytes at `ptr`, which
            // the caller owns; `MADV_HUGEPAGE` changes how pages are backed, never their
            // contents or the mapping's protection.
            unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (ptr, len);
}

fn bytemuck_bytes(words: &[u64]) -> &[u8] {
    // SAFETY: `words` is valid for `8 * len` bytes, u8 has no alignment or validity
    // requirements, and the result borrows `words`.
    unsafe { std::slice::from_raw_parts(words.as_ptr().cast::<u8>(), words.len() * 8) }
}

fn bytemuck_bytes_mut(words: &mut [u64]) -> &mut [u8] {
    // SAFETY: as in `bytemuck_bytes`, and the result borrows `words` mutably and exclusively.
    unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr().cast::<u8>(), words.len() * 8) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freed_memory_is_reused_zeroed_up_to_the_limit() {
        let mut m = Memory::with_pool(64);
        let a = m.alloc(32).unwrap();
        let pa = m.base(a).unwrap().0;
        m.bytes_mut(a).unwrap().fill(0xAB);
        m.free(a);
        assert_eq!(m.pooled(), 32);
        // A buffer of the same size gets the same memory, zeroed.
        let b = m.alloc(32).unwrap();
        assert_eq!(m.base(b).unwrap().0, pa);
        assert!(m.bytes(b).unwrap().iter().all(|&x| x == 0));
        assert_eq!(m.pooled(), 0);
        // Another size does not; the pool keeps at most its limit.
        let c = m.alloc(24).unwrap();
        let d = m.alloc(128).unwrap();
        m.free(b);
        m.free(d);
        assert_eq!(m.pooled(), 32, "128 bytes would pass the 64-byte limit");
        assert_eq!(m.allocated(), 24);
        m.free(c);
        assert_eq!(m.allocated(), 0);
    }

    #[test]
    fn a_full_pool_gives_way_to_the_sizes_used_now() {
        let mut m = Memory::with_pool(64);
        // An earlier phase fills the pool with 32-byte buffers.
        let old: Vec<BufferId> = (0..2).map(|_| m.alloc(32).unwrap()).collect();
        for id in old {
            m.free(id);
        }
        assert_eq!(m.pooled(), 64);
        // A later phase frees 48-byte buffers: they take the place of the oldest, and are
        // the ones reused.
        let a = m.alloc(48).unwrap();
        let pa = m.base(a).unwrap().0;
        m.free(a);
        assert_eq!(
            m.pooled(),
            48,
            "both 32-byte buffers left for the 48-byte one"
        );
        let b = m.alloc(48).unwrap();
        assert_eq!(m.base(b).unwrap().0, pa);
        m.free(b);
        // A buffer past the whole limit is not pooled, and evicts nothing.
        let c = m.alloc(128).unwrap();
        m.free(c);
        assert_eq!(m.pooled(), 48);
    }

    #[test]
    fn large_buffers_with_huge_pages_are_zeroed_and_reused_as_any_other() {
        let bytes = (HUGE_PAGE_MIN_BYTES + 3 * 8) as u64;
        for huge in [false, true] {
            let mut m = Memory::with_pool(1 << 30).huge_pages(huge);
            let a = m.alloc(bytes).unwrap();
            assert_eq!(m.bytes(a).unwrap().len() as u64, bytes);
            assert!(m.bytes(a).unwrap().iter().all(|&x| x == 0));
            m.bytes_mut(a).unwrap().fill(0x5A);
            let pa = m.base(a).unwrap().0;
            m.free(a);
            let b = m.alloc(bytes).unwrap();
            assert_eq!(m.base(b).unwrap().0, pa, "huge {huge}");
            assert!(m.bytes(b).unwrap().iter().all(|&x| x == 0), "huge {huge}");
        }
    }

    /// Whether the mapping of `/proc/self/smaps` that holds `addr` may get transparent huge
    /// pages (its `THPeligible` field).
    #[cfg(target_os = "linux")]
    fn thp_eligible(addr: usize) -> bool {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut inside = false;
        for line in smaps.lines() {
            let range = line.split_whitespace().next().unwrap_or("");
            if let Some((lo, hi)) = range.split_once('-')
                && let (Ok(lo), Ok(hi)) =
                    (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
            {
                inside = lo <= addr && addr < hi;
            } else if inside && let Some(v) = line.strip_prefix("THPeligible:") {
                return v.trim() == "1";
            }
        }
        panic!("no mapping holds {addr:#x}");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn large_buffers_ask_for_huge_pages_where_the_system_gives_them_on_request() {
        let mode = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .unwrap_or_default();
        // A process may have them turned off for itself (`PR_SET_THP_DISABLE`), whatever the
        // system's setting.
        let disabled = std::fs::read_to_string("/proc/self/status")
            .unwrap_or_default()
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["THP_enabled:", "0"]);
        let bytes = (4 * HUGE_PAGE_MIN_BYTES) as u64;
        for huge in [false, true] {
            let mut m = Memory::with_pool(0).huge_pages(huge);
            let a = m.alloc(bytes).unwrap();
            // A byte in the middle lies in a whole aligned span of the buffer.
            let mid = m.base(a).unwrap().0 as usize + bytes as usize / 2;
            let want = if disabled {
                false
            } else if mode.contains("[always]") {
                true
            } else if mode.contains("[madvise]") {
                huge
            } else {
                // `[never]`, or no transparent huge pages at all.
                false
            };
            assert_eq!(thp_eligible(mid), want, "huge {huge}, mode {mode:?}");
            m.free(a);
        }
    }

    #[test]
    fn odd_sizes_keep_their_length() {
        let mut m = Memory::default();
        let a = m.alloc(12).unwrap();
        assert_eq!(m.bytes(a).unwrap().len(), 12);
        assert!(m.bytes(BufferId(99)).is_err());
        assert!(m.alloc(u64::MAX).is_err());
    }
}
