//! The simulated GPU's global memory: allocations at 256-byte aligned addresses, a pool of
//! freed ones that later allocations of the same size class reuse (old bytes left in
//! place, as the driver's stream-ordered pool does), and the checked accesses of a launch
//! through a small cache of the allocations it touched last. And a block's shared memory
//! ([`Shared`]): its `.shared` arrays in a window of their own, refilled with [`FRESH`]
//! bytes for each block.

use std::collections::{BTreeMap, HashMap};

/// The first allocation's address.
pub(crate) const BASE: u64 = 0x7f00_0000_0000;
/// Allocations start at multiples of this.
const ALIGN: u64 = 256;
/// The unmapped gap after each allocation, so that a small overrun does not land in the
/// next one.
const GAP: u64 = 1 << 20;
/// What fresh memory holds: not zero, so that what a kernel forgot to clear shows.
pub(crate) const FRESH: u8 = 0xA5;
/// The most bytes the simulated GPU holds at once.
pub(crate) const CAPACITY: u64 = 16 << 30;

#[derive(Debug)]
struct Alloc {
    base: u64,
    /// The size asked for: accesses must fall below `base + len`.
    len: u64,
    /// The size class's bytes (`len` rounded up to `ALIGN`).
    bytes: Vec<u8>,
}

/// What is wrong with an access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Why {
    /// No allocation holds its first byte.
    Outside,
    /// It starts in the allocation at `base` of `len` bytes but runs past its end.
    PastEnd { base: u64, len: u64 },
    /// Its address is not a multiple of its size.
    Misaligned,
    /// A shared access whose first byte is in no shared array of the entry.
    SharedOutside,
    /// A shared access that starts in the shared array at `base` of `len` bytes but runs
    /// past its end.
    SharedPastEnd { base: u64, len: u64 },
}

/// An illegal access: `size` bytes at `addr`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Illegal {
    pub addr: u64,
    pub size: u64,
    pub why: Why,
}

impl std::fmt::Display for Illegal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (addr, size) = (self.addr, self.size);
        match self.why {
            Why::Outside => write!(f, "{size} bytes at 0x{addr:x}, outside every allocation"),
            Why::PastEnd { base, len } => write!(
                f,
                "{size} bytes at 0x{addr:x}, past the end of the allocation of {len} bytes at \
                 0x{base:x}"
            ),
            Why::Misaligned => write!(f, "{size} bytes at 0x{addr:x}, misaligned"),
            Why::SharedOutside => {
                write!(f, "{size} bytes at 0x{addr:x}, outside every shared array")
            }
            Why::SharedPastEnd { base, len } => write!(
                f,
                "{size} bytes at 0x{addr:x}, past the end of the shared array of {len} bytes \
                 at 0x{base:x}"
            ),
        }
    }
}

/// The simulated device memory.
#[derive(Debug)]
pub(crate) struct Memory {
    slab: Vec<Alloc>,
    /// Live allocations: base to slab index.
    live: BTreeMap<u64, usize>,
    /// Freed allocations by size class.
    pool: HashMap<u64, Vec<usize>>,
    next: u64,
    /// Bytes held by live and pooled allocations.
    held: u64,
}

impl Memory {
    pub(crate) fn new() -> Self {
        Memory {
            slab: Vec::new(),
            live: BTreeMap::new(),
            pool: HashMap::new(),
            next: BASE,
            held: 0,
        }
    }

    /// A new allocation of `len` bytes (at least one): a freed one of the same size class
    /// with its bytes, or fresh memory filled with [`FRESH`].
    pub(crate) fn alloc(&mut self, len: u64) -> Result<u64, String> {
        if len == 0 {
            return Err("an allocation of 0 bytes".to_string());
        }
        let class = len
            .checked_next_multiple_of(ALIGN)
            .ok_or_else(|| format!("an allocation of {len} bytes"))?;
        if let Some(id) = self.pool.get_mut(&class).and_then(Vec::pop) {
            let a = &mut self.slab[id];
            a.len = len;
            self.live.insert(a.base, id);
            return Ok(a.base);
        }
        let oom = || format!("out of memory: {len} bytes asked, {CAPACITY} in all");
        if self.held.saturating_add(class) > CAPACITY {
            return Err(oom());
        }
        let size = usize::try_from(class).map_err(|_| oom())?;
        let mut bytes = Vec::new();
        bytes.try_reserve_exact(size).map_err(|_| oom())?;
        bytes.resize(size, FRESH);
        let base = self.next;
        self.next = base
            .checked_add(class + GAP)
            .ok_or_else(|| "out of addresses".to_string())?;
        self.held += class;
        self.live.insert(base, self.slab.len());
        self.slab.push(Alloc { base, len, bytes });
        Ok(base)
    }

    /// Frees the allocation at `addr` into the pool; whether there was one.
    pub(crate) fn free(&mut self, addr: u64) -> bool {
        let Some(id) = self.live.remove(&addr) else {
            return false;
        };
        let class = self.slab[id].bytes.len() as u64;
        self.pool.entry(class).or_default().push(id);
        true
    }

    /// The live allocation holding `addr`: its slab index.
    fn find(&self, addr: u64) -> Option<usize> {
        let (_, &id) = self.live.range(..=addr).next_back()?;
        let a = &self.slab[id];
        (addr - a.base < a.len).then_some(id)
    }

    /// Where `size` bytes at `addr` lie: slab index and offset, or why they are illegal.
    fn locate(&self, addr: u64, size: u64) -> Result<(usize, usize), Illegal> {
        let illegal = |why| Illegal { addr, size, why };
        let id = self.find(addr).ok_or(illegal(Why::Outside))?;
        let a = &self.slab[id];
        let off = addr - a.base;
        if a.len - off < size {
            return Err(illegal(Why::PastEnd {
                base: a.base,
                len: a.len,
            }));
        }
        Ok((id, off as usize))
    }

    /// The `size` bytes at `addr` (any alignment; a host copy), if one allocation holds them.
    pub(crate) fn bytes(&mut self, addr: u64, size: u64) -> Result<&mut [u8], Illegal> {
        let (id, off) = self.locate(addr, size)?;
        let end = off + size as usize;
        self.slab[id].bytes.get_mut(off..end).ok_or(Illegal {
            addr,
            size,
            why: Why::Outside,
        })
    }
}

/// One cached allocation of a [`View`]: `len` bytes from `base` are slab entry `id`.
#[derive(Clone, Copy)]
struct Slot {
    base: u64,
    len: u64,
    id: usize,
}

/// How many allocations a view remembers.
const WAYS: usize = 4;

/// A launch's access to memory: aligned accesses of 1 to 8 bytes, each wholly inside one
/// live allocation, found through a cache of the last allocations hit.
pub(crate) struct View<'m> {
    mem: &'m mut Memory,
    cache: [Slot; WAYS],
    /// The slot the last access hit.
    last: usize,
    /// The slot the next miss replaces.
    hand: usize,
}

impl<'m> View<'m> {
    pub(crate) fn new(mem: &'m mut Memory) -> Self {
        let empty = Slot {
            base: 0,
            len: 0,
            id: 0,
        };
        View {
            mem,
            cache: [empty; WAYS],
            last: 0,
            hand: 0,
        }
    }

    /// The slab index and offset of `size` bytes at `addr`.
    #[inline]
    fn locate(&mut self, addr: u64, size: u64) -> Result<(usize, usize), Illegal> {
        if addr & (size - 1) != 0 {
            return Err(Illegal {
                addr,
                size,
                why: Why::Misaligned,
            });
        }
        let s = self.cache[self.last];
        let off = addr.wrapping_sub(s.base);
        if off < s.len && s.len - off >= size {
            return Ok((s.id, off as usize));
        }
        self.locate_slow(addr, size)
    }

    #[inline(never)]
    fn locate_slow(&mut self, addr: u64, size: u64) -> Result<(usize, usize), Illegal> {
        for (k, s) in self.cache.iter().enumerate() {
            let off = addr.wrapping_sub(s.base);
            if off < s.len && s.len - off >= size {
                self.last = k;
                return Ok((s.id, off as usize));
            }
        }
        let (id, off) = self.mem.locate(addr, size)?;
        let a = &self.mem.slab[id];
        self.cache[self.hand] = Slot {
            base: a.base,
            len: a.len,
            id,
        };
        self.last = self.hand;
        self.hand = (self.hand + 1) % WAYS;
        Ok((id, off))
    }

    /// Loads `N` bytes at `addr`, zero-extended.
    #[inline]
    pub(crate) fn load<const N: usize>(&mut self, addr: u64) -> Result<u64, Illegal> {
        let (id, off) = self.locate(addr, N as u64)?;
        let mut w = [0u8; 8];
        match self.mem.slab[id].bytes.get(off..off + N) {
            Some(b) => w[..N].copy_from_slice(b),
            None => {
                return Err(Illegal {
                    addr,
                    size: N as u64,
                    why: Why::Outside,
                });
            }
        }
        Ok(u64::from_le_bytes(w))
    }

    /// Stores the low `N` bytes of `value` at `addr`.
    #[inline]
    pub(crate) fn store<const N: usize>(&mut self, addr: u64, value: u64) -> Result<(), Illegal> {
        let (id, off) = self.locate(addr, N as u64)?;
        match self.mem.slab[id].bytes.get_mut(off..off + N) {
            Some(b) => b.copy_from_slice(&value.to_le_bytes()[..N]),
            None => {
                return Err(Illegal {
                    addr,
                    size: N as u64,
                    why: Why::Outside,
                });
            }
        }
        Ok(())
    }
}

/// Where a block's shared window starts: not 0, so that a null pointer is no shared address,
/// and far below any global allocation ([`BASE`]).
pub(crate) const SHARED_BASE: u64 = 0x1000;

/// The shared memory of the block being run: the bytes of the window from [`SHARED_BASE`],
/// and the arrays that an access must fall wholly inside (offsets in the window and
/// lengths, by address).
pub(crate) struct Shared {
    bytes: Vec<u8>,
    arrays: Vec<(u64, u64)>,
    /// The array the last access hit.
    last: usize,
}

impl Shared {
    /// The window of `arrays` (addresses and lengths, by address), unfilled.
    pub(crate) fn new(arrays: impl IntoIterator<Item = (u64, u64)>) -> Self {
        let arrays: Vec<(u64, u64)> = arrays
            .into_iter()
            .map(|(addr, len)| (addr - SHARED_BASE, len))
            .collect();
        let end = arrays
            .iter()
            .map(|&(off, len)| off + len)
            .max()
            .unwrap_or(0);
        Shared {
            bytes: vec![FRESH; end as usize],
            arrays,
            last: 0,
        }
    }

    /// Refills the window with [`FRESH`] bytes, for a new block (shared memory starts out
    /// as whatever the last block left; the simulator makes it a recognizable pattern).
    pub(crate) fn reset(&mut self) {
        self.bytes.fill(FRESH);
    }

    /// The window offset of `size` bytes at `addr`.
    #[inline]
    fn locate(&mut self, addr: u64, size: u64) -> Result<usize, Illegal> {
        if addr & (size - 1) != 0 {
            return Err(Illegal {
                addr,
                size,
                why: Why::Misaligned,
            });
        }
        let at = addr.wrapping_sub(SHARED_BASE);
        if let Some(&(off, len)) = self.arrays.get(self.last) {
            let rel = at.wrapping_sub(off);
            if rel < len && len - rel >= size {
                return Ok(at as usize);
            }
        }
        self.locate_slow(addr, size)
    }

    #[inline(never)]
    fn locate_slow(&mut self, addr: u64, size: u64) -> Result<usize, Illegal> {
        let at = addr.wrapping_sub(SHARED_BASE);
        for (k, &(off, len)) in self.arrays.iter().enumerate() {
            let rel = at.wrapping_sub(off);
            if rel < len {
                if len - rel < size {
                    let (base, len) = (off + SHARED_BASE, len);
                    let why = Why::SharedPastEnd { base, len };
                    return Err(Illegal { addr, size, why });
                }
                self.last = k;
                return Ok(at as usize);
            }
        }
        Err(Illegal {
            addr,
            size,
            why: Why::SharedOutside,
        })
    }

    /// Loads `N` bytes at `addr`, zero-extended.
    #[inline]
    pub(crate) fn load<const N: usize>(&mut self, addr: u64) -> Result<u64, Illegal> {
        let at = self.locate(addr, N as u64)?;
        let mut w = [0u8; 8];
        match self.bytes.get(at..at + N) {
            Some(b) => w[..N].copy_from_slice(b),
            None => {
                return Err(Illegal {
                    addr,
                    size: N as u64,
                    why: Why::SharedOutside,
                });
            }
        }
        Ok(u64::from_le_bytes(w))
    }

    /// Stores the low `N` bytes of `value` at `addr`.
    #[inline]
    pub(crate) fn store<const N: usize>(&mut self, addr: u64, value: u64) -> Result<(), Illegal> {
        let at = self.locate(addr, N as u64)?;
        match self.bytes.get_mut(at..at + N) {
            Some(b) => b.copy_from_slice(&value.to_le_bytes()[..N]),
            None => {
                return Err(Illegal {
                    addr,
                    size: N as u64,
                    why: Why::SharedOutside,
                });
            }
        }
        Ok(())
    }
}
