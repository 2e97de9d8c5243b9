//! `SimDevice`: an interpreter of the PTX our emitter writes, behind the same [`Device`] trait
//! as the CUDA driver, so that CI runs the GPU back end on the host.
//!
//! # The model
//! - A [`SimContext`] is one simulated GPU: its global memory and its sticky error, shared by
//!   every [`SimDevice`] opened on it (as the runtimes of one process share the CUDA primary
//!   context). [`SimDevice::new`] opens a device on a fresh context of its own.
//! - Memory: allocations lie at 256-byte aligned addresses from `0x7f00_0000_0000`, with an
//!   unmapped gap after each. Fresh memory holds `0xA5` bytes, not zeros. `free` puts an
//!   allocation in the context's pool, and a later allocation of the same size class (the
//!   size rounded up to 256 bytes), from any device on the context, gets it back with its
//!   old bytes, as the driver's stream-ordered pool may.
//! - Shared memory: each block has its own window of the entry's `.shared` arrays (the
//!   module's arrays it names, then its own, in declaration order at their alignment, from
//!   address `0x1000`; at most 48 KiB), filled with `0xA5` bytes when the block starts, as
//!   uninitialised shared memory is not zero. `mov.u64 %rd, array` gives an array's address
//!   in the window, which `ld.shared`, `st.shared`, `atom.shared` and `red.shared` take
//!   (from a 32- or 64-bit register). Dynamic (`.extern`) shared memory and generic
//!   addresses of shared memory (`cvta.shared`) are refused at load.
//! - Every access of a kernel must lie wholly inside one live allocation (a shared access:
//!   inside one shared array of the entry) and be aligned to its size; host copies (`read`,
//!   `write`, `copy`, `memset_zero`) must lie inside one allocation. Otherwise it is an
//!   illegal address: the context is *lost*, and that call and every later call of every
//!   device on the context fail with the same [`Error::DeviceLost`] (`free` does nothing).
//!   Its message names the kernel, the entry, the access (a shared one says so), the
//!   address, the thread, the block and the PTX line.
//! - `load` parses and decodes the whole module as the driver's JIT would; PTX it does not
//!   know is an [`Error::Driver`] quoting the kernel, the entry, the line and its text.
//! - `launch` runs the whole grid before it returns, block by block. A block of an entry
//!   without barriers runs its threads one after another, each to its end. A block of an
//!   entry with `bar.sync 0` (`barrier.sync 0`) runs in lockstep: every thread runs (in
//!   order of `%tid`, x fastest) until it reaches the barrier or ends, then all those at the
//!   barrier go on, and so on; threads that ended do not hold the others up. Other barriers
//!   (`bar.arrive`, `bar.red`, named barriers, thread counts) are refused at load.
//!   `synchronize` only reports the sticky error, `wait_for` is always done, `write_now` is
//!   a `write`, and marks are host instants (a launch's time is the time it took to
//!   simulate). A thread that runs past the step limit (2^28 instructions, counted across
//!   its barriers; [`SimContext::with_step_limit`]) stops the launch with
//!   [`Error::KernelFault`].
//!
//! # Semantics PTX leaves open
//! - Integer division by zero gives all ones (-1 for signed types), and the remainder by zero
//!   the dividend (the answers of common hardware dividers; the emitter guards both). The
//!   most negative value divided by -1 wraps to itself, with remainder 0.
//! - Float arithmetic is the host's IEEE arithmetic, round to nearest even, subnormals kept;
//!   NaN payloads are the host's (the IR does not fix them), except that `min`/`max` of two
//!   NaNs give the GPU's canonical NaN (`0x7fffffff`, `0x7fffffffffffffff`).
//! - Atomics are plain read-modify-writes: threads run one at a time. So are races: between
//!   two barriers, a block's threads run one after another in order of `%tid`.
//! - `clz` of 0 is the width; `bfind` of 0 (of -1 when signed) is `0xffffffff`.
//! - Memory-ordering qualifiers, scopes and cache hints are accepted and ignored; so are
//!   `membar` and `fence`.

mod decode;
mod exec;
mod lex;
mod memory;
mod operand;
mod ops;
mod parse;
mod scalar;

use std::sync::{Arc, Mutex, MutexGuard};

use crate::device::{Device, Grid, LoadedModule};
use crate::{Error, Result};
use memory::{Memory, View};
use parse::Entry;

/// The step limit of a thread by default.
pub const DEFAULT_STEP_LIMIT: u64 = 1 << 28;

/// The most register slots (registers and constants) of all the threads of a block of an
/// entry with barriers, which keeps one register file per thread: far more than a GPU's
/// 64K 32-bit registers a block.
const MAX_BLOCK_SLOTS: u64 = 1 << 25;

/// The most threads per block, and per dimension (as CUDA GPUs have them).
const MAX_BLOCK: u64 = 1024;
const MAX_BLOCK_DIMS: [u32; 3] = [1024, 1024, 64];
const MAX_GRID_DIMS: [u32; 3] = [i32::MAX as u32, 65535, 65535];

#[derive(Debug)]
struct State {
    mem: Memory,
    /// The sticky error's message, once the context is lost.
    lost: Option<String>,
    step_limit: u64,
}

/// One simulated GPU: its memory and sticky error, shared by the devices opened on it.
#[derive(Clone)]
pub struct SimContext {
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for SimContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimContext").finish_non_exhaustive()
    }
}

impl Default for SimContext {
    fn default() -> Self {
        SimContext::new()
    }
}

impl SimContext {
    /// A fresh simulated GPU, with the default step limit ([`DEFAULT_STEP_LIMIT`]).
    pub fn new() -> Self {
        SimContext::with_step_limit(DEFAULT_STEP_LIMIT)
    }

    /// A fresh simulated GPU whose threads may each run at most `steps` instructions.
    pub fn with_step_limit(steps: u64) -> Self {
        SimContext {
            state: Arc::new(Mutex::new(State {
                mem: Memory::new(),
                lost: None,
                step_limit: steps,
            })),
        }
    }

    /// A device on this context (a runtime's stream on the shared GPU).
    pub fn device(&self) -> SimDevice {
        SimDevice { ctx: self.clone() }
    }

    /// Whether the context is lost: the sticky error's message.
    pub fn lost(&self) -> Option<String> {
        self.lock().lost.clone()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while the lock was held left no broken invariant worth more than a panic.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A device on a [`SimContext`]: the [`Device`] the back end runs on without a GPU.
#[derive(Clone, Debug)]
pub struct SimDevice {
    ctx: SimContext,
}

impl Default for SimDevice {
    fn default() -> Self {
        SimDevice::new()
    }
}

/// An entry of a module loaded on a [`SimDevice`], decoded, ready to launch.
#[derive(Clone)]
pub struct SimFunction {
    entry: Arc<Entry>,
}

impl std::fmt::Debug for SimFunction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimFunction")
            .field("kernel", &self.entry.kernel)
            .field("entry", &self.entry.name)
            .finish_non_exhaustive()
    }
}

impl SimFunction {
    /// The entry's name.
    pub fn name(&self) -> &str {
        &self.entry.name
    }

    /// The kernel whose module it came from.
    pub fn kernel(&self) -> &str {
        &self.entry.kernel
    }

    /// How many parameters it takes.
    pub fn param_count(&self) -> usize {
        self.entry.params.len()
    }

    /// How many decoded instructions it has.
    pub fn instructions(&self) -> usize {
        self.entry.code.len()
    }
}

impl SimDevice {
    /// A device on a fresh context of its own.
    pub fn new() -> Self {
        SimContext::new().device()
    }

    /// The context it runs on.
    pub fn context(&self) -> &SimContext {
        &self.ctx
    }

    /// The context's state, or its sticky error.
    fn state(&self) -> Result<MutexGuard<'_, State>> {
        let s = self.ctx.lock();
        match &s.lost {
            Some(msg) => Err(Error::DeviceLost(msg.clone())),
            None => Ok(s),
        }
    }

    /// The context's sticky error, if it is lost.
    fn alive(&self) -> Result<()> {
        self.state().map(drop)
    }
}

/// Loses the context: records `msg` as its sticky error and returns it.
fn lose(s: &mut State, msg: String) -> Error {
    s.lost = Some(msg.clone());
    Error::DeviceLost(msg)
}

/// A host copy's illegal address.
fn host_illegal(what: &str, access: memory::Illegal) -> String {
    format!("an illegal address in a {what} of {access}")
}

impl Device for SimDevice {
    type Function = SimFunction;

    /// Host time: launches run eagerly, so the stream reaches a mark when it is made.
    type Mark = std::time::Instant;

    fn name(&self) -> Result<String> {
        self.alive()?;
        Ok("Weft PTX simulator".to_string())
    }

    fn alloc(&mut self, bytes: u64) -> Result<u64> {
        self.state()?.mem.alloc(bytes).map_err(Error::Memory)
    }

    fn free(&mut self, address: u64) {
        if let Ok(mut s) = self.state() {
            s.mem.free(address);
        }
    }

    fn memset_zero(&mut self, address: u64, bytes: u64) -> Result<()> {
        let mut s = self.state()?;
        if bytes == 0 {
            return Ok(());
        }
        match s.mem.bytes(address, bytes) {
            Ok(b) => {
                b.fill(0);
                Ok(())
            }
            Err(e) => Err(lose(&mut s, host_illegal("memset", e))),
        }
    }

    fn write(&mut self, address: u64, data: &[u8]) -> Result<()> {
        let mut s = self.state()?;
        if data.is_empty() {
            return Ok(());
        }
        match s.mem.bytes(address, data.len() as u64) {
            Ok(b) => {
                b.copy_from_slice(data);
                Ok(())
            }
            Err(e) => Err(lose(&mut s, host_illegal("copy to the device", e))),
        }
    }

    fn read(&mut self, address: u64, out: &mut [u8]) -> Result<()> {
        let mut s = self.state()?;
        if out.is_empty() {
            return Ok(());
        }
        match s.mem.bytes(address, out.len() as u64) {
            Ok(b) => {
                out.copy_from_slice(b);
                Ok(())
            }
            Err(e) => Err(lose(&mut s, host_illegal("copy from the device", e))),
        }
    }

    fn copy(&mut self, dst: u64, src: u64, bytes: u64) -> Result<()> {
        let mut s = self.state()?;
        if bytes == 0 {
            return Ok(());
        }
        let data = match s.mem.bytes(src, bytes) {
            Ok(b) => b.to_vec(),
            Err(e) => return Err(lose(&mut s, host_illegal("device copy", e))),
        };
        match s.mem.bytes(dst, bytes) {
            Ok(b) => {
                b.copy_from_slice(&data);
                Ok(())
            }
            Err(e) => Err(lose(&mut s, host_illegal("device copy", e))),
        }
    }

    fn load(
        &mut self,
        kernel: &str,
        ptx: &str,
        entries: &[String],
    ) -> Result<LoadedModule<SimFunction>> {
        self.alive()?;
        let parsed = parse::parse_module(kernel, ptx).map_err(|e| {
            let text = ptx
                .lines()
                .nth((e.line as usize).saturating_sub(1))
                .unwrap_or("")
                .trim();
            let text: String = text.chars().take(200).collect();
            let entry = e
                .entry
                .map(|n| format!(" (entry `{n}`)"))
                .unwrap_or_default();
            Error::Driver(format!(
                "kernel `{kernel}`: the PTX JIT failed: line {}{entry}: {}: `{text}`",
                e.line, e.message
            ))
        })?;
        let mut parsed: Vec<Arc<Entry>> = parsed.into_iter().map(Arc::new).collect();
        let mut functions = Vec::with_capacity(entries.len());
        for name in entries {
            let Some(entry) = parsed.iter_mut().find(|e| &e.name == name) else {
                return Err(Error::Driver(format!(
                    "kernel `{kernel}`: the module has no entry `{name}`"
                )));
            };
            functions.push(SimFunction {
                entry: entry.clone(),
            });
        }
        Ok(LoadedModule {
            functions,
            log: String::new(),
        })
    }

    fn launch(&mut self, function: &SimFunction, grid: Grid, args: &[u64]) -> Result<()> {
        let mut s = self.state()?;
        let entry = &*function.entry;
        let (kernel, name) = (&entry.kernel, &entry.name);
        if args.len() != entry.params.len() {
            return Err(Error::Driver(format!(
                "kernel `{kernel}`: entry `{name}` takes {} parameters, the launch passed {}",
                entry.params.len(),
                args.len()
            )));
        }
        check_grid(entry, grid).map_err(|why| {
            Error::Driver(format!(
                "kernel `{kernel}`: entry `{name}`: an invalid launch of {} blocks of {} \
                 threads: {why}",
                dims(grid.blocks),
                dims(grid.threads)
            ))
        })?;
        let threads: u64 = grid.threads.iter().map(|&t| u64::from(t)).product();
        if entry.barriers && threads * entry.template.len() as u64 > MAX_BLOCK_SLOTS {
            return Err(Error::Driver(format!(
                "kernel `{kernel}`: entry `{name}`: too many resources requested for a launch: \
                 {} registers a thread in blocks of {threads} threads",
                entry.template.len()
            )));
        }
        let limit = s.step_limit;
        let failed = {
            let mut view = View::new(&mut s.mem);
            exec::launch(entry, grid, args, &mut view, limit)
        };
        let Err(f) = failed else {
            return Ok(());
        };
        let at = |pc: usize| {
            format!(
                "thread {} of block {}, line {}",
                dims(f.thread),
                dims(f.block),
                entry.lines.get(pc).copied().unwrap_or(0)
            )
        };
        match f.stop {
            exec::Stop::Steps { pc } => Err(Error::KernelFault {
                kernel: kernel.clone(),
                message: format!(
                    "entry `{name}` ran past the simulator's step limit of {limit} \
                     instructions per thread ({})",
                    at(pc)
                ),
            }),
            exec::Stop::Illegal { pc, access, what } => {
                let why = access.why;
                let mut access = access.to_string();
                // The shared array overrun, by name.
                if let memory::Why::SharedPastEnd { base, .. } = why
                    && let Some(a) = entry.shared.iter().find(|a| a.base == base)
                {
                    access = access.replace(
                        "the shared array",
                        &format!("the shared array `{}`", a.name),
                    );
                }
                if why == memory::Why::SharedOutside {
                    access += &match (entry.shared.first(), entry.shared.last()) {
                        (Some(a), Some(z)) => format!(
                            " (the entry's shared arrays lie at 0x{:x}..0x{:x})",
                            a.base,
                            z.base + z.len
                        ),
                        _ => " (the entry has none)".to_string(),
                    };
                }
                let msg = format!(
                    "kernel `{kernel}`: entry `{name}`: an illegal memory access: {what} of \
                     {access} ({})",
                    at(pc)
                );
                Err(lose(&mut s, msg))
            }
        }
    }

    fn synchronize(&mut self) -> Result<()> {
        self.alive()
    }

    fn wait_for(&mut self, _limit: std::time::Duration) -> Result<bool> {
        self.state().map(|_| true)
    }

    fn mark(&mut self) -> Result<std::time::Instant> {
        self.alive()?;
        Ok(std::time::Instant::now())
    }

    fn elapsed(
        &mut self,
        from: &std::time::Instant,
        to: &std::time::Instant,
    ) -> Result<std::time::Duration> {
        self.alive()?;
        Ok(to.saturating_duration_since(*from))
    }

    fn write_now(&mut self, address: u64, data: &[u8]) -> Result<()> {
        self.write(address, data)
    }
}

/// `(x, y, z)`.
fn dims(d: [u32; 3]) -> String {
    format!("({}, {}, {})", d[0], d[1], d[2])
}

/// Whether `grid` is a launch CUDA would accept for `entry`.
fn check_grid(entry: &Entry, grid: Grid) -> std::result::Result<(), String> {
    for k in 0..3 {
        if grid.blocks[k] == 0 || grid.threads[k] == 0 {
            return Err("a dimension of 0".to_string());
        }
        if grid.blocks[k] > MAX_GRID_DIMS[k] {
            return Err(format!(
                "more than {} blocks along an axis",
                MAX_GRID_DIMS[k]
            ));
        }
        if grid.threads[k] > MAX_BLOCK_DIMS[k] {
            return Err(format!(
                "more than {} threads along an axis",
                MAX_BLOCK_DIMS[k]
            ));
        }
    }
    let threads: u64 = grid.threads.iter().map(|&t| u64::from(t)).product();
    let max = entry.max_threads.unwrap_or(MAX_BLOCK).min(MAX_BLOCK);
    if threads > max {
        return Err(format!("more than {max} threads per block"));
    }
    if let Some(req) = entry.req_threads
        && req != grid.threads
    {
        return Err(format!("the entry requires blocks of {}", dims(req)));
    }
    Ok(())
}
