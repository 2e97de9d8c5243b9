//! The driver calls the GPU back end makes, behind one trait ([`Device`]), so that the same
//! launcher runs on an NVIDIA GPU through the CUDA driver (`cuda`, feature `cuda`) and on
//! [`crate::sim::SimDevice`], an interpreter of the PTX our emitter writes that CI runs the
//! whole suite on.
//!
//! A device is one stream: every call is ordered after the calls before it. Memory is named
//! by device addresses (`u64`), as the PTX sees it: an allocation is a range of addresses
//! that holds its bytes until it is freed.

use crate::Result;

#[cfg(feature = "cuda")]
pub mod cuda;
pub mod wait;

/// The launch geometry: blocks per grid and threads per block, `x`, `y`, `z`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grid {
    /// Blocks per grid.
    pub blocks: [u32; 3],
    /// Threads per block.
    pub threads: [u32; 3],
}

/// One module loaded on a device: its entries, by the names they were asked for.
pub struct LoadedModule<F> {
    /// The entries, in the order they were asked for.
    pub functions: Vec<F>,
    /// What the driver's compiler said while loading it (its info log; may be empty).
    pub log: String,
}

/// The driver calls of the GPU back end (see the module documentation).
pub trait Device {
    /// An entry of a loaded module, ready to launch; the module stays loaded while any of
    /// its functions lives.
    type Function: Clone;

    /// A point in the stream's time ([`Device::mark`]).
    type Mark;

    /// The device's name, for reports.
    fn name(&self) -> Result<String>;

    /// A new allocation of `bytes` (at least one): its address. Its contents are whatever the
    /// device left there, possibly another runtime's bytes: the caller clears or writes it.
    fn alloc(&mut self, bytes: u64) -> Result<u64>;

    /// Frees the allocation at `address` (once every call before it has run).
    fn free(&mut self, address: u64);

    /// Sets `bytes` bytes from `address` to zero.
    fn memset_zero(&mut self, address: u64, bytes: u64) -> Result<()>;

    /// Copies `data` to `address`.
    fn write(&mut self, address: u64, data: &[u8]) -> Result<()>;

    /// Copies `out.len()` bytes from `address` into `out`, once every call before it has run.
    fn read(&mut self, address: u64, out: &mut [u8]) -> Result<()>;

    /// Copies `bytes` bytes from `src` to `dst` on the device.
    fn copy(&mut self, dst: u64, src: u64, bytes: u64) -> Result<()>;

    /// Loads a PTX module and finds its `entries`. `kernel` names the kernel it came from,
    /// for errors; a module the driver refuses is an error that quotes the driver's log.
    fn load(
        &mut self,
        kernel: &str,
        ptx: &str,
        entries: &[String],
    ) -> Result<LoadedModule<Self::Function>>;

    /// Launches `function` on `grid`, each argument a 64-bit word in the order of the
    /// entry's parameters.
    fn launch(&mut self, function: &Self::Function, grid: Grid, args: &[u64]) -> Result<()>;

    /// Waits until every call before it has run; reports a device error they met.
    fn synchronize(&mut self) -> Result<()>;

    /// Waits at most `limit` for every call before it to run: whether they all did.
    fn wait_for(&mut self, limit: std::time::Duration) -> Result<bool>;

    /// A point in the stream's time: the device records it when it reaches the mark.
    fn mark(&mut self) -> Result<Self::Mark>;

    /// The device's time from mark `from` to mark `to`, once the stream has reached `to`.
    fn elapsed(&mut self, from: &Self::Mark, to: &Self::Mark) -> Result<std::time::Duration>;

    /// Copies `data` to `address` at once, without waiting for the calls before it (the way
    /// the host stops a runaway launch: it sets the fault word that launch polls).
    fn write_now(&mut self, address: u64, data: &[u8]) -> Result<()>;
}
