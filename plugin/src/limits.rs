//! The resource limits of a plugin instance: a [`wasmtime::ResourceLimiter`] whose refusals
//! are typed errors, so that a fault is told apart by its type.

use std::time::Duration;

use wasmtime::ResourceLimiter;

/// Limits applied to every call into one plugin.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PluginLimits {
    /// The most linear memory a plugin instance may grow to, in bytes.
    pub memory_bytes: usize,
    /// The longest one call may run before it is interrupted.
    pub time: Duration,
}

impl Default for PluginLimits {
    fn default() -> Self {
        PluginLimits {
            memory_bytes: 256 << 20,
            time: Duration::from_secs(10),
        }
    }
}

/// The error a memory growth past the cap traps with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("memory growth to {desired} bytes refused: the cap is {cap} bytes")]
pub struct MemoryCapExceeded {
    /// The cap.
    pub cap: usize,
    /// The size asked for.
    pub desired: usize,
}

/// The limiter of one instance's store.
#[derive(Debug, Clone)]
pub struct Limiter {
    memory_bytes: usize,
}

impl Limiter {
    /// A limiter for `limits`.
    pub fn new(limits: &PluginLimits) -> Limiter {
        Limiter {
            memory_bytes: limits.memory_bytes,
        }
    }
}

/// The most instances one plugin's store may hold (a component instantiates a few core
/// instances).
const INSTANCES: usize = 4;

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_bytes {
            return Err(wasmtime::Error::new(MemoryCapExceeded {
                cap: self.memory_bytes,
                desired,
            }));
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        _desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(true)
    }

    fn instances(&self) -> usize {
        INSTANCES
    }
}
