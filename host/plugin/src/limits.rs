//! The resource limits of a plugin: a [`wasmtime::ResourceLimiter`] whose refusals are typed
//! errors (so that a fault is told apart by its type), and the quota of store bytes its host
//! calls are held to.

use std::time::Duration;

use wasmtime::ResourceLimiter;

/// Limits applied to every call into one plugin, and to both of its instances (the one that
/// serves calls and the one that serves kernel bodies).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PluginLimits {
    /// The most linear memory one instance may hold, all its memories together, in bytes.
    pub memory_bytes: usize,
    /// The longest one call may run before it is interrupted.
    pub time: Duration,
    /// The most bytes the stores the plugin creates may hold at once (its quota).
    pub store_bytes: u64,
}

impl Default for PluginLimits {
    fn default() -> Self {
        PluginLimits {
            memory_bytes: 256 << 20,
            time: Duration::from_secs(10),
            store_bytes: default_store_bytes(),
        }
    }
}

/// Half of this machine's physical memory (64 GiB where it cannot be read): the default
/// quota of store bytes per plugin.
pub fn default_store_bytes() -> u64 {
    // SAFETY: `sysconf` only reads system configuration; it has no memory-safety
    // preconditions.
    let (pages, page) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    match (u64::try_from(pages), u64::try_from(page)) {
        (Ok(pages), Ok(page)) if pages > 0 && page > 0 => pages.saturating_mul(page) / 2,
        _ => 64 << 30,
    }
}

/// The most linear memories one instance may have. A component made from Rust has one; the
/// shims `wit-component` adds have none.
pub const MEMORIES: usize = 1;

/// The most tables one instance may have (a component's main module has one; shims add a
/// few).
pub const TABLES: usize = 4;

/// The most elements one table may grow to.
pub const TABLE_ELEMENTS: usize = 100_000;

/// The most core instances one plugin store may hold (a component instantiates a few).
pub const INSTANCES: usize = 4;

/// The error a growth past a limit traps with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("memory growth to {desired} bytes refused: the cap is {cap} bytes")]
pub struct MemoryCapExceeded {
    /// The cap.
    pub cap: usize,
    /// The size asked for (all memories together).
    pub desired: usize,
}

/// The error a table growth past [`TABLE_ELEMENTS`] fails with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("table growth to {desired} elements refused: the cap is {TABLE_ELEMENTS}")]
pub struct TableCapExceeded {
    /// The size asked for.
    pub desired: usize,
}

/// The limiter of one instance's store: it caps the sum of all memories' sizes, the number
/// of memories, tables and instances, and the size of each table.
#[derive(Debug, Clone)]
pub struct Limiter {
    memory_bytes: usize,
    /// Bytes of linear memory the store holds now, all memories together.
    held: usize,
}

impl Limiter {
    /// A limiter for `limits`.
    pub fn new(limits: &PluginLimits) -> Limiter {
        Limiter {
            memory_bytes: limits.memory_bytes,
            held: 0,
        }
    }
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let total = (self.held - current.min(self.held)).saturating_add(desired);
        if total > self.memory_bytes {
            return Err(wasmtime::Error::new(MemoryCapExceeded {
                cap: self.memory_bytes,
                desired: total,
            }));
        }
        self.held = total;
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > TABLE_ELEMENTS {
            return Err(wasmtime::Error::new(TableCapExceeded { desired }));
        }
        Ok(true)
    }

    fn instances(&self) -> usize {
        INSTANCES
    }

    fn tables(&self) -> usize {
        TABLES
    }

    fn memories(&self) -> usize {
        MEMORIES
    }
}
