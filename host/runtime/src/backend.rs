//! The back-end seam: what the runtime needs of a machine that holds memory and runs kernels.
//!
//! A back end owns both the memory of stores and the code of kernels. The runtime decides what
//! runs where and with which data; the back end only allocates, copies, compiles and launches.
//! So a GPU back end can keep every buffer on the device and move bytes only when the host
//! reads them, and an MPI rank can allocate only the pieces of a store that its points use.
//!
//! The CPU back end (`weft-cpu`) implements this trait; the executor (see
//! [`crate::executor`]) works only through it.

use std::sync::Arc;
use std::time::Duration;

use weft_ir::Scalar;
use weft_ir::reduction::LoopPartial;

use crate::cache::Owner;
use crate::cancel::CancelToken;
use crate::kernel::{KernelEntry, KernelId};
use crate::{Dims, Error, Result};

/// A buffer of a back end: the memory of one storage (or of a piece of it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BufferId(pub u64);

/// One store argument of one point task, as the back end sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Binding {
    /// A rectangle of a buffer.
    Buffer {
        /// The buffer.
        buffer: BufferId,
        /// The element at index 0 in every dimension, in elements from the buffer's start.
        offset: u64,
        /// Extent of each dimension.
        extents: Dims<i64>,
        /// Stride of each dimension, in elements.
        strides: Dims<i64>,
        /// Global coordinates of the sub-store's origin (what `Op::Origin` reads).
        origin: Dims<i64>,
        /// Extents of the whole view the sub-store is cut from: the coordinates of the
        /// canonical reduction order ([`weft_ir::reduction`]) run over it.
        view: Dims<u64>,
        /// Bytes per element.
        element_size: usize,
        /// `Some(h)`: the kernel's stores to this argument are *deferred*. Each parallel loop
        /// that stores it (only ever at exactly the loop's own index; it never loads it) must
        /// behave as if its stores landed when the loop ends, after every point's loads; the
        /// kernel reads the same storage elsewhere through other arguments, shifted by at most
        /// `h` rows of dimension 0, and nothing after the store in the task touches it. A back
        /// end may keep rows it has computed in a small buffer and write each once nothing
        /// that still runs reads it, and must hold back the first and last `h` rows of every
        /// block of rows that runs apart (a chunk, a point task) until
        /// [`Backend::finish_deferred`].
        deferred: Option<u32>,
    },
    /// A task-local temporary of a fused task: zeroed scratch memory of the rectangle's size,
    /// dense and row-major, that lives only for this point.
    Scratch {
        /// Extent of each dimension.
        extents: Dims<i64>,
        /// Global coordinates of the sub-store's origin.
        origin: Dims<i64>,
        /// Extents of the whole view the sub-store is cut from.
        view: Dims<u64>,
        /// Bytes per element.
        element_size: usize,
    },
}

impl Binding {
    /// The extents of the whole view the sub-store is cut from.
    pub fn view(&self) -> &[u64] {
        match self {
            Binding::Buffer { view, .. } | Binding::Scratch { view, .. } => view,
        }
    }
}

/// Checks that a view of `extents` and `strides` (in elements) at element `offset` stays
/// inside a buffer of `len` bytes of `element_size`-byte elements: the check every back end
/// makes of a [`Binding::Buffer`] before it touches memory through it (the error says what
/// reaches outside). A view with an empty extent reaches nothing.
pub fn check_view(
    offset: u64,
    extents: &[i64],
    strides: &[i64],
    element_size: usize,
    len: usize,
) -> std::result::Result<(), String> {
    if view_inside(offset, extents, strides, element_size, len) {
        Ok(())
    } else {
        Err(format!(
            "a binding at element {offset} with extents {extents:?} and strides {strides:?} \
             reaches outside its buffer of {len} bytes"
        ))
    }
}

/// Whether [`check_view`] passes.
pub fn view_inside(
    offset: u64,
    extents: &[i64],
    strides: &[i64],
    element_size: usize,
    len: usize,
) -> bool {
    if extents.len() != strides.len() || extents.iter().any(|&e| e < 0) {
        return false;
    }
    if extents.contains(&0) {
        return offset.saturating_mul(element_size as u64) <= len as u64;
    }
    let (mut lo, mut hi) = (i128::from(offset), i128::from(offset));
    for (&e, &s) in extents.iter().zip(strides) {
        let reach = i128::from(e - 1) * i128::from(s);
        if reach < 0 {
            lo += reach;
        } else {
            hi += reach;
        }
    }
    let elements = (len / element_size.max(1)) as i128;
    lo >= 0 && hi < elements
}

/// Bytes per element of each store parameter of `params`, in order: what a launch's bindings
/// must have (see [`check_element_sizes`]).
pub fn store_element_sizes(params: &[weft_ir::Param]) -> Vec<usize> {
    params
        .iter()
        .filter_map(|p| match p {
            weft_ir::Param::Store { dtype, .. } => Some(dtype.size()),
            weft_ir::Param::Scalar { .. } => None,
        })
        .collect()
}

/// Checks that `bindings` are the store parameters whose element sizes are `sizes` (from
/// [`store_element_sizes`]): as many, each of its parameter's element size. Every back end
/// makes this check before it runs compiled code on the bindings, so that no code, however
/// it came to be cached under a kernel's id, reads or writes past a buffer. The error says
/// which argument differs.
pub fn check_element_sizes(
    sizes: &[usize],
    bindings: &[Binding],
) -> std::result::Result<(), String> {
    if bindings.len() != sizes.len() {
        return Err(format!(
            "{} store bindings for {} store parameters",
            bindings.len(),
            sizes.len()
        ));
    }
    for (i, (binding, &want)) in bindings.iter().zip(sizes).enumerate() {
        let (Binding::Buffer { element_size, .. } | Binding::Scratch { element_size, .. }) =
            binding;
        if *element_size != want {
            return Err(format!(
                "store argument {i} has {element_size}-byte elements, but the kernel was \
                 compiled for {want}-byte elements"
            ));
        }
    }
    Ok(())
}

/// A cache hit of `kernel` under its id, confirmed: [`Prepared::Cached`] when `cached` (the
/// entry the cache holds under that id) is this kernel ([`KernelEntry::same_kernel`]), and
/// the collision error otherwise: an id is never trusted alone.
pub fn confirm_hit(cached: &KernelEntry, kernel: &KernelEntry) -> Result<Prepared> {
    if cached.same_kernel(kernel) {
        Ok(Prepared::Cached)
    } else {
        Err(crate::kernel::id_collision(cached.name(), kernel))
    }
}

/// What preparing a kernel did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Prepared {
    /// The kernel was compiled already.
    Cached,
    /// The kernel was compiled now, in this much time.
    Compiled(Duration),
}

/// Counters of a back end's compiled functions: how many it compiled and how many it found
/// compiled already in its cache of functions (in memory or, from earlier processes, on disk).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FunctionCounts {
    /// Functions compiled.
    pub compiled: u64,
    /// Functions found compiled in the back end's cache.
    pub from_cache: u64,
}

/// Counters that a back end keeps of its memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Bytes in buffers allocated now.
    pub allocated: u64,
    /// Bytes of freed buffers kept for reuse.
    pub pooled: u64,
}

/// What the error of a launch refused or stopped because its job was cancelled says.
pub const CANCELLED_BY_JOB: &str = "stopped: its job was cancelled";

/// A machine that holds memory and runs kernels (see the module documentation).
///
/// Every method is safe: a back end must check what it is given (a binding outside its buffer,
/// an unknown buffer or kernel) and return an error rather than touch memory it should not.
pub trait Backend {
    /// The back end's name, for errors ("cpu", "ptx").
    fn name(&self) -> &'static str;

    /// A new buffer of `bytes` bytes, zeroed.
    fn alloc(&mut self, bytes: u64) -> Result<BufferId>;

    /// A new buffer of `bytes` bytes whose contents are unspecified: the executor asks for one
    /// only for a store that the task about to run writes whole before reading any of it, so
    /// a back end may skip the zero fill (a pass over memory). It may hold what a freed buffer
    /// of this back end held; it must never hold another back end's (another tenant's) memory.
    /// The default zeroes it anyway.
    fn alloc_uninit(&mut self, bytes: u64) -> Result<BufferId> {
        self.alloc(bytes)
    }

    /// Frees a buffer. Freeing an unknown buffer does nothing.
    fn free(&mut self, buffer: BufferId);

    /// Copies `data` into a buffer at byte `offset`.
    fn write(&mut self, buffer: BufferId, offset: u64, data: &[u8]) -> Result<()>;

    /// Copies bytes of a buffer, from byte `offset`, into `out`.
    fn read(&mut self, buffer: BufferId, offset: u64, out: &mut [u8]) -> Result<()>;

    /// Copies the first `bytes` bytes of buffer `from` to the start of buffer `to`, in the
    /// order of the back end's work: after every launch before it, before every one after.
    /// The default reads and writes through the host; a device copies on the device, without
    /// waiting for its work.
    fn copy(&mut self, from: BufferId, to: BufferId, bytes: u64) -> Result<()> {
        let len = usize::try_from(bytes)
            .map_err(|_| Error::Internal(format!("a copy of {bytes} bytes")))?;
        let mut data = vec![0u8; len];
        self.read(from, 0, &mut data)?;
        self.write(to, 0, &data)
    }

    /// Appends `len` bytes of a buffer, from byte `offset`, to `out`. The default zeroes the
    /// new bytes, then [`Backend::read`]s into them; a back end whose buffers are host memory
    /// copies straight onto the end, with no zeroing pass (`out` should have the capacity).
    fn read_append(
        &mut self,
        buffer: BufferId,
        offset: u64,
        len: usize,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        let at = out.len();
        out.resize(at + len, 0);
        self.read(buffer, offset, &mut out[at..])
    }

    /// Whether `kernel` is compiled and cached: an entry under its id that is confirmed to be
    /// this kernel ([`KernelEntry::same_kernel`]), never an id alone.
    fn is_prepared(&self, kernel: &Arc<KernelEntry>) -> bool;

    /// Compiles a kernel unless it is cached, and caches it, charged to `owner` (the plugin
    /// whose task needs it). A cached entry under the kernel's id is used only once confirmed
    /// to be this kernel; an entry of another kernel under the same id is an error
    /// ([`crate::Error::Internal`]), never a hit. The cache is bounded (see
    /// [`crate::cache`]): a kernel may be evicted, and is compiled again when a task needs
    /// it.
    fn prepare(&mut self, kernel: &Arc<KernelEntry>, owner: Owner) -> Result<Prepared>;

    /// Runs a prepared kernel on one point task: `bindings` are its store parameters in order,
    /// `scalars` its scalar parameters in order. A binding whose element size is not its
    /// parameter's element type's is refused before anything runs, so that no kernel, however
    /// it came to be cached, writes past a buffer. It may run asynchronously; a later call on
    /// the same back end sees its effects.
    ///
    /// A back end may hold back the float sums and products of parallel loops into 0-d stores:
    /// instead of folding them into the store, it keeps their canonical partial results
    /// ([`weft_ir::reduction::LoopPartial`], over the coordinates of the loop's view) for
    /// [`Backend::take_reductions`], so that the executor folds the merged parts of every
    /// point (and, across processes, of every rank) once per task, in the same bits however
    /// the launch was split.
    fn launch(&mut self, kernel: KernelId, bindings: &[Binding], scalars: &[Scalar]) -> Result<()>;

    /// Hands over the partial results held back by the launches since the last call (see
    /// [`Backend::launch`]), in launch order. Each names its target by the index of its store
    /// argument (its position in `bindings`), not by its kernel parameter.
    fn take_reductions(&mut self) -> Result<Vec<LoopPartial>>;

    /// Writes (`commit`) or drops the rows of deferred bindings that the launches since the
    /// last call held back (see [`Binding`]'s `deferred`): the executor commits them once
    /// every point task of a launch has run, and drops whatever a failed task left. A back end
    /// that holds nothing back does nothing.
    fn finish_deferred(&mut self, commit: bool) -> Result<()> {
        let _ = commit;
        Ok(())
    }

    /// Whether each launch that follows is the whole of its task (a task of one point, on
    /// one process); the executor sets it before each task's points. A sole launch may
    /// finish its task's work itself: fold a float reduction over a loop that covers the
    /// target's whole view into the target on the device (`target = target op result`, as
    /// the executor would) instead of holding the parts back for
    /// [`Backend::take_reductions`], and land its deferred stores at once. A back end that
    /// does neither ignores it.
    fn set_sole_launch(&mut self, sole: bool) {
        let _ = sole;
    }

    /// The cancel request of the job that runs now (`None`: none). A back end that can stop
    /// a running kernel attaches the flag its kernels check ([`CancelToken::attach`]) and
    /// refuses launches once the job is cancelled, with [`CANCELLED_BY_JOB`] in its error;
    /// the default ignores it (the job then stops at its next check outside kernels).
    fn set_cancel(&mut self, token: Option<Arc<CancelToken>>) {
        let _ = token;
    }

    /// Waits until every launch and copy issued so far has finished.
    fn synchronize(&mut self) -> Result<()>;

    /// The back end's memory counters.
    fn memory(&self) -> MemoryStats;

    /// The back end's counters of compiled functions (none where it keeps no such cache).
    fn functions(&self) -> FunctionCounts {
        FunctionCounts::default()
    }

    /// Records a mark in the device's stream: the device notes its time when it reaches the
    /// mark (on a GPU, a CUDA event). `None` where the back end runs on the host, whose clock
    /// is the device's.
    fn record_mark(&mut self) -> Result<Option<u64>> {
        Ok(None)
    }

    /// The device's time from mark `from` to mark `to` (waiting until the device has reached
    /// `to`); both marks are forgotten. `None` for marks this back end does not know.
    fn mark_elapsed(&mut self, from: u64, to: u64) -> Result<Option<std::time::Duration>> {
        let _ = (from, to);
        Ok(None)
    }

    /// A device-to-device copy probe: `samples` timed copies of `bytes` bytes between two
    /// buffers of the device, each as bytes moved (read plus written) per second, in GB/s:
    /// the bandwidth floor of a device whose memory the host cannot probe. `None` where the
    /// back end's memory is the host's (the CPU's probe measures it).
    fn copy_bandwidth(&mut self, bytes: u64, samples: usize) -> Result<Option<Vec<f64>>> {
        let _ = (bytes, samples);
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::view_inside;

    #[test]
    fn views_inside_and_outside_their_buffer() {
        // 3x4 f64 row-major in 96 bytes: the whole, a column, a reversed row.
        assert!(view_inside(0, &[3, 4], &[4, 1], 8, 96));
        assert!(!view_inside(1, &[3, 4], &[4, 1], 8, 96));
        assert!(view_inside(3, &[3], &[4], 8, 96));
        assert!(view_inside(3, &[4], &[-1], 8, 96));
        assert!(!view_inside(2, &[4], &[-1], 8, 96));
        // Empty views reach nothing, but their offset must lie in the buffer.
        assert!(view_inside(12, &[0, 4], &[4, 1], 8, 96));
        assert!(!view_inside(13, &[0], &[1], 8, 96));
        // Malformed shapes.
        assert!(!view_inside(0, &[-1], &[1], 8, 96));
        assert!(!view_inside(0, &[2, 2], &[1], 8, 96));
    }
}
